"""Claude Code, the real agent (`@anthropic-ai/claude-code` from npm, installed by
scripts/install-claude-code.sh), pointed at the proxy in front of the real llama-server with
the tiny model and a 16,384-token window: its system prompt, tool definitions and environment
fit (about 12,500 of the tiny model's tokens), with room for an answer.

Claude Code runs as a user runs it (`claude -p PROMPT --output-format json`, stdin piped in),
offline: a fresh HOME, a dummy API key, telemetry, error reporting, the auto-updater and all
nonessential traffic off, and an HTTPS proxy at a closed loopback port for anything not sent
to 127.0.0.1, so that a request anywhere else fails at once instead of leaving the machine.
Its output limit is set with its own variable (`CLAUDE_CODE_MAX_OUTPUT_TOKENS`): the tiny
model never ends an answer, so every answer runs to max_tokens.

Three scenarios: a prompt answered; a prompt that does not fit the window (a large file
piped in) answered after recovery, with the usage of the call that answered; and a prompt
no recovery can fit (a system prompt over the window) shown as Claude Code's own "Prompt is
too long", in bounded time. Then the proxy with what the agent's default settings send: a
streamed answer with thinking on starts before it ends.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import time
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatcli.chat.localmodel import SMOLLM2
from chatcli.chat.tinymodel import TRAINING_TEXT
from chatcli.proxy.app import ProxyOptions
from tests.english import is_english
from tests.proxy_harness import running_proxy, smollm2_upstream, upstream_at

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

AGENT_N_CTX = 16384  # tests/servers.py's `llama_16k`
MODEL_NAME = "chatcli-tiny"
SHORT_SYSTEM_PROMPT = "You are a helpful assistant. Answer in one short sentence."
MAX_OUTPUT_TOKENS = 256  # what Claude Code asks for (CLAUDE_CODE_MAX_OUTPUT_TOKENS)
REAL_MODEL_ATTEMPTS = 3  # runs of a sampling model, until one ends on its own
RUN_TIMEOUT_S = 180.0  # one `claude -p`: a hang fails the test, never the suite
ROOT = Path(__file__).resolve().parent.parent
RECORDED = ROOT / "tests" / "data" / "claude-code" / "messages-request.json"


def claude_binary() -> Path:
    """Where scripts/install-claude-code.sh puts Claude Code ($CHATCLI_CLAUDE overrides)."""
    explicit = os.environ.get("CHATCLI_CLAUDE")
    return Path(explicit) if explicit else ROOT / ".cache/npm-clients/node_modules/.bin/claude"


@pytest.fixture(scope="module")
def claude() -> Path:
    binary = claude_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(
            f"Claude Code not found at {binary}; install it with scripts/install-claude-code.sh"
        )
    return binary


def offline_env(home: Path, proxy: str, max_output_tokens: int | None) -> dict[str, str]:
    """Claude Code's environment: only the proxy, nothing sent anywhere else (and its output
    limit, None: its default)."""
    limit = (
        {}
        if max_output_tokens is None
        else {"CLAUDE_CODE_MAX_OUTPUT_TOKENS": str(max_output_tokens)}
    )
    return {
        **limit,
        "PATH": "/usr/bin:/bin",
        "HOME": str(home),
        "ANTHROPIC_BASE_URL": proxy,
        "ANTHROPIC_API_KEY": "sk-chatcli-test",
        "DISABLE_AUTOUPDATER": "1",
        "DISABLE_TELEMETRY": "1",
        "DISABLE_ERROR_REPORTING": "1",
        "CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC": "1",
        # Anything not for 127.0.0.1 goes to a proxy nothing listens on: it fails at once.
        "HTTPS_PROXY": "http://127.0.0.1:9",
        "HTTP_PROXY": "http://127.0.0.1:9",
        "NO_PROXY": "127.0.0.1,localhost",
    }


def run_claude(
    claude: Path,
    proxy: str,
    home: Path,
    prompt: str,
    *,
    stdin: str = "",
    args: tuple[str, ...] = (),
    max_output_tokens: int | None = MAX_OUTPUT_TOKENS,
) -> tuple[dict[str, Any], float]:
    """`claude -p PROMPT --output-format json` with `stdin` piped in: its result, and the
    seconds it took."""
    home.mkdir(exist_ok=True)
    started = time.monotonic()
    run = subprocess.run(
        [str(claude), "-p", prompt, "--output-format", "json", *args],
        input=stdin,
        capture_output=True,
        text=True,
        env=offline_env(home, proxy, max_output_tokens),
        cwd=home,
        timeout=RUN_TIMEOUT_S,
    )
    took = time.monotonic() - started
    assert run.stdout.strip(), f"no output (exit {run.returncode}): {run.stderr[-2000:]}"
    result: dict[str, Any] = json.loads(run.stdout)
    return result, took


def metric(proxy: str, name: str, labels: Mapping[str, str] | None = None) -> float:
    """The value of one series of the proxy's /metrics (summed over the series of `name`
    when `labels` is None)."""
    total = 0.0
    for line in httpx.get(proxy + "/metrics").text.splitlines():
        series, _, value = line.rpartition(" ")
        named = series == name or series.startswith(name + "{")
        if named and (labels is None or all(f'{k}="{v}"' in series for k, v in labels.items())):
            total += float(value)
    return total


@pytest.fixture(scope="module")
def proxy(llama_16k: str) -> Iterator[str]:
    """`chatcli proxy --provider openai-compatible --context-window 16384` in front of it."""
    upstream = upstream_at(
        "openai-compatible",
        llama_16k + "/v1",
        model=MODEL_NAME,
        context_window=AGENT_N_CTX,
        environ={"CHATCLI_HOME": "/nonexistent"},
    )
    with running_proxy(upstream) as url:
        yield url


def test_a_plain_prompt_is_answered(claude: Path, proxy: str, tmp_path: Path) -> None:
    before = metric(proxy, "chatcli_proxy_recoveries_total")
    result, _ = run_claude(claude, proxy, tmp_path / "home", "Say hello.")
    assert result["is_error"] is False, shown(result)
    assert result["result"]  # the tiny model's random text, as Claude Code shows it
    usage = result["usage"]
    assert 0 < usage["input_tokens"] + usage["cache_read_input_tokens"] < AGENT_N_CTX
    assert metric(proxy, "chatcli_proxy_recoveries_total") == before  # it fitted


@pytest.fixture(scope="module")
def smollm2_proxy(smollm2_sampling_server: str) -> Iterator[str]:
    """The proxy in front of the real small model, with its whole 8,192-token window, each
    answer an independent sample."""
    with running_proxy(smollm2_upstream(smollm2_sampling_server)) as url:
        yield url


def test_a_real_model_answers_claude_code_and_ends_on_its_own(
    claude: Path, smollm2_proxy: str, tmp_path: Path
) -> None:
    # Claude Code (thinking on, streamed), answered by SmolLM2-135M-Instruct, which ends its
    # answer itself: no stop string, no max_tokens cut. Its system prompt and tool
    # definitions (about 4,200 of SmolLM2's tokens) swamp a 135M model, which then loops
    # until the output limit (seen: "create a new CLAUDE.md file with code that will help you
    # create a new CLAUDE.md file ..."): here a short system prompt of the user's and no tools.
    # Claude Code still sends its environment (working directory, OS version, date) as a
    # system message after the user's, which the model samples an answer to: a few runs in
    # twenty run on to the output limit (13 of 16 ended, replayed with other directories,
    # dates and seeds). What the proxy does holds on every run: a cut answer reaches Claude Code as
    # cut, an ended one as ended; and one of a few runs ends on its own in English.
    results = []
    for attempt in range(REAL_MODEL_ATTEMPTS):
        result, _ = run_claude(
            claude,
            smollm2_proxy,
            tmp_path / f"home-{attempt}",
            "Say hello.",
            args=("--system-prompt", SHORT_SYSTEM_PROMPT, "--tools", ""),
        )
        results.append(shown(result))
        if result["is_error"]:
            assert "output token maximum" in result["result"], shown(result)  # said as cut
            continue
        if result["num_turns"] > 1:  # Claude Code sent the looping answer back for more
            continue  # (seen once in CI: three turns of one loop): no answer ended on its own
        assert result["stop_reason"] == "end_turn", shown(result)
        usage = result["usage"]
        prompt = usage["input_tokens"] + usage["cache_read_input_tokens"]
        assert 0 < prompt + usage["output_tokens"] < SMOLLM2.context_length, shown(result)
        if is_english(result["result"]):  # not a bare "Today's date is 2026-12-06."
            break
    ended = not result["is_error"] and result["num_turns"] == 1
    assert ended and is_english(result["result"]), results


def test_claude_code_with_its_default_settings_is_answered(
    claude: Path, proxy: str, tmp_path: Path
) -> None:
    # Its own output limit (far over the window) and thinking on: max_tokens is fitted to
    # the room the window leaves, and the answer streams.
    result, _ = run_claude(claude, proxy, tmp_path / "home", "Say hi.", max_output_tokens=None)
    assert result["is_error"] is False, shown(result)
    assert result["result"] and result["num_turns"] == 1


def test_a_piped_file_over_the_window_is_answered_after_recovery(
    claude: Path, proxy: str, tmp_path: Path
) -> None:
    before = metric(proxy, "chatcli_proxy_recoveries_total")
    big = "\n".join(f"{i}: {TRAINING_TEXT}" for i in range(200))  # ~3x the room left
    result, _ = run_claude(claude, proxy, tmp_path / "home", "Summarize the file above.", stdin=big)
    assert result["is_error"] is False, shown(result)
    assert result["result"]
    assert metric(proxy, "chatcli_proxy_recoveries_total") > before
    usage = result["usage"]
    prompt = usage["input_tokens"] + usage["cache_read_input_tokens"]
    # The usage of the call that answered: a prompt that fits the window.
    assert prompt > 0 and prompt + usage["output_tokens"] <= AGENT_N_CTX


def test_a_system_prompt_over_the_window_is_claude_codes_own_context_error(
    claude: Path, proxy: str, tmp_path: Path
) -> None:
    requests = metric(proxy, "chatcli_proxy_requests_total", {"endpoint": "/v1/messages"})
    system = " ".join([TRAINING_TEXT] * 60)  # system prompts are always kept: nothing helps
    result, took = run_claude(
        claude, proxy, tmp_path / "home", "Say hello.", args=("--append-system-prompt", system)
    )
    assert result["is_error"] is True
    # Claude Code's own message, with the numbers it read from the proxy's error.
    assert "prompt is too long" in result["result"].lower(), result["result"]
    assert str(AGENT_N_CTX) in result["result"], result["result"]
    sent = metric(proxy, "chatcli_proxy_requests_total", {"endpoint": "/v1/messages"}) - requests
    assert sent <= 2, f"{sent} requests: a retry loop"
    assert took < 60, f"{took:.0f} s"
    # The proxy's error speaks to the client: the window, what was tried, what it can do.
    body = json.loads(RECORDED.read_text())
    body.update(stream=False, system=system)
    headers = {"anthropic-version": "2023-06-01"}
    answer = httpx.post(proxy + "/v1/messages", json=body, headers=headers, timeout=60)
    message = answer.json()["error"]["message"]
    assert answer.status_code == 400 and message.startswith("prompt is too long: ")
    assert f"{AGENT_N_CTX:,}-token context window" in message and "level 3" in message
    assert "/clear" not in message and "--context-window" not in message, message


@pytest.fixture(scope="module")
def escalating_proxy(llama_16k: str) -> Iterator[str]:
    """The same, started with `--escalate-past-client-limit`."""
    upstream = upstream_at(
        "openai-compatible",
        llama_16k + "/v1",
        model=MODEL_NAME,
        context_window=AGENT_N_CTX,
        environ={"CHATCLI_HOME": "/nonexistent"},
    )
    options = ProxyOptions(escalate_past_client_limit=True)
    with running_proxy(upstream, options=options) as url:
        yield url


def test_claude_codes_max_tokens_is_the_answers_ceiling(
    claude: Path, proxy: str, tmp_path: Path
) -> None:
    escalations = metric(proxy, "chatcli_proxy_escalations_total")
    result, _ = run_claude(claude, proxy, tmp_path / "home", "Say hello.", max_output_tokens=2)
    # Each answer stops at the 2 tokens Claude Code asked for; Claude Code's own handling
    # of that follows (it asks to go on, a few times, then says so).
    assert result["usage"]["output_tokens"] == 2 * result["num_turns"], shown(result)
    assert metric(proxy, "chatcli_proxy_escalations_total") == escalations


def test_a_continued_answer_tells_claude_code_the_final_calls_usage(
    claude: Path, escalating_proxy: str, tmp_path: Path
) -> None:
    proxy = escalating_proxy
    calls = metric(proxy, "chatcli_proxy_recovery_calls_total")
    result, _ = run_claude(claude, proxy, tmp_path / "home", "Say hello.", max_output_tokens=2)
    # The proxy continued each answer past Claude Code's 2 tokens (several calls, each with
    # the ~12,500-token prompt); Claude Code was told the usage of each answer's last call,
    # which fits the window, where the calls' sum would be over it.
    assert metric(proxy, "chatcli_proxy_escalations_total") >= 1
    extra = metric(proxy, "chatcli_proxy_recovery_calls_total") - calls
    turns = result["num_turns"]
    assert extra >= turns, shown(result)
    usage = result["usage"]
    prompt = (usage["input_tokens"] + usage["cache_read_input_tokens"]) / turns
    assert AGENT_N_CTX / 2 < prompt < AGENT_N_CTX, shown(result)
    assert (
        metric(proxy, "chatcli_proxy_recovery_tokens_total", {"kind": "input"})
        + metric(proxy, "chatcli_proxy_recovery_tokens_total", {"kind": "cache_read"})
        >= extra * AGENT_N_CTX / 2
    )  # the other calls' prompts, told apart


def test_a_whole_recovered_answer_names_its_extra_calls_in_headers(escalating_proxy: str) -> None:
    body = json.loads(RECORDED.read_text())
    body.update(stream=False, max_tokens=2)
    answer = httpx.post(
        escalating_proxy + "/v1/messages",
        json=body,
        headers={"anthropic-version": "2023-06-01"},
        timeout=RUN_TIMEOUT_S,
    )
    assert answer.status_code == 200, answer.text
    calls = int(answer.headers["x-chatcli-recovery-calls"])
    extra = dict(
        part.strip().split("=") for part in answer.headers["x-chatcli-recovery-usage"].split(",")
    )
    usage = answer.json()["usage"]
    prompt = usage["input_tokens"] + usage["cache_read_input_tokens"]
    assert calls >= 1 and AGENT_N_CTX / 2 < prompt < AGENT_N_CTX
    assert int(extra["input_tokens"]) + int(extra["cache_read_tokens"]) >= calls * prompt * 0.9
    # Streamed, the headers go out first: the same figures come in a comment before the end.
    body.update(stream=True)
    headers = {"anthropic-version": "2023-06-01"}
    streamed = httpx.post(
        escalating_proxy + "/v1/messages", json=body, headers=headers, timeout=RUN_TIMEOUT_S
    ).text
    told = streamed.index(": chatcli: recovery: ")
    assert told < streamed.index("event: message_stop")
    # Its own count: a second request's escalations need not stop where the first one's did
    # (seen: 2 whole, 3 streamed, in a loaded full run).
    said = re.match(r": chatcli: recovery: (\d+) upstream call\(s\) besides", streamed[told:])
    assert said is not None and int(said.group(1)) >= 1, streamed[told : told + 200]


def test_a_streamed_answer_with_thinking_on_starts_before_it_ends(proxy: str) -> None:
    """What Claude Code's default settings send (thinking on, a large max_tokens), streamed:
    the first bytes come as the upstream sends them, not held to the end of the answer."""
    body = {
        "model": "claude-opus-5-5",
        "max_tokens": 3000,
        "thinking": {"type": "adaptive"},
        "stream": True,
        "stop_sequences": ["@@@"],  # instead of the server's own stop: a long answer
        "messages": [{"role": "user", "content": "Tell me a long story."}],
    }
    started = time.monotonic()
    deltas: list[float] = []
    headers = {"anthropic-version": "2023-06-01"}
    with httpx.stream(
        "POST", proxy + "/v1/messages", json=body, headers=headers, timeout=RUN_TIMEOUT_S
    ) as answer:
        for line in answer.iter_lines():
            if line == "event: content_block_delta":
                deltas.append(time.monotonic() - started)
    ended = time.monotonic() - started
    assert len(deltas) > 500
    # Held whole, every delta would come in the last moment; live, they span the answer.
    assert deltas[0] < ended / 3 and deltas[-1] - deltas[0] > ended / 2, (deltas[0], ended)


def shown(result: dict[str, Any]) -> str:
    """What a failed assertion shows of Claude Code's result."""
    keys = ("result", "is_error", "stop_reason", "api_error_status", "num_turns", "usage")
    return json.dumps({k: result.get(k) for k in keys})[:3000]

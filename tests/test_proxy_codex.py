"""Real Codex in front of the proxy: the Codex CLI (`@openai/codex` from npm, installed by
scripts/install-codex.sh) driven with `codex exec --json`, its default tools, configured as the
README's Codex recipe says (a model provider whose `base_url` is the proxy, `wire_api =
"responses"`), in front of the real C++ llama-server running the tiny random model.

Codex's first request is about 14,400 tokens of the tiny model's (its instructions, developer
messages and tools), so the upstream here has a window of `CODEX_N_CTX` tokens: Codex's prompt
fits, with a large file piped in it does not. The unrecoverable case is tests/servers.py's
1,024-token server, smaller than Codex's own instructions. The tiny model never ends an answer
on its own; the server here is given a grammar that ends each answer within 40 characters, so
that an answer is complete (Codex fails a turn whose answer was cut at the output limit). The
answers are random text: the tests check the protocol (exit status, Codex's JSON events, the
proxy's metrics), not what is said.

Codex runs offline: analytics, feedback, OpenTelemetry export, the update check, the curated
plugins' sync and the login-shell snapshot are off in its config (`OFFLINE`), its home and
`CODEX_HOME` are temporary directories, and it is given only the proxy's loopback URL.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatcli.chat.tinymodel import TRAINING_TEXT, write_tiny_model
from tests.english import is_english
from tests.proxy_harness import running_proxy, smollm2_upstream
from tests.test_proxy_llama import llama_upstream, recoveries

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

CODEX_N_CTX = 20480  # Codex's first request fits; with FILE_LINES lines piped in it does not
FILE_LINES = 700  # about 23,000 tokens of the tiny model's
MAX_TOKENS = 64  # the proxy's output limit (Codex sets none); the grammar ends answers sooner
ENDING_GRAMMAR = "root ::= [a-z ]{4,40}"  # every answer ends, within 40 characters
REAL_MODEL_ATTEMPTS = 3  # runs of a sampling model, until one ends on its own
RUN_TIMEOUT_S = 300.0
SHORT_INSTRUCTIONS = "You are a helpful assistant. Answer in one short sentence.\n"
REPO = Path(__file__).resolve().parent.parent

# Codex's config beyond the provider: nothing reaches beyond 127.0.0.1, nothing touches the
# machine's shell profile (`shell_snapshot` runs a login shell to record its environment).
OFFLINE = """\
check_for_update_on_startup = false

[analytics]
enabled = false

[feedback]
enabled = false

[otel]
exporter = "none"
trace_exporter = "none"
metrics_exporter = "none"

[features]
plugins = false
shell_snapshot = false
"""


def codex_binary() -> Path:
    """Where scripts/install-codex.sh puts Codex ($CHATCLI_CODEX overrides)."""
    explicit = os.environ.get("CHATCLI_CODEX")
    return Path(explicit) if explicit else REPO / ".cache/npm-clients/node_modules/.bin/codex"


@pytest.fixture(scope="module")
def codex() -> Path:
    binary = codex_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(f"codex not found at {binary}; install it with scripts/install-codex.sh")
    return binary


@pytest.fixture(scope="module")
def codex_llama(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A llama-server with a `CODEX_N_CTX`-token window whose answers end (module docstring)."""
    from tests import servers  # a plugin of this module: imported once pytest has loaded it

    launcher = servers.llama_server_command()
    pytest.importorskip(
        "gguf", reason="gguf is not installed: pip install 'chatcli-recovery[local]'"
    )
    model = write_tiny_model(
        tmp_path_factory.mktemp("model") / "tiny.gguf", context_length=CODEX_N_CTX
    )
    port = servers._free_port()
    command = [
        *launcher,
        *("--model", str(model), "--alias", servers.MODEL_NAME),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--ctx-size", str(CODEX_N_CTX), "--parallel", "1", "--threads", "1", "--seed", "1"),
        *("--grammar", ENDING_GRAMMAR),
    ]
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with servers._running(command, f"http://127.0.0.1:{port}", "/health", log) as url:
        yield url


@pytest.fixture(scope="module")
def proxy(codex_llama: str) -> Iterator[str]:
    upstream = llama_upstream(codex_llama, context_window=CODEX_N_CTX, max_tokens=MAX_TOKENS)
    with running_proxy(upstream) as url:
        yield url


@pytest.fixture(scope="module")
def small_proxy(llama_1024: str) -> Iterator[str]:
    """The proxy in front of a 1,024-token server: Codex's own instructions do not fit."""
    with running_proxy(llama_upstream(llama_1024, max_tokens=MAX_TOKENS)) as url:
        yield url


@dataclass(frozen=True, slots=True)
class Run:
    """One `codex exec --json`: its exit status, its JSON events, its stderr, its duration."""

    returncode: int
    events: list[dict[str, Any]]
    stderr: str
    seconds: float

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e.get("type") == kind]

    def answers(self) -> list[str]:
        items = [e["item"] for e in self.of_type("item.completed")]
        return [i["text"] for i in items if i.get("type") == "agent_message"]


def run_codex(
    codex: Path,
    proxy: str,
    tmp_path: Path,
    prompt: str,
    stdin: str = "",
    *,
    instructions: str | None = None,
) -> Run:
    """`codex exec --json PROMPT` (with `stdin` piped in) against `proxy`, as the README's
    recipe configures it, offline, in an empty working directory. `instructions`: Codex's
    base instructions replaced by these (its `model_instructions_file`)."""
    home, codex_home, work = tmp_path / "home", tmp_path / "codex-home", tmp_path / "work"
    for directory in (home, codex_home, work):
        directory.mkdir()
    replaced = ""
    if instructions is not None:
        (codex_home / "instructions.md").write_text(instructions)
        replaced = f'model_instructions_file = "{codex_home / "instructions.md"}"\n'
    (codex_home / "config.toml").write_text(
        'model = "local"\n'
        'model_provider = "chatcli"\n'
        f"{replaced}"
        f"{OFFLINE}\n"
        "[model_providers.chatcli]\n"
        'name = "chatcli proxy"\n'
        f'base_url = "{proxy}/v1"\n'
        'env_key = "CODEX_PROXY_KEY"\n'
        'wire_api = "responses"\n'
    )
    env = {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(home),
        "CODEX_HOME": str(codex_home),
        "CODEX_PROXY_KEY": "any",
    }
    command = [str(codex), "exec", "--json", "--strict-config", "--ephemeral"]
    command += ["--skip-git-repo-check", prompt]
    started = time.monotonic()
    done = subprocess.run(
        command,
        input=stdin,
        capture_output=True,
        text=True,
        env=env,
        cwd=work,
        timeout=RUN_TIMEOUT_S,
    )
    events = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return Run(done.returncode, events, done.stderr, time.monotonic() - started)


def responses_answered(proxy: str) -> dict[str, float]:
    """The proxy's `/v1/responses` requests so far, by status."""
    out: dict[str, float] = {}
    for line in httpx.get(proxy + "/metrics").text.splitlines():
        if line.startswith('chatcli_proxy_requests_total{endpoint="/v1/responses"'):
            status = line.split('status="', 1)[1].split('"', 1)[0]
            out[status] = float(line.rsplit(" ", 1)[1])
    return out


def big_file(lines: int = FILE_LINES) -> str:
    """`lines` numbered lines of the tiny model's training text."""
    words = TRAINING_TEXT.split()
    step = len(words) - 12
    return "\n".join(f"{i}: " + " ".join(words[(i * 7) % step :][:12]) for i in range(lines))


def test_a_plain_prompt_is_answered(codex: Path, proxy: str, tmp_path: Path) -> None:
    before = responses_answered(proxy).get("200", 0)
    run = run_codex(codex, proxy, tmp_path, "Say hi.")
    assert run.returncode == 0, (run.events, run.stderr)
    assert run.of_type("turn.completed") and not run.of_type("turn.failed")
    assert [a for a in run.answers() if a.strip()]  # the answer arrived
    assert responses_answered(proxy).get("200", 0) > before


@pytest.fixture(scope="module")
def smollm2_proxy(smollm2_server: str) -> Iterator[str]:
    """The proxy in front of the real small model, with its whole 8,192-token window."""
    with running_proxy(smollm2_upstream(smollm2_server, max_tokens=MAX_TOKENS)) as url:
        yield url


def test_a_real_model_answers_codex_and_ends_on_its_own(
    codex: Path, smollm2_proxy: str, tmp_path: Path
) -> None:
    # No grammar here: SmolLM2-135M-Instruct ends its answer itself, within the proxy's
    # output limit (Codex fails a turn whose answer was cut). Codex's own instructions (many
    # thousand tokens) swamp a 135M model, which then loops until the limit: a short set of
    # the user's replaces them. Codex still sends its environment (working directory, date)
    # and its skills' list, and the model samples its answer: about one run in ten loops
    # until the proxy gives up continuing it (9 of 10 ended; with a limit of 256, 2 of 6).
    # A cut answer fails Codex's turn, said as failed; one of a few runs ends on its own.
    runs, answers = [], []
    for attempt in range(REAL_MODEL_ATTEMPTS):
        where = tmp_path / f"run-{attempt}"
        where.mkdir()
        run = run_codex(codex, smollm2_proxy, where, "Say hello.", instructions=SHORT_INSTRUCTIONS)
        runs.append((run.events, run.stderr))
        if run.returncode != 0:
            assert run.of_type("turn.failed"), (run.events, run.stderr)  # a failed turn, said
            continue
        assert run.of_type("turn.completed") and not run.of_type("turn.failed")
        answers = [a for a in run.answers() if a.strip()]
        if answers and is_english(" ".join(answers)):
            break
    assert run.returncode == 0 and answers and is_english(" ".join(answers)), runs


def test_a_prompt_over_the_window_is_answered_after_recovery(
    codex: Path, proxy: str, tmp_path: Path
) -> None:
    before = recoveries(proxy)
    run = run_codex(codex, proxy, tmp_path, "Summarize this file.", stdin=big_file())
    assert run.returncode == 0, (run.events, run.stderr)
    assert run.of_type("turn.completed") and not run.of_type("turn.failed")
    assert [a for a in run.answers() if a.strip()]
    assert recoveries(proxy) > before  # it did not fit: a level was applied


def test_an_unrecoverable_prompt_is_codexs_own_context_error_at_once(
    codex: Path, small_proxy: str, tmp_path: Path
) -> None:
    run = run_codex(codex, small_proxy, tmp_path, "Say hi.")
    assert run.returncode != 0
    failed = run.of_type("turn.failed")
    assert failed and "context window" in failed[0]["error"]["message"]
    assert not run.answers()
    assert responses_answered(small_proxy) == {"400": 1}  # one request: no retry, no loop
    assert run.seconds < 60

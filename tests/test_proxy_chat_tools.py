"""Proxy traffic seen by the chat's own tools, end to end: requests through `chatcli proxy`
(configured as the command configures it, recording into the chat's store) are listed by
`chatcli sessions list`, shown by `chatcli sessions show`, exported by `chatcli sessions
export`, and `/cost` in `chatcli --resume <proxied session>` shows their tokens, their cost
and the share of each prompt the upstream reported as cached. The upstreams are replay
servers playing real bodies: OpenAI's (gpt-4o, priced in the catalog) and Ollama's with the
cached count it reports since ollama#16428 (tests/data/ollama-usage.json, ou-3)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from chatcli.proxy.sessions import SESSION_HEADER
from chatcli.store import SessionStore
from tests.proxy_harness import running_proxy
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_cli_inprocess import run
from tests.test_openai_adapter import CHAT_TEXT

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

pytest_plugins = ("tests.postgres",)

KEY = "sk-upstream"
ANSWER = CHAT_TEXT["choices"][0]["message"]["content"]
OLLAMA_CACHED = next(
    r["body"]
    for r in json.loads((Path(__file__).parent / "data" / "ollama-usage.json").read_text())
    if r["id"] == "ou-3"
)


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


@pytest.fixture
def home(tmp_path: Path) -> Path:
    (tmp_path / "home").mkdir()
    return tmp_path / "home"


def environ(location: str | Path, home: Path) -> dict[str, str]:
    """The chat's store: its own file under CHATCLI_HOME, or the PostgreSQL database."""
    env = {"OPENAI_API_KEY": KEY, "CHATCLI_HOME": str(home), "HOME": str(home)}
    return env if isinstance(location, Path) else {**env, "CHATCLI_DATABASE_URL": location}


@contextmanager
def proxy(env: dict[str, str], *flags: str) -> Iterator[str]:
    """`chatcli proxy FLAGS`, recording into the chat's store."""
    from chatcli.proxy.main import _configured, build_parser

    up, guard, options = _configured(build_parser().parse_args(list(flags)), env)
    with running_proxy(up, guard=guard, options=options) as url:
        yield url


def ask(url: str, session: str, messages: list[dict[str, Any]]) -> None:
    headers = {SESSION_HEADER: session}
    with openai.OpenAI(
        base_url=url + "/v1", api_key="k", max_retries=0, default_headers=headers
    ) as oa:
        oa.chat.completions.create(model="any", messages=messages)  # type: ignore[arg-type]


def test_the_chats_tools_see_proxied_sessions_their_tokens_cost_and_cached_share(
    location: str | Path, upstream: ReplayServer, home: Path
) -> None:
    env = environ(location, home)
    first = [{"role": "user", "content": "weather in SF?"}]
    upstream.add(Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    with proxy(env, "--provider", "openai", "--model", "gpt-4o", "--base-url", upstream.url) as url:
        ask(url, "tool-7", first)
        ask(
            url,
            "tool-7",
            [
                *first,
                {"role": "assistant", "content": ANSWER},
                {"role": "user", "content": "thanks"},
            ],
        )
    upstream.add(Scripted(body=OLLAMA_CACHED))
    local = ("--provider", "openai-compatible", "--model", "qwen3:8b", "--base-url", upstream.url)
    local = (*local, "--context-window", "32768")  # stated: no discovery calls
    with proxy(env, *local) as url:
        ask(url, "local-3", [{"role": "user", "content": "the long prompt again"}])

    code, listing = run(home, [], ("sessions", "list", "--json"), env=env)
    assert code == 0
    listed = {s["id"]: s for s in json.loads(listing)}
    assert listed.keys() == {"tool-7", "local-3"}
    assert (listed["tool-7"]["provider"], listed["tool-7"]["model"]) == ("openai", "gpt-4o")
    assert listed["tool-7"]["message_count"] == 4 and listed["local-3"]["message_count"] == 2

    code, shown = run(home, [], ("sessions", "show", "tool-7"), env=env)
    assert code == 0 and "session tool-7 · openai · gpt-4o" in shown
    assert "weather in SF?" in shown and "thanks" in shown and ANSWER[:40] in shown

    code, exported = run(home, [], ("sessions", "export", "local-3", "--format", "md"), env=env)
    assert code == 0 and "the long prompt again" in exported

    # /cost in the chat reopened on a proxied session: its requests, tokens and cost.
    code, screen = run(home, ["/cost"], ("--resume", "tool-7"), env=env)
    assert code == 0
    with SessionStore(
        location if not isinstance(location, Path) else home / "sessions.db"
    ) as store:
        requests = store.requests("tool-7")
    assert [r.usage.prompt_tokens for r in requests] == [14, 14]  # the recorded usage
    cost = sum(r.cost_usd or 0 for r in requests)
    assert cost > 0
    session_line = next(row for row in screen.splitlines() if row.startswith("Session:"))
    assert "unknown" not in session_line and f"${cost:.6f}" in session_line
    rows = [row for row in screen.splitlines() if "proxy" in row and "gpt-4o" in row]
    assert len(rows) == 2, screen

    # ... and the share of the prompt the upstream read from its cache: 20,438 of 20,480.
    code, screen = run(home, ["/cost"], ("--resume", "local-3"), env=env)
    assert code == 0
    (row,) = [row for row in screen.splitlines() if "proxy" in row and "qwen3:8b" in row]
    cells = [cell.strip() for cell in row.strip("│ ").split("│")]
    # in (the whole prompt, as under each answer: 42 uncached + 20,438 read from the cache),
    # out, read from the cache
    assert cells[3:6] == ["20,480", "12", "20,438"]
    assert cells[-1] == "100%"  # 20,438 / 20,480, rounded
    assert "20,480 in" in next(r for r in screen.splitlines() if r.startswith("Session:"))


async def test_the_recovery_share_of_a_proxied_request_is_what_the_proxy_can_know(
    tmp_path: Path,
) -> None:
    """As the chat counts it: all of a failed request, none of a one-call answer, unknown
    when continuations were summed into the answer's usage."""
    from dataclasses import replace

    from chatcli.events import Continued
    from chatcli.messages import Message, StopReason, Usage
    from chatcli.proxy.sessions import ProxyRecord, SessionRecorder
    from chatcli.recovery import Reply

    recorder = SessionRecorder(SessionStore(tmp_path / "db"), upstream="openai test")
    answer = Reply(
        message=Message.assistant("a"),
        usage=Usage(input_tokens=1000, output_tokens=100),
        events=(),
        truncated=False,
        view=(Message.user("q"),),
        stop_reason=StopReason.END_TURN,
        calls=1,
    )
    continued = replace(answer, events=(Continued(attempt=1, max_tokens=100),), calls=2)
    for key, reply in (("failed", None), ("one-call", answer), ("continued", continued)):
        messages = (Message.user("q"),)
        await recorder.record(ProxyRecord(key=key, messages=messages, reply=reply, model="gpt-4o"))
    recorder.close()
    with SessionStore(tmp_path / "db") as store:
        (failed,) = store.requests("failed")
        (one,) = store.requests("one-call")
        (cont,) = store.requests("continued")
    assert failed.recovery_cost_usd == failed.cost_usd == 0.0
    assert one.cost_usd is not None and one.cost_usd > 0 and one.recovery_cost_usd == 0.0
    assert cont.cost_usd == one.cost_usd and cont.recovery_cost_usd is None

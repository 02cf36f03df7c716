"""What the chat shows of prompt caches: the cached share of each request as the provider
reported it (the real Anthropic SDK against the replay server, the API reference's usage
blocks), and the request that broke the cache, with the reason the engine knows."""

from __future__ import annotations

import io
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from chatcli.chat.cache import BATCH, CLEAR, COMPACTION, OTHER, RECOVERY, cache_break
from chatcli.chat.session import ChatSession
from chatcli.cli.render import cache_lines, cost_table, turn_footer
from chatcli.compaction import SUMMARY_SECTIONS
from chatcli.config import MicrocompactConfig
from chatcli.messages import Message, ToolCall
from chatcli.providers.anthropic import Anthropic
from chatcli.store import SessionStore
from tests.fakes import ScriptedProvider, WindowedProvider, response
from tests.replay import Scripted, replay_server
from tests.test_settings_wire import CACHE_READ, CACHE_WRITE
from tests.test_sticky import cut, prose


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore(tmp_path / "s.db") as opened:
        yield opened


def chat(store: SessionStore, provider: object, **options: Any) -> ChatSession:
    return ChatSession.open(store, provider, provider_name="test", model="m", **options)  # type: ignore[arg-type]


def screen(renderable: object) -> str:
    out = io.StringIO()
    Console(file=out, width=200).print(renderable)
    return " ".join(out.getvalue().split())


def screen_lines(renderable: object) -> list[str]:
    out = io.StringIO()
    Console(file=out, width=200).print(renderable)
    return out.getvalue().splitlines()


def breaks(session: ChatSession) -> list[str]:
    return list(session.cost_summary().cache_breaks.values())


def test_cost_and_context_show_the_cached_share_the_provider_reported(
    store: SessionStore,
) -> None:
    with replay_server() as server:
        server.add(Scripted(body=CACHE_WRITE), Scripted(body=CACHE_READ))
        provider = Anthropic("claude-haiku-4-5", api_key="sk-ant-test", base_url=server.url)
        session = chat(store, provider, max_tokens=500)
        session.send("What is the weather like in San Francisco?")
        turn = session.send("And tomorrow?")
    requests = session.cost_summary().requests
    assert requests[1].usage.cache_read_tokens == 2188
    rows = [line.split("│") for line in screen_lines(cost_table(session.cost_summary()))]
    cells = {row[1].strip(): [cell.strip() for cell in row] for row in rows if len(row) > 10}
    # "in" counts the same under the answer and in /cost: the whole prompt, cache included
    # (they showed 13,588 and 8,323 for one session).
    assert "2,633 in · " in screen(turn_footer(turn)) and cells["2"][4] == "2,633"
    # "cached": the first request wrote the cache; the second read 2,188 of its 35 + 410 +
    # 2,188 prompt tokens from it: 83%.
    assert cells["1"][6:8] == ["0", "2,188"] and cells["1"][10] == "0%"
    assert cells["2"][6:8] == ["2,188", "410"] and cells["2"][10] == "83%"
    assert "prompt cache, share of each prompt read from it: #1 0%, #2 83%" in screen(
        cache_lines(session.cost_summary())
    )


def agent_step(i: int, size: int = 6_000) -> tuple[Message, Message]:
    call = ToolCall(id=f"call_{i}", name="read_file", arguments={"path": f"m{i}.py"})
    result = "".join(f"def f{i}_{n}(x):\n    return x + {n}\n" for n in range(size // 30))
    return Message.assistant(f"Reading m{i}.py.", tool_calls=(call,)), Message.tool(call.id, result)


def test_a_batch_of_stubs_is_named_as_what_broke_the_cache(store: SessionStore) -> None:
    # A trigger of 5,000 tokens: results of ~6,000 chars pass it within a few steps.
    provider = ScriptedProvider(script=[response("ok") for _ in range(12)])
    config = MicrocompactConfig(trigger_tokens=5_000)
    session = chat(store, provider, microcompaction=config)
    session.append((Message.user("Read the modules one by one."),))
    for i in range(12):
        session.append(agent_step(i))
        session.send(None)
    summary = session.cost_summary()
    marked = [i for i, r in enumerate(summary.requests) if r.id in summary.cache_breaks]
    # Exactly the requests that did not start with the whole previous request are marked.
    sent = [request.messages for request in provider.requests]
    broken = [i for i in range(1, len(sent)) if sent[i][: len(sent[i - 1])] != sent[i - 1]]
    assert marked == broken and 0 < len(broken) < len(sent) - 1
    assert set(summary.cache_breaks.values()) == {BATCH}


def test_a_recovery_cut_is_named_as_what_broke_the_cache(store: SessionStore) -> None:
    provider = WindowedProvider(window=3_000)
    session = chat(store, provider, max_tokens=400, auto_compaction=False)
    replies = [session.send(prose(turn)).reply for turn in range(18)]
    cuts = sum(1 for reply in replies if cut(reply))
    assert cuts >= 1 and breaks(session) == [RECOVERY] * cuts


def test_a_compaction_and_a_clear_are_named_as_what_broke_the_cache(
    store: SessionStore,
) -> None:
    words = "the parser fails on tabs so fix the tokenizer and keep tests green"
    summary = "\n".join(f"## {section}\nthe parser fails on tabs" for section in SUMMARY_SECTIONS)
    script = [response(f"answer {i}: {words * 8}") for i in range(6)] + [response(summary)]
    script += [response("after the compaction"), response("after the clear")]
    session = chat(store, ScriptedProvider(script=script))
    for i in range(6):
        session.send(f"question {i}: {words}")
    session.compact()
    session.send("go on")
    session.clear()
    session.send("start again")
    assert breaks(session) == [COMPACTION, CLEAR]
    assert "#8 broke the prompt cache: a compaction" in screen(cache_lines(session.cost_summary()))
    shown = screen(cost_table(session.cost_summary()))
    assert "✗ #9 broke the prompt cache: a /clear" in shown and " ✗ 0% " in shown


def test_cache_break_judges_only_what_it_knows() -> None:
    a, b, c = Message.user("a"), Message.assistant("b"), Message.user("c")
    assert cache_break(None, (a, b), ()) is None  # nothing sent before: unknown
    assert cache_break((a, b), (a, b, c), ()) is None  # extends: the cache is reused
    edited = cache_break((a, b), (a, Message.assistant("B"), c), ())
    assert edited is not None and (edited.reused, edited.previous) == (1, 2)
    assert edited.reason == OTHER

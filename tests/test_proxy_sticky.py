"""Sticky cuts through the proxy: once a recovery level cut a conversation, the next requests
of it (on this replica or on another sharing the store) forward that cut, byte for byte, then
what came after it, so the upstream's prompt cache keeps the prefix; a history that does not
extend the cut one gets a fresh cut. The official `openai` SDK against the proxy, in front of
a replay server playing real recorded upstream bodies (OpenAI's own overflow, pe-056); the
stores are a new SQLite file and a new database on a real PostgreSQL server."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest

from chatcli.history.sticky import StickyView
from chatcli.messages import Message
from chatcli.proxy.app import ProxyOptions
from chatcli.proxy.sessions import SESSION_HEADER, SessionRecorder, StickyViews
from chatcli.store import SessionStore
from tests.proxy_harness import running_proxy, upstream_at
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_openai_adapter import CHAT_TEXT

pytest_plugins = ("tests.postgres",)

ENV = {"OPENAI_API_KEY": "sk-upstream", "CHATCLI_HOME": "/nonexistent"}
ANSWER = CHAT_TEXT["choices"][0]["message"]["content"]
OVERFLOW = next(r for r in provider_errors("openai") if r["id"] == "pe-056")  # 4,097 tokens
MODEL = "a-fine-tune-no-catalog-knows"  # the upstream declares no window: the overflow says it
STREAMED = [data for _, data in sse_events("openai-chat-text.txt")]
HEADERS = {SESSION_HEADER: "ticket-9"}


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


@contextmanager
def replica(location: str | Path | None, upstream: ReplayServer) -> Iterator[str]:
    """A proxy in front of `upstream`, recording into the store at `location` (None: no
    store, its cuts in memory only)."""
    recorder = None
    if location is not None:
        recorder = SessionRecorder(SessionStore(location), upstream="openai test")
    up = upstream_at("openai", upstream.url + "/v1", model=MODEL, environ=ENV)
    with running_proxy(up, options=ProxyOptions(sessions=recorder)) as url:
        yield url


def ask(url: str, messages: list[dict[str, Any]], *, stream: bool = False) -> str:
    with openai.OpenAI(
        base_url=url + "/v1", api_key="k", max_retries=0, default_headers=HEADERS
    ) as oa:
        if not stream:
            reply = oa.chat.completions.create(model=MODEL, messages=messages)  # type: ignore[arg-type]
            return reply.choices[0].message.content or ""
        chunks = oa.chat.completions.create(model=MODEL, messages=messages, stream=True)  # type: ignore[call-overload]
        return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def long_chat(turns: int = 31) -> list[dict[str, Any]]:
    """About 9,000 tokens: over the 4,097 the overflow states."""
    roles = ("user", "assistant")
    said = [f"turn {i} " + "lorem ipsum dolor " * 60 for i in range(turns)]
    return [{"role": "system", "content": "be brief"}] + [
        {"role": roles[i % 2], "content": text} for i, text in enumerate(said)
    ]


def forwarded(upstream: ReplayServer, n: int) -> list[Any]:
    return list(upstream.requests[n].json()["messages"])


def test_without_a_store_the_next_request_of_a_cut_conversation_keeps_the_cut(
    upstream: ReplayServer,
) -> None:
    history = long_chat()
    upstream.add(replayed_error(OVERFLOW), Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    with replica(None, upstream) as url:
        assert ask(url, history) == ANSWER
        cut = forwarded(upstream, 1)
        assert len(cut) < len(history)  # the recovery cut the view
        later = [
            *history,
            {"role": "assistant", "content": ANSWER},
            {"role": "user", "content": "go on"},
        ]
        assert ask(url, later) == ANSWER
    # The second request is the first one's cut, byte for byte, then what came after it.
    assert forwarded(upstream, 2) == [*cut, *later[-2:]]
    assert len(upstream.requests) == 3  # no overflow paid again


def test_replicas_sharing_a_store_keep_one_cut_and_a_rewound_history_gets_a_new_one(
    location: str | Path, upstream: ReplayServer
) -> None:
    history = long_chat()
    upstream.add(replayed_error(OVERFLOW), Scripted(events=STREAMED))
    upstream.add(*[Scripted(body=CHAT_TEXT)] * 3)
    with replica(location, upstream) as first:
        said = ask(first, history, stream=True)  # streamed: cut, then recorded
    cut = forwarded(upstream, 1)
    assert said and len(cut) < len(history)
    grown = [*history, {"role": "assistant", "content": said}, {"role": "user", "content": "more"}]
    with replica(location, upstream) as second:  # never saw the conversation
        assert ask(second, grown) == ANSWER
        assert forwarded(upstream, 2) == [*cut, *grown[-2:]]
        # Rewound: the client dropped its last turns and asked something else.
        rewound = [*history[:-4], {"role": "user", "content": "something else"}]
        assert ask(second, rewound) == ANSWER
    fresh = forwarded(upstream, 3)
    assert fresh[-1] == {"role": "user", "content": "something else"}
    assert fresh[: len(cut)] != cut  # a cut of its own (pre-flighted: the window is learned)
    assert len(fresh) < len(rewound)
    assert len(upstream.requests) == 4
    with SessionStore(location) as store:
        found = store.conversation_cut("ticket-9")
        assert found is not None
        session, sticky = found
        assert session == "ticket-9~1"  # the rewound branch holds the latest cut
        assert sticky.upto == len(rewound)
        sent = store.view(session, sticky.request_id)
        assert [m.text for m in sent][-1] == "something else"


def test_the_chat_resuming_a_proxied_session_starts_from_its_cut(
    tmp_path: Path, upstream: ReplayServer
) -> None:
    """The cut is the session's sticky view, as the chat stores its own: `chatcli --resume`
    of a proxied conversation keeps it too."""
    from chatcli.chat.session import ChatSession
    from chatcli.providers.registry import create_provider

    history = long_chat()
    upstream.add(replayed_error(OVERFLOW), Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    with replica(tmp_path / "db", upstream) as url:
        ask(url, history)
    cut = forwarded(upstream, 1)
    with SessionStore(tmp_path / "db") as store:
        provider = create_provider(
            "openai", model=MODEL, base_url=upstream.url + "/v1", environ=ENV
        )
        chat = ChatSession.open(
            store, provider, provider_name="openai", model=MODEL, resume="ticket-9"
        )
        chat.send("and now from the chat")
    sent = forwarded(upstream, 2)
    assert sent[: len(cut)] == cut
    assert sent[len(cut) :] == [
        {"role": "assistant", "content": ANSWER},
        {"role": "user", "content": "and now from the chat"},
    ]


async def test_sticky_views_keep_the_latest_used_conversations_and_answer_has_cut() -> None:
    cuts = StickyViews(size=2)
    history = (Message.user("a"), Message.assistant("b"))
    views = {k: StickyView.of(history, history[1:]) for k in ("x", "y", "z")}
    assert not cuts.has_cut("x") and await cuts.get("x") is None
    for key, view in views.items():
        assert cuts.kept(key, None, view) is view
    assert [cuts.has_cut(k) for k in ("x", "y", "z")] == [False, True, True]  # x the oldest
    assert await cuts.get("y") is views["y"]
    assert cuts.kept("y", views["y"], views["y"]) is None  # kept, not made: nothing to record
    assert cuts.kept("y", views["y"], None) is None

"""Proxy traffic in the session store, on SQLite and on a real PostgreSQL server: the official
`openai` SDK against the proxy, in front of a replay server playing real recorded upstream
bodies. Conversations become sessions (by header or by hash), only what is new is appended,
an edited history branches, every request is recorded with its events before its answer
ends, and a window one proxy learned pre-flights another's first request."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from chatcli.messages import Message, Role
from chatcli.proxy.app import ProxyOptions
from chatcli.proxy.sessions import SESSION_HEADER, SessionRecorder, fingerprint, session_key
from chatcli.store import SessionStore
from chatcli.wire.dialect import RequestError
from tests.proxy_harness import running_proxy, upstream_at
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_openai_adapter import CHAT_TEXT

# `location`: each test runs on a new SQLite file and on a new PostgreSQL database.
pytest_plugins = ("tests.postgres",)

ENV = {"OPENAI_API_KEY": "sk-upstream", "CHATCLI_HOME": "/nonexistent"}
ANSWER = CHAT_TEXT["choices"][0]["message"]["content"]
UPSTREAM = "openai test"
# pe-056: OpenAI's own overflow, stating a 4,097-token window.
OVERFLOW = next(r for r in provider_errors("openai") if r["id"] == "pe-056")


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


@contextmanager
def proxy(location: str | Path, upstream: ReplayServer, model: str = "gpt-4o") -> Iterator[str]:
    """A proxy recording into the store at `location` (closed when the block ends)."""
    recorder = SessionRecorder(
        SessionStore(location),
        upstream=UPSTREAM,
        settings={"provider": "openai", "model": model},
    )
    up = upstream_at("openai", upstream.url + "/v1", model=model, environ=ENV)
    with running_proxy(up, options=ProxyOptions(sessions=recorder)) as url:
        yield url


def client(url: str, **headers: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, default_headers=headers)


def ask(url: str, messages: list[dict[str, Any]], **headers: str) -> str:
    with client(url, **headers) as oa:
        reply = oa.chat.completions.create(model="gpt-4o", messages=messages)  # type: ignore[arg-type]
    return reply.choices[0].message.content or ""


SYSTEM = {"role": "system", "content": "be brief"}


def turns(*texts: str) -> list[dict[str, Any]]:
    """The system prompt, then user/assistant turns alternating from a user one."""
    roles = ("user", "assistant")
    return [SYSTEM, *({"role": roles[i % 2], "content": t} for i, t in enumerate(texts))]


def test_a_conversation_is_one_session_that_grows_by_what_is_new(
    location: str | Path, upstream: ReplayServer
) -> None:
    upstream.add(*[Scripted(body=CHAT_TEXT)] * 3)
    with proxy(location, upstream) as url:
        assert ask(url, turns("hi")) == ANSWER
        assert ask(url, turns("hi", ANSWER, "and then?")) == ANSWER
        assert ask(url, turns("hi", ANSWER, "and then?", ANSWER, "thanks")) == ANSWER
    with SessionStore(location) as store:
        (info,) = store.list_sessions()
        assert info.id == session_key({}, [Message.system("be brief"), Message.user("hi")])
        assert (info.provider, info.model, info.title) == ("openai", "gpt-4o", "hi")
        texts = [m.text for m in store.transcript(info.id)]
        assert texts == ["be brief", "hi", ANSWER, "and then?", ANSWER, "thanks", ANSWER]
        requests = store.requests(info.id)
        assert [r.tag for r in requests] == ["proxy"] * 3
        assert [r.usage.prompt_tokens for r in requests] == [14, 14, 14]  # the recorded usage
        assert requests[0].cost_usd is not None and requests[0].cost_usd > 0  # gpt-4o's prices
        assert store.latest_view(info.id) == store.transcript(info.id)[:-1]  # what was sent


def test_an_edited_history_starts_a_branch_and_rewrites_nothing(
    location: str | Path, upstream: ReplayServer
) -> None:
    upstream.add(*[Scripted(body=CHAT_TEXT)] * 4)
    with proxy(location, upstream) as url:
        ask(url, turns("hi"))
        ask(url, turns("hi", ANSWER, "first follow-up"))
        ask(url, turns("hi", "an answer the user edited", "second follow-up"))  # a branch
        ask(url, turns("hi", "an answer the user edited", "second follow-up", ANSWER, "more"))
    with SessionStore(location) as store:
        key = session_key({}, [Message.system("be brief"), Message.user("hi")])
        assert sorted(s.id for s in store.list_sessions()) == [key, f"{key}~1"]
        root = [m.text for m in store.transcript(key)]
        assert root == ["be brief", "hi", ANSWER, "first follow-up", ANSWER]
        branch = [m.text for m in store.transcript(f"{key}~1")]
        assert branch == [
            *("be brief", "hi", "an answer the user edited", "second follow-up"),
            *(ANSWER, "more", ANSWER),
        ]
        assert len(store.requests(f"{key}~1")) == 2


def test_the_session_header_names_the_session_and_a_bad_one_is_a_400(
    location: str | Path, upstream: ReplayServer
) -> None:
    upstream.add(*[Scripted(body=CHAT_TEXT)] * 2)
    with proxy(location, upstream) as url:
        ask(url, turns("one"), **{SESSION_HEADER: "ticket-42"})
        ask(url, turns("another start"), **{SESSION_HEADER: "ticket-42"})  # same name
        with pytest.raises(openai.BadRequestError, match=SESSION_HEADER):
            ask(url, turns("x"), **{SESSION_HEADER: "no spaces please"})
    with SessionStore(location) as store:
        assert [s.id for s in store.list_sessions()] == ["ticket-42~1", "ticket-42"]


def test_recovery_events_and_failed_requests_are_recorded(
    location: str | Path, upstream: ReplayServer
) -> None:
    upstream.add(replayed_error(OVERFLOW), Scripted(body=CHAT_TEXT))
    upstream.add(*[replayed_error(OVERFLOW)] * 4)
    long = turns(*(f"turn {i} " + "w " * 20 for i in range(31)))
    with proxy(location, upstream) as url:
        assert ask(url, long) == ANSWER
        with pytest.raises(openai.BadRequestError):
            ask(url, turns("other conversation", "x", "y"))
    with SessionStore(location) as store:
        recovered, failed = sorted(store.list_sessions(), key=lambda s: s.message_count)[::-1]
        kinds = [e.kind for e in store.events(recovered.id)]
        assert kinds[0] == "OverflowDetected" and "LevelApplied" in kinds
        (request,) = store.requests(recovered.id)
        assert all(e.request_id == request.id for e in store.events(recovered.id))
        assert [r.tag for r in store.requests(failed.id)] == ["proxy-failed"]
        assert store.transcript(failed.id)[-1].role is Role.USER  # no answer to store
        failed_kinds = [e.kind for e in store.events(failed.id)]
        assert failed_kinds.count("OverflowDetected") >= 2, failed_kinds  # each try is there


def test_a_window_one_proxy_learned_preflights_another_proxys_first_request(
    location: str | Path, upstream: ReplayServer
) -> None:
    big = turns(*(f"turn {i} " + "lorem ipsum dolor " * 60 for i in range(31)))  # ~9k tokens
    model = "a-fine-tune-no-catalog-knows"  # so the upstream declares no window of its own
    upstream.add(replayed_error(OVERFLOW), Scripted(body=CHAT_TEXT))
    with proxy(location, upstream, model) as first:
        ask(first, big)
    assert len(upstream.requests) == 2  # the overflow, then the recovered request
    with SessionStore(location) as store:
        assert store.learned_windows(UPSTREAM) == {model: 4097}
    upstream.add(Scripted(body=CHAT_TEXT))
    with proxy(location, upstream, model) as second:  # a replica that never overflowed
        assert ask(second, [*big[:-1], {"role": "user", "content": "new"}]) == ANSWER
        metrics = httpx.get(second + "/metrics").text
    assert len(upstream.requests) == 3  # one call: recovered before it was sent
    assert len(upstream.requests[2].json()["messages"]) < len(big)
    assert 'chatcli_proxy_upstream_errors_total{kind="overflow"}' not in metrics


def test_a_streamed_request_is_recorded_before_its_end_is_sent(
    location: str | Path, upstream: ReplayServer
) -> None:
    upstream.add(Scripted(events=[data for _, data in sse_events("openai-chat-text.txt")]))
    with proxy(location, upstream) as url, SessionStore(location) as reader, client(url) as oa:
        stream = oa.chat.completions.create(
            model="gpt-4o",
            messages=turns("stream it"),
            stream=True,  # type: ignore[arg-type]
        )
        chunks = list(stream)
        # The finish chunk arrived: the record is already committed, seen from another
        # connection at once (no waiting for a background writer).
        assert [c.choices[0].finish_reason for c in chunks if c.choices][-1] == "stop"
        (info,) = reader.list_sessions()
        text = "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)
        assert text and reader.transcript(info.id)[-1].text == text
        assert len(reader.requests(info.id)) == 1


def test_keys_and_fingerprints() -> None:
    system, user = Message.system("s"), Message.user("u")
    key = session_key({}, [system, user, Message.assistant("a")])
    assert key == session_key({}, [system, user]) and key.startswith("px") and len(key) == 16
    assert key != session_key({}, [Message.system("other"), user])
    # A system message later in the conversation (an instruction a client injects) is not
    # its system prompt: the key every request of the conversation repeats stays the same.
    later = [system, user, Message.assistant("a"), Message.system("now be terse")]
    assert session_key({}, later) == key
    assert session_key({SESSION_HEADER: "a.b:c-1_2"}, [user]) == "a.b:c-1_2"
    for bad in ("", "-lead", "x" * 65, "a~1", "ü"):
        with pytest.raises(RequestError, match=SESSION_HEADER):
            session_key({SESSION_HEADER: bad}, [user])
    signed = Message(
        role=Role.ASSISTANT, parts=Message.assistant("a").parts, provider_details={"signature": "x"}
    )
    assert fingerprint(signed) == fingerprint(Message.assistant("a"))
    assert fingerprint(Message.assistant("a")) != fingerprint(Message.user("a"))


def test_chatcli_proxy_records_in_the_chats_store_unless_told_not_to(tmp_path: Path) -> None:
    from chatcli.proxy.main import _configured, build_parser

    env = {**ENV, "CHATCLI_HOME": str(tmp_path)}
    flags = ["--provider", "openai", "--model", "gpt-4o", "--base-url", "http://u:pw@h/v1"]
    _, _, options = _configured(build_parser().parse_args(flags), env)
    assert options.sessions is not None
    try:
        assert options.sessions.store.path == tmp_path / "sessions.db"
        assert options.sessions.upstream == "openai http://***@h/v1"  # no credential
    finally:
        options.sessions.close()
    _, _, options = _configured(build_parser().parse_args([*flags, "--no-sessions"]), env)
    assert options.sessions is None


async def test_records_are_committed_together_and_a_bad_one_fails_alone(
    location: str | Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatcli.messages import StopReason, Usage
    from chatcli.proxy.sessions import ProxyRecord
    from chatcli.recovery import Reply

    errors: list[BaseException] = []
    recorder = SessionRecorder(SessionStore(location), upstream=UPSTREAM, on_error=errors.append)
    store = recorder.store
    batches: list[int] = []
    real_commit, real_request = recorder._commit, store.record_request

    def commit(batch: Any) -> None:
        batches.append(len(batch))
        real_commit(batch)

    def request(session: str, **fields: Any) -> int:
        if session == "bad":
            raise RuntimeError("this one cannot be stored")
        return real_request(session, **fields)

    monkeypatch.setattr(recorder, "_commit", commit)
    monkeypatch.setattr(store, "record_request", request)
    answer = Message.assistant("answer")
    reply = Reply(
        message=answer,
        usage=Usage(),
        events=(),
        truncated=False,
        view=(),
        stop_reason=StopReason.END_TURN,
        calls=1,
    )
    keys = [f"c{i}" for i in range(10)] + ["bad"] + [f"d{i}" for i in range(9)]
    records = [
        ProxyRecord(key=k, messages=(Message.user(f"q {k}"),), reply=reply, model="m") for k in keys
    ]
    await asyncio.gather(*(recorder.record(r) for r in records))
    recorder.close()
    assert [str(e) for e in errors] == ["this one cannot be stored"]
    assert sum(batches) == len(records) and max(batches) > 1  # committed together
    with SessionStore(location) as again:
        assert {s.id for s in again.list_sessions()} == set(keys) - {"bad"}
        for key in set(keys) - {"bad"}:
            assert [m.text for m in again.transcript(key)] == [f"q {key}", "answer"]
            assert len(again.requests(key)) == 1


def test_chatcli_sessions_lists_and_exports_proxy_traffic(
    location: str | Path, upstream: ReplayServer, tmp_path: Path
) -> None:
    import json

    from tests.test_cli_inprocess import run

    home = tmp_path / "home"
    if isinstance(location, Path):  # the chat's own file: $CHATCLI_HOME/sessions.db
        home.mkdir()
        location, env = home / "sessions.db", {}
    else:
        env = {"CHATCLI_DATABASE_URL": location}
    upstream.add(Scripted(body=CHAT_TEXT))
    with proxy(location, upstream) as url:
        ask(url, turns("from another tool"), **{SESSION_HEADER: "tool-7"})
    code, listing = run(home, [], ("sessions", "list", "--json"), env=env)
    (listed,) = json.loads(listing)
    assert code == 0 and listed["id"] == "tool-7" and listed["message_count"] == 3
    code, exported = run(home, [], ("sessions", "export", "tool-7", "--format", "json"), env=env)
    assert code == 0
    messages = json.loads(exported)["messages"]
    assert [m["role"] for m in messages] == ["system", "user", "assistant"]


async def test_the_writer_keeps_fingerprints_of_the_latest_sessions_only(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from chatcli.proxy import sessions
    from chatcli.proxy.sessions import ProxyRecord

    monkeypatch.setattr(sessions, "KNOWN_SESSIONS", 3)
    recorder = SessionRecorder(SessionStore(tmp_path / "db"), upstream=UPSTREAM)
    for key in ("a", "b", "c", "d", "a"):
        messages = (Message.user(f"q {key}"),)
        await recorder.record(ProxyRecord(key=key, messages=messages, reply=None))
    assert list(recorder._known) == ["c", "d", "a"]  # "a" read again, "b" the oldest
    await recorder.record(
        ProxyRecord(key="b", messages=(Message.user("q b"), Message.user("more")), reply=None)
    )
    recorder.close()
    with SessionStore(tmp_path / "db") as store:  # b's transcript was read again, extended
        assert [m.text for m in store.transcript("b")] == ["q b", "more"]
        assert [s.id for s in store.find_sessions("b")] == ["b"]

"""The conversations a server parsed lately (`chatcli.wire.known`): a request that repeats a
kept conversation's first messages gets their parsed messages back, the very objects, and
parses and checks only the rest; the result is always the one a plain parse gives; a bad
new message is named at its place in the body; the memo is bounded. Through the real proxy
app, each conversation's requests then extend its own memoised scans, however many
conversations are served in turn."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from starlette.testclient import TestClient

from chatcli.proxy.app import create_app
from chatcli.proxy.guard import Guard
from chatcli.wire.dialect import ClientRequest, RequestError
from chatcli.wire.known import KnownConversations, shared_start
from chatcli.wire.openai_chat import OpenAIDialect
from tests.proxy_harness import upstream_at
from tests.replay import ReplayServer, Scripted
from tests.test_openai_adapter import CHAT_TEXT

Json = dict[str, Any]
SYSTEM = {"role": "system", "content": "You are a helpful assistant."}


def chat(number: int, turns: int) -> list[Json]:
    """Conversation `number`: the one system prompt, then `turns` messages of its own (a
    tool call and its result among them)."""
    out = [SYSTEM]
    for i in range(turns):
        if i % 6 == 4:
            call = {"id": f"c{number}-{i}", "type": "function"}
            function = {"name": "read", "arguments": '{"path": "a.py"}'}
            calls = [{**call, "function": function}]
            out.append({"role": "assistant", "content": None, "tool_calls": calls})
            out.append({"role": "tool", "tool_call_id": f"c{number}-{i}", "content": "x = 1"})
        else:
            role = "user" if i % 2 == 0 else "assistant"
            out.append({"role": role, "content": f"conversation {number}, message {i}"})
    return out


def grown(messages: list[Json]) -> list[Json]:
    """The conversation's next request: a copy of it (a new body), then an answer and a new
    request."""
    turn = [{"role": "assistant", "content": "ok"}, {"role": "user", "content": "and?"}]
    return [*copy.deepcopy(messages), *turn]


def body(messages: list[Json]) -> Json:
    return {"model": "m", "messages": messages, "max_tokens": 64}


def same_request(a: ClientRequest, b: ClientRequest) -> bool:
    return (a.messages, a.origins, a.raw_messages) == (b.messages, b.origins, b.raw_messages)


def test_a_conversations_next_request_gets_its_parsed_messages_back() -> None:
    dialect = OpenAIDialect(known=KnownConversations())
    first = chat(1, 30)
    before = dialect.parse(body(first))
    after = dialect.parse(body(grown(first)))  # a new body: equal by value, not the same objects
    kept = len(before.messages)
    assert all(a is b for a, b in zip(after.messages[:kept], before.messages, strict=True))
    assert same_request(after, OpenAIDialect().parse(body(grown(first))))


def test_an_edited_message_is_parsed_anew_from_there() -> None:
    dialect = OpenAIDialect(known=KnownConversations())
    first = chat(1, 30)
    before = dialect.parse(body(first))
    edited = copy.deepcopy(first)
    edited[10]["content"] = "an edit"
    after = dialect.parse(body(edited))
    assert all(a is b for a, b in zip(after.messages[:10], before.messages, strict=False))
    assert not any(a is b for a, b in zip(after.messages[10:], before.messages[10:], strict=True))
    assert after.messages[10].text == "an edit"
    assert same_request(after, OpenAIDialect().parse(body(edited)))


def test_conversations_that_start_alike_each_find_their_own() -> None:
    dialect = OpenAIDialect(known=KnownConversations())
    start = [SYSTEM, {"role": "user", "content": "the same first request"}]
    chats = [[*start, *chat(n, 12)[1:]] for n in range(3)]
    parsed = [dialect.parse(body(c)) for c in chats]
    again = [dialect.parse(body(copy.deepcopy(c))) for c in chats]
    for before, after in zip(parsed, again, strict=True):
        assert all(a is b for a, b in zip(after.messages, before.messages, strict=True))


@pytest.mark.parametrize("known", [True, False], ids=["known", "plain"])
def test_a_bad_new_message_is_named_at_its_place_in_the_body(known: bool) -> None:
    dialect = OpenAIDialect(known=KnownConversations() if known else None)
    first = chat(1, 20)
    dialect.parse(body(first))
    bad = [*copy.deepcopy(first), {"role": "user", "content": 5}]
    with pytest.raises(RequestError) as caught:
        dialect.parse(body(bad))
    assert caught.value.failure.param == f"messages[{len(first)}].content"


def test_a_bad_other_field_is_refused_with_a_known_conversation() -> None:
    dialect = OpenAIDialect(known=KnownConversations())
    first = chat(1, 20)
    dialect.parse(body(first))
    with pytest.raises(RequestError) as caught:
        dialect.parse({**body(copy.deepcopy(first)), "max_tokens": "64"})
    assert caught.value.failure.param == "max_tokens"


def test_the_memo_is_bounded_by_requests_and_by_messages() -> None:
    known = KnownConversations(size=3, messages=10_000)
    dialect = OpenAIDialect(known=known)
    chats = [chat(n, 10) for n in range(5)]
    for c in chats:
        dialect.parse(body(c))
    assert [known.find(c).count for c in chats] == [0, 0, *(len(c) for c in chats[2:])]

    few = KnownConversations(messages=20)
    dialect = OpenAIDialect(known=few)
    for c in chats[:3]:  # 12 messages each: two of them are over 20
        dialect.parse(body(c))
    assert [few.find(c).count for c in chats[:3]] == [0, 0, len(chats[2])]


def test_a_request_that_extends_a_kept_one_replaces_it() -> None:
    known = KnownConversations(size=2)
    dialect = OpenAIDialect(known=known)
    other = chat(2, 10)
    dialect.parse(body(other))
    conversation = chat(1, 4)
    for turns in range(5, 15):  # one conversation growing: one kept request, not ten
        conversation = chat(1, turns)
        dialect.parse(body(conversation))
    assert known.find(other).count == len(other)
    assert known.find(conversation).count == len(conversation)


# A request: a conversation (of three, two starting alike), how many of its messages, and
# whether one of them is edited.
requests = st.lists(
    st.tuples(st.integers(0, 2), st.integers(1, 40), st.one_of(st.none(), st.integers(0, 39))),
    max_size=12,
)


@settings(max_examples=60, deadline=None)
@given(sequence=requests)
def test_a_known_parse_is_always_the_plain_one(sequence: list[tuple[int, int, int | None]]) -> None:
    dialect = OpenAIDialect(known=KnownConversations(size=2, messages=60))
    plain = OpenAIDialect()
    for number, length, edited in sequence:
        messages = copy.deepcopy(chat(min(number, 1), 40)[: length + 1])
        if number == 2:
            messages[-1] = {"role": "user", "content": "conversation 2"}
        if edited is not None and edited < len(messages):
            messages[edited] = {"role": "user", "content": f"edited {edited}"}
        assert same_request(dialect.parse(body(messages)), plain.parse(body(messages)))


def test_shared_start_counts_equal_first_items() -> None:
    assert shared_start([1, 2, 3], [1, 2, 3, 4]) == 3
    assert shared_start([1, 2, 3], [1, 5, 3]) == 1
    assert shared_start([], [1]) == 0
    assert shared_start([{"a": [1]}], [{"a": [1]}]) == 1


def test_the_proxys_conversations_extend_their_own_scans(server: ReplayServer) -> None:
    # 20 conversations served in turn, each twice (the second time grown by a turn), each
    # request a new body: every memoised scan of the proxy belongs to one conversation and
    # read all of it, so the second requests extended their own scans (parsed anew, their
    # messages would be new objects, and only the few latest scans are compared by value).
    conversations = [chat(n, 30) for n in range(20)]
    second = [grown(c) for c in conversations]
    server.add(*[Scripted(body=CHAT_TEXT) for _ in range(40)])
    upstream = upstream_at("openai-compatible", server.url + "/v1", context_window=200_000)
    app = create_app(upstream, Guard((), host="127.0.0.1", max_concurrency=64))
    with TestClient(app) as client:
        for messages in [*conversations, *second]:
            answer = client.post("/v1/chat/completions", json=body(messages))
            assert answer.status_code == 200, answer.text
    memos = app.state.proxy.memos.memos.values()
    assert memos
    for memo in memos:
        assert sorted(len(scan.messages) for scan in memo.scans.values()) == [len(second[0])] * 20

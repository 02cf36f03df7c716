"""The proxy's parse of an OpenAI request hands out the messages of the common shape (a role
and a string content) from `TextMessages`: the same messages as the dialect's own parser
makes of each, no two of one request the same object, and the forwarder's raw messages of a
request with repeats each its own client message."""

from __future__ import annotations

from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.messages import Message
from chatcli.proxy.dialect import TextMessages
from chatcli.proxy.openai_dialect import TEXT_MESSAGES, OpenAIDialect, _message
from chatcli.proxy.upstream import Forwarder, plan
from tests.proxy_harness import upstream_at
from tests.strategies import texts

DIALECT = OpenAIDialect()
ROLES = ("system", "developer", "user", "assistant", "tool")

# Wire messages of every shape the dialect reads: the common one, and the ones around it
# (another key, a list content, a null content, a tool call, a refusal, a tool result).
text_messages = st.builds(
    lambda role, text: {"role": role, "content": text},
    st.sampled_from(ROLES[:4]),
    st.sampled_from(["", "Go on.", "same text"]) | texts(),
)
other_messages = st.one_of(
    st.builds(lambda t: {"content": t, "role": "user"}, texts()),  # the other key order
    st.builds(lambda t: {"role": "user", "content": t, "name": "ada"}, texts()),
    st.builds(lambda t: {"role": "user", "content": [{"type": "text", "text": t}]}, texts()),
    st.just({"role": "assistant", "content": None}),
    st.just({"role": "assistant", "content": None, "refusal": "no"}),
    st.just(
        {
            "role": "assistant",
            "content": "calling",
            "tool_calls": [
                {"id": "c1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        }
    ),
    st.builds(lambda t: {"role": "tool", "tool_call_id": "c1", "content": t}, texts()),
)
wire_conversations = st.lists(text_messages | other_messages, min_size=1, max_size=12)


def the_long_way(raw: list[Any]) -> tuple[Message, ...]:
    return tuple(_message(m, i) for i, m in enumerate(raw))


@settings(max_examples=200)
@given(wire_conversations, st.integers(min_value=0, max_value=3))
def test_the_messages_are_the_parsers_own_each_a_distinct_object(
    raw: list[Any], repeats: int
) -> None:
    raw = raw * (repeats + 1)  # a conversation's next requests, and repeats within one
    for _ in range(2):
        messages = DIALECT.parse({"messages": raw}).messages
        assert messages == the_long_way(raw)
        assert len({id(m) for m in messages}) == len(messages)


@given(wire_conversations, st.integers(min_value=0, max_value=40))
def test_a_small_table_gives_the_same_messages_and_holds_two_generations(
    raw: list[Any], size: int
) -> None:
    table = TextMessages(TEXT_MESSAGES.makers, size=size)
    for _ in range(3):
        assert table.parsed(raw, _message) == the_long_way(raw)
        assert table.chars <= size + max((len(str(m.get("content"))) for m in raw), default=0)


def test_a_text_message_is_the_same_object_in_the_next_request() -> None:
    first = [{"role": "system", "content": "be brief"}, {"role": "user", "content": "hi there"}]
    second = [*first, {"role": "assistant", "content": "hello"}, {"role": "user", "content": "?"}]
    before = DIALECT.parse({"messages": first}).messages
    after = DIALECT.parse({"messages": second}).messages
    assert all(a is b for a, b in zip(before, after, strict=False))


def test_the_raw_messages_of_a_request_with_repeats_are_each_its_own() -> None:
    # Two equal messages in two key orders: were they one object, the forwarder would write
    # the later one's raw message (its key order) for both.
    raw = [
        {"role": "system", "content": "be brief"},
        {"role": "user", "content": "Go on."},
        {"role": "assistant", "content": "ok"},
        {"content": "Go on.", "role": "user"},
        {"role": "assistant", "content": "ok"},
        {"role": "user", "content": "Go on."},
    ]
    request = DIALECT.parse({"model": "m", "messages": raw})
    upstream = upstream_at("openai-compatible", "http://127.0.0.1:9/v1")
    forwarder = Forwarder(upstream, request, plan(request, upstream.dialect))
    view = request.messages[:1] + request.messages[2:]  # a changed view: message 1 cut
    written = list(forwarder.raw_messages(view))
    assert all(w is r for w, r in zip(written, raw[:1] + raw[2:], strict=True))
    assert list(forwarder.raw_messages(request.messages)) == raw

"""LangChain messages <-> chatcli messages (`chatcli.integrations.langchain.convert`): lossless
round trips, recovery views that keep tool pairs valid, and the answers' stop reasons and usage."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    ChatMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)

from chatcli.history.truncate import apply_recovery_level
from chatcli.integrations.langchain.convert import (
    ORIGIN,
    answer_to_chatcli,
    from_chatcli,
    message_to_chatcli,
    replace_answer,
    to_chatcli,
)
from chatcli.messages import Message, StopReason, Usage
from tests.strategies import (
    assistant_messages,
    conversations,
    recovery_configs,
    system_messages,
    tool_messages,
    user_messages,
)

IMAGE = {"type": "image_url", "image_url": {"url": "https://example.com/cat.png"}}


@st.composite
def langchain_conversations(draw: st.DrawFn) -> list[BaseMessage]:
    """chatcli's conversation strategy as LangChain would hold it: messages with ids, some
    with content blocks (text and an image) instead of a string, some with metadata."""
    messages = [from_chatcli(m) for m in draw(conversations())]
    dressed: list[BaseMessage] = []
    for i, message in enumerate(messages):
        fields: dict[str, Any] = {"id": f"msg-{i}"}
        if draw(st.booleans()) and not isinstance(message, ToolMessage):
            fields["content"] = [IMAGE, {"type": "text", "text": message.text}]
        if isinstance(message, AIMessage) and draw(st.booleans()):
            fields["response_metadata"] = {"finish_reason": "stop", "model_name": "m"}
        dressed.append(message.model_copy(update=fields))
    return dressed


@given(langchain_conversations())
@settings(max_examples=60, deadline=None)
def test_a_conversation_recovery_left_alone_comes_back_as_the_same_objects(
    messages: list[BaseMessage],
) -> None:
    converted = to_chatcli(messages)

    back = converted.back(converted.messages)

    assert len(back) == len(messages)
    assert all(a is b for a, b in zip(back, messages, strict=True))


# Every kind of chatcli message the recovery can make, as a new LangChain message (an assistant
# message's incomplete calls are never made into LangChain calls: see `from_chatcli`).
NEW_MESSAGES = st.one_of(
    system_messages(), user_messages(), assistant_messages(), tool_messages()
).map(from_chatcli)


@given(st.lists(NEW_MESSAGES))
@settings(max_examples=60, deadline=None)
def test_a_new_message_round_trips_through_chatcli(messages: list[BaseMessage]) -> None:
    again = [from_chatcli(message_to_chatcli(m)) for m in messages]

    assert again == messages


@given(langchain_conversations(), st.sampled_from([1, 2, 3]), recovery_configs())
@settings(max_examples=80, deadline=None)
def test_a_recovery_view_keeps_tool_pairs_valid_and_what_it_did_not_cut_whole(
    messages: list[BaseMessage], level: int, config: Any
) -> None:
    converted = to_chatcli(messages)
    view = apply_recovery_level(converted.messages, level, config).messages

    back = converted.back(view)

    assert_paired(back)
    for message, shaped in zip(view, back, strict=True):
        index = (message.provider_details or {}).get(ORIGIN)
        if index is None:
            continue  # made by recovery: a synthetic result, the notice
        original = messages[index]
        if message == converted.messages[index]:
            assert shaped is original
        else:  # cut: the same message, with the cut text
            assert (type(shaped), shaped.id) == (type(original), original.id)
            assert shaped.text == message.text
            assert _blocks_besides_text(shaped) == _blocks_besides_text(original)


def test_a_cut_answer_keeps_its_id_and_metadata_and_loses_its_cut_call() -> None:
    whole = {"name": "search", "args": {"q": "Lisbon"}, "id": "call_1"}
    cut = {"name": "search", "args": '{"q": "Po', "id": "call_2", "error": None}
    raw = {"tool_calls": [{"id": "call_1"}, {"id": "call_2"}], "refusal": None}
    answer = AIMessage(
        "Looking",
        id="run-1",
        tool_calls=[whole],
        invalid_tool_calls=[cut],
        additional_kwargs=raw,
        response_metadata={"finish_reason": "length"},
    )
    message = message_to_chatcli(answer)
    assert [(c.id, c.incomplete) for c in message.tool_calls] == [
        ("call_1", False),
        ("call_2", True),
    ]
    kept_whole = Message.assistant("Looking up", tool_calls=message.tool_calls[:1])

    shaped = replace_answer(answer, kept_whole)

    assert shaped.id == "run-1" and shaped.text == "Looking up"
    assert shaped.tool_calls == [{**whole, "type": "tool_call"}]
    assert shaped.invalid_tool_calls == []
    assert shaped.additional_kwargs == {"refusal": None}
    assert shaped.response_metadata == answer.response_metadata


def test_a_dropped_call_leaves_the_content_blocks_too_and_other_blocks_stay() -> None:
    """ChatAnthropic keeps each call as a `tool_use` block in the content as well; a server
    tool's block (not a call for the agent to run) is not chatcli's to drop."""
    content = [
        {"type": "text", "text": "Searching"},
        {"type": "server_tool_use", "id": "srv_1", "name": "web_search", "input": {}},
        {"type": "tool_use", "id": "toolu_1", "name": "search", "input": {"q": "Lisbon"}},
        {"type": "tool_use", "id": "toolu_2", "name": "search", "input": {"q": "Por"}},
    ]
    calls = [
        {"name": "search", "args": {"q": "Lisbon"}, "id": "toolu_1"},
        {"name": "search", "args": {"q": "Por"}, "id": "toolu_2"},
    ]
    answer = AIMessage(content, tool_calls=calls, response_metadata={"stop_reason": "max_tokens"})
    first = message_to_chatcli(answer).tool_calls[:1]

    shaped = replace_answer(answer, Message.assistant("Searching", tool_calls=first))

    assert [b.get("id") for b in shaped.content if isinstance(b, dict)] == [
        None,
        "srv_1",
        "toolu_1",
    ]
    assert [c["id"] for c in shaped.tool_calls] == ["toolu_1"]


def test_a_message_chatcli_has_no_role_for_is_user_text_and_comes_back_as_it_was() -> None:
    odd = ChatMessage(role="developer", content="Be brief.")
    converted = to_chatcli([odd])
    assert converted.messages[0].role.value == "user"
    assert converted.back(converted.messages)[0] is odd


@pytest.mark.parametrize(
    ("metadata", "calls", "expected"),
    [
        ({"finish_reason": "stop"}, False, StopReason.END_TURN),
        ({"finish_reason": "length"}, False, StopReason.MAX_TOKENS),
        ({"finish_reason": "tool_calls"}, True, StopReason.TOOL_USE),
        ({"finish_reason": "content_filter"}, False, StopReason.REFUSAL),
        ({"stop_reason": "max_tokens"}, False, StopReason.MAX_TOKENS),
        ({"stop_reason": "end_turn"}, False, StopReason.END_TURN),
        ({"stop_reason": "tool_use"}, True, StopReason.TOOL_USE),
        ({"stop_reason": "model_context_window_exceeded"}, False, StopReason.CONTEXT_WINDOW),
        ({"stop_reason": "compaction"}, False, StopReason.COMPACTION),  # paused after compacting
        ({"finish_reason": "MAX_TOKENS"}, False, StopReason.MAX_TOKENS),  # Gemini
        ({"finish_reason": "STOP"}, False, StopReason.END_TURN),
        ({"done_reason": "length"}, False, StopReason.MAX_TOKENS),  # Ollama
        (  # the Responses API
            {"status": "incomplete", "incomplete_details": {"reason": "max_output_tokens"}},
            False,
            StopReason.MAX_TOKENS,
        ),
        ({"finish_reason": "something_new"}, False, StopReason.OTHER),
        ({}, False, StopReason.END_TURN),
        ({}, True, StopReason.TOOL_USE),
    ],
)
def test_the_stop_reason_is_read_from_the_metadata_each_integration_writes(
    metadata: dict[str, Any], calls: bool, expected: StopReason
) -> None:
    tool_calls = [{"name": "f", "args": {}, "id": "c"}] if calls else []
    answer = AIMessage("text", response_metadata=metadata, tool_calls=tool_calls)

    assert answer_to_chatcli(answer).stop_reason is expected


def test_usage_separates_cache_reads_and_writes_from_the_input() -> None:
    usage = {
        "input_tokens": 1_000,
        "output_tokens": 50,
        "total_tokens": 1_050,
        "input_token_details": {"cache_read": 600, "cache_creation": 100},
        "output_token_details": {"reasoning": 20},
    }
    answer = AIMessage("text", usage_metadata=usage)

    assert answer_to_chatcli(answer).usage == Usage(300, 50, 600, 100, 20)
    assert answer_to_chatcli(AIMessage("text")).usage == Usage()


def test_new_messages_have_the_matching_langchain_type() -> None:
    made = [
        from_chatcli(Message.system("s")),
        from_chatcli(Message.user("u")),
        from_chatcli(Message.assistant("a")),
        from_chatcli(Message.tool("call_1", "failed", is_error=True)),
    ]
    assert [type(m) for m in made] == [SystemMessage, HumanMessage, AIMessage, ToolMessage]
    assert isinstance(made[3], ToolMessage) and made[3].status == "error"


def assert_paired(messages: Sequence[BaseMessage]) -> None:
    """LangChain's tool pairs as providers require them: each AIMessage's calls answered right
    after it, in order, one ToolMessage each, and no other ToolMessage."""
    pending: list[str] = []
    for message in messages:
        if isinstance(message, ToolMessage):
            assert pending and pending.pop(0) == message.tool_call_id, message
            continue
        assert not pending, f"unanswered calls {pending} before {message!r}"
        if isinstance(message, AIMessage):
            assert message.invalid_tool_calls == []
            pending = [call["id"] or "" for call in message.tool_calls]
    assert not pending


def _blocks_besides_text(message: BaseMessage) -> list[Any]:
    if isinstance(message.content, str):
        return []
    return [b for b in message.content if isinstance(b, dict) and b.get("type") != "text"]

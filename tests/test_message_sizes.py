"""`Message.text` and `Message.char_count` take shortcuts for the commonest messages (one text
part; no tool calls): each gives what the long way gives, for every kind of message."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from chatcli.messages import Message, total_chars
from tests.strategies import assistant_messages, conversations, tool_messages, user_messages

messages = st.one_of(user_messages(), assistant_messages(), tool_messages())


def the_long_text(message: Message) -> str:
    if message.tool_result is not None:
        return message.tool_result.content
    return "".join(part.text for part in message.parts)


def the_long_count(message: Message) -> int:
    calls = sum(len(c.name) + len(c.arguments_json) for c in message.tool_calls)
    return len(the_long_text(message)) + calls


@given(messages)
def test_text_and_char_count_are_the_long_ways(message: Message) -> None:
    assert message.text == the_long_text(message)
    assert message.char_count == the_long_count(message)


@given(conversations())
def test_total_chars_is_the_sum_of_the_long_counts(conversation: list[Message]) -> None:
    assert total_chars(conversation) == sum(map(the_long_count, conversation))

"""Messages and usage survive the JSON form the store and exports use, byte for byte."""

from chatcli.messages import Message, TextPart, ToolCall, Usage
from chatcli.serialize import message_from_dict, message_to_dict, usage_from_dict, usage_to_dict
from tests.test_store import conversation


def test_round_trip_keeps_provider_details() -> None:
    call = ToolCall(id="t", name="f", arguments={}, incomplete=True, provider_details={"sig": "s"})
    m = Message(
        role=Message.assistant().role,
        parts=(TextPart(text="a", provider_details={"signature": "abc"}),),
        tool_calls=(call,),
        provider_details={"id": "msg_1"},
    )
    assert message_from_dict(message_to_dict(m)) == m
    for m in conversation():
        assert message_from_dict(message_to_dict(m)) == m


def test_usage_round_trip() -> None:
    u = Usage(1, 2, 3, 4, 5)
    assert usage_from_dict(usage_to_dict(u)) == u

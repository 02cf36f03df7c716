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


def test_a_carried_block_round_trips_with_its_items_as_data() -> None:
    """The block's items are stored as spans of its text (the sentence is not stored twice),
    or whole when the text does not show them."""
    from chatcli.messages import Carried, CarriedItem, Role

    items = (
        CarriedItem(number=3, kind="rule", text="Never push to main."),
        CarriedItem(number=9, kind="constraint", text='Keep it under "5,000 EUR".', replaces=(4,)),
        CarriedItem(number=None, kind="fact", text="not in the text"),
    )
    text = '[What I said]\n#3: Never push to main.\n#9: Keep it under "5,000 EUR".'
    m = Message(
        role=Role.USER,
        parts=(TextPart(text=text),),
        carried=Carried(items=items, left_out=2),
    )
    data = message_to_dict(m)
    assert data["carried"]["items"][0] == [3, "rule", 18, 37]
    assert data["carried"]["items"][2] == [None, "fact", "not in the text"]
    assert message_from_dict(data) == m

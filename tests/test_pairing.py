"""Tests for chatcli.history.pairing.repair_tool_pairing, with exact expected histories."""

from __future__ import annotations

from chatcli.history.pairing import interrupted_result, repair_tool_pairing
from chatcli.messages import Message, Role, ToolCall, ToolResult, total_chars

LS = ToolCall(id="c1", name="ls", arguments={"path": "."})
CAT = ToolCall(id="c2", name="cat", arguments={"path": "a.txt"})


def test_a_valid_history_comes_back_as_the_same_tuple() -> None:
    history = (
        Message.system("be brief"),
        Message.user("list files"),
        Message.assistant("", (LS, CAT)),
        Message.tool("c1", "a.txt"),
        Message.tool("c2", "hello"),
        Message.assistant("done"),
    )
    result = repair_tool_pairing(history)
    assert result.messages is history
    assert not result.report.changed
    assert result.report.chars_before == result.report.chars_after == total_chars(history)


def test_orphan_results_are_dropped() -> None:
    history = [
        Message.user("hi"),
        Message.tool("ghost", "left over"),
        Message.assistant("hello"),
    ]
    result = repair_tool_pairing(history)
    assert result.messages == (history[0], history[2])
    assert result.report.dropped == ("orphan tool result for call 'ghost' (9 chars)",)
    assert result.report.chars_freed == 9


def test_a_result_before_its_call_is_an_orphan() -> None:
    early = Message.tool("c1", "too early")
    history = [Message.user("go"), early, Message.assistant("", (LS,))]
    result = repair_tool_pairing(history)
    assert result.messages == (history[0], history[2], interrupted_result(LS))


def test_a_call_without_result_gets_a_synthetic_error() -> None:
    history = [Message.user("go"), Message.assistant("", (LS,)), Message.user("and?")]
    result = repair_tool_pairing(history)
    synthetic = result.messages[2]
    assert result.messages == (history[0], history[1], synthetic, history[2])
    assert synthetic.tool_result == ToolResult(
        call_id="c1",
        content="[Tool call 'ls' was interrupted: its result is not available. "
        "Run it again if the result is still needed.]",
        is_error=True,
    )
    assert result.report.injected == ("synthetic error result for interrupted call 'c1'",)


def test_results_move_next_to_their_call_in_call_order() -> None:
    second, first = Message.tool("c2", "hello"), Message.tool("c1", "a.txt")
    history = [
        Message.user("go"),
        Message.assistant("", (LS, CAT)),
        Message.system("injected context"),
        second,
        Message.user("wait"),
        first,
    ]
    result = repair_tool_pairing(history)
    assert result.messages == (
        history[0],
        history[1],
        first,
        second,
        history[2],
        history[4],
    )


def test_duplicate_results_keep_the_first() -> None:
    first, again = Message.tool("c1", "one"), Message.tool("c1", "two")
    history = [Message.user("go"), Message.assistant("", (LS,)), first, again]
    result = repair_tool_pairing(history)
    assert result.messages == (history[0], history[1], first)
    assert result.report.dropped == ("duplicate tool result for call 'c1' (3 chars)",)


def test_reused_call_ids_answer_the_latest_open_call() -> None:
    # Some local servers number calls per message, so "c1" appears twice.
    turn1, turn2 = Message.assistant("", (LS,)), Message.assistant("again", (LS,))
    answer = Message.tool("c1", "second answer")
    history = [Message.user("go"), turn1, Message.tool("c1", "first"), turn2, answer]
    result = repair_tool_pairing(history)
    assert result.messages == tuple(history)
    unanswered = [Message.user("go"), turn1, turn2, answer]
    assert repair_tool_pairing(unanswered).messages == (
        unanswered[0],
        turn1,
        interrupted_result(LS),
        turn2,
        answer,
    )


def test_repeated_call_ids_within_one_message_are_dropped() -> None:
    history = [Message.user("go"), Message.assistant("", (LS, LS)), Message.tool("c1", "x")]
    result = repair_tool_pairing(history)
    assert result.messages[1].tool_calls == (LS,)
    assert result.messages[2] == history[2]
    assert len(result.messages) == 3


def test_results_keep_their_fields() -> None:
    result = ToolResult(call_id="c1", content="boom", is_error=True, provider_details={"k": 1})
    message = Message(role=Role.TOOL, tool_result=result)
    history = [Message.assistant("", (LS,)), Message.user("x"), message]
    assert repair_tool_pairing(history).messages[1] is message


def test_repair_is_idempotent_and_pure() -> None:
    history = [
        Message.tool("c9", "orphan"),
        Message.assistant("", (LS, CAT)),
        Message.user("hm"),
        Message.tool("c2", "late"),
        Message.tool("c2", "dup"),
    ]
    snapshot = list(history)
    once = repair_tool_pairing(history)
    twice = repair_tool_pairing(once.messages)
    assert history == snapshot
    assert twice.messages is once.messages
    assert not twice.report.changed
    assert repair_tool_pairing(history) == once


def test_report_counts_messages_and_chars() -> None:
    history = [Message.assistant("", (LS,)), Message.tool("zz", "orphan!")]
    report = repair_tool_pairing(history).report
    assert (report.messages_before, report.messages_after) == (2, 2)
    synthetic = len(interrupted_result(LS).text)
    assert report.chars_after == report.chars_before - 7 + synthetic


def test_results_only_moved_back_are_reported_as_a_change() -> None:
    call = ToolCall(id="c", name="f")
    messages = (
        Message.user("go"),
        Message.assistant("", tool_calls=(call,)),
        Message.user("interjection"),
        Message.tool("c", "result"),
    )
    result = repair_tool_pairing(messages)
    assert [m.role.value for m in result.messages] == ["user", "assistant", "tool", "user"]
    assert result.report.changed
    assert result.report.moved and not result.report.dropped and not result.report.injected

"""Tests for chatcli.history.truncate: the three recovery levels, with exact expectations."""

from __future__ import annotations

import pytest

from chatcli.config import RecoveryConfig
from chatcli.history.pairing import interrupted_result
from chatcli.history.text import cut_middle, cut_tail
from chatcli.history.truncate import (
    AGGRESSIVE_BUDGET_RATIO,
    COMPACTION_NOTICE,
    LEVEL1_ASSISTANT_MAX_CHARS,
    LEVEL_NAMES,
    NUCLEAR_KEEP_MESSAGES,
    SUMMARY_HEADER,
    TRUNCATION_NOTICE,
    apply_recovery_level,
    is_real_user_request,
    kept_tail,
    latest_real_user_request,
    truncate_assistant_messages,
)
from chatcli.messages import Message, ToolCall
from tests.strategies import CONTINUATION_MESSAGE

DEFAULT = RecoveryConfig()
CALL = ToolCall(id="c1", name="grep", arguments={"q": "todo"})
SYS1, SYS2 = Message.system("you are helpful"), Message.system("project context")
U1, U2, U3 = Message.user("first task"), Message.user("second task"), Message.user("third")
A1, A2, A3 = Message.assistant("one"), Message.assistant("two"), Message.assistant("three")
CONTINUE = Message.user(CONTINUATION_MESSAGE)


def keep(n: int) -> RecoveryConfig:
    return RecoveryConfig(emergency_keep_messages=n)


def test_the_level_3_notice_says_summarized_only_when_a_summary_is_in_the_view() -> None:
    # Seen after auto-compaction fell back to the levels: "Previous conversation history has
    # been summarized" was sent when no summary existed.
    history = [SYS1, U1, A1, U2, A2, U3, A3]
    plain = apply_recovery_level(history, 3, DEFAULT).messages
    assert plain[1] == Message.system(TRUNCATION_NOTICE)
    assert "summarized" not in TRUNCATION_NOTICE and "no summary" in TRUNCATION_NOTICE
    summary = Message.user(f"{SUMMARY_HEADER}: the 2 messages before ...]\n## User's goal\nx")
    compacted = [SYS1, summary, A1, U3, A3]  # a summary, then the last turn (4 messages)
    kept = apply_recovery_level([*compacted[:1], U1, A1, *compacted[1:]], 3, DEFAULT).messages
    assert summary in kept and kept[1] == Message.system(COMPACTION_NOTICE)  # the spec's text
    dropped = apply_recovery_level([SYS1, summary, A1, U1, *history[1:]], 3, DEFAULT).messages
    assert summary not in dropped and dropped[1] == Message.system(TRUNCATION_NOTICE)


def test_constants_are_the_spec_values() -> None:
    assert COMPACTION_NOTICE == (
        "[Context was automatically compacted due to size limits.\n"
        "Previous conversation history has been summarized.\n"
        "Continue from where you left off.]"
    )
    assert LEVEL1_ASSISTANT_MAX_CHARS == 5000
    assert AGGRESSIVE_BUDGET_RATIO == 0.5
    assert NUCLEAR_KEEP_MESSAGES == 4
    assert LEVEL_NAMES == {
        1: "aggressive budget",
        2: "emergency truncation",
        3: "nuclear truncation",
    }


@pytest.mark.parametrize("level", [0, 4, -1])
def test_unknown_levels_are_rejected(level: int) -> None:
    with pytest.raises(ValueError, match="recovery level must be 1, 2 or 3"):
        apply_recovery_level([U1], level, DEFAULT)


# --- level 1 ------------------------------------------------------------------------------


def test_level1_halves_the_per_result_budget() -> None:
    output = "".join(f"match {n}\n" for n in range(4000))  # ~34k chars
    history = [U1, Message.assistant("", (CALL,)), Message.tool("c1", output)]
    result = apply_recovery_level(history, 1, DEFAULT)
    assert result.messages == (U1, history[1], Message.tool("c1", cut_middle(output, 10_000)))
    assert result.report.name == "level 1: aggressive budget"


def test_level1_halves_the_per_turn_budget() -> None:
    calls = tuple(ToolCall(id=f"c{n}", name="read") for n in range(12))
    results = [Message.tool(c.id, f"{n}" * 9000) for n, c in enumerate(calls)]
    history = [U1, Message.assistant("", calls), *results]
    # 12 x 9,000 = 108,000 > 100,000: every result is cut to 100,000 // 12 = 8,333.
    got = apply_recovery_level(history, 1, DEFAULT).messages[2:]
    assert [m.text for m in got] == [cut_middle(m.text, 8333) for m in results]


def test_level1_uses_the_configured_limits() -> None:
    config = RecoveryConfig(tool_result_max_chars=1000, tool_result_budget_chars=10**6)
    history = [Message.assistant("", (CALL,)), Message.tool("c1", "z" * 800)]
    assert apply_recovery_level(history, 1, config).messages[1].text == cut_middle("z" * 800, 500)


def test_level1_cuts_long_assistant_messages_only() -> None:
    long_answer = "word " * 2000  # 10,000 chars
    exact = Message.assistant("e" * 5000)
    history = [Message.user("u" * 9000), Message.assistant(long_answer), exact]
    result = apply_recovery_level(history, 1, DEFAULT)
    assert result.messages == (history[0], Message.assistant(cut_tail(long_answer, 5000)), exact)
    # The marker is sized for "10,000" removed; "5,028" is one digit shorter.
    assert result.report.cut == ("assistant message #1: 10,000 -> 4,999 chars",)


def test_level1_repairs_pairing() -> None:
    history = [Message.tool("zz", "orphan"), U1, Message.assistant("", (CALL,))]
    result = apply_recovery_level(history, 1, DEFAULT)
    assert result.messages == (U1, history[2], interrupted_result(CALL))
    assert len(result.report.dropped) == len(result.report.injected) == 1


def test_truncate_assistant_messages_keeps_calls_and_details() -> None:
    message = Message.assistant("x" * 50, (CALL,))
    out = truncate_assistant_messages([message], 40).messages[0]
    assert out.tool_calls == (CALL,)
    assert out.text == cut_tail("x" * 50, 40)


# --- level 2 ------------------------------------------------------------------------------


def test_level2_keeps_systems_first_then_the_last_messages() -> None:
    history = [SYS1, U1, A1, SYS2, U2, A2]
    result = apply_recovery_level(history, 2, keep(2))
    assert result.messages == (SYS1, SYS2, U2, A2)
    assert result.report.name == "level 2: emergency truncation"
    assert result.report.dropped == ("2 older non-system messages (13 chars)",)


def test_level2_drops_leading_non_user_messages() -> None:
    history = [U1, A1, U2, A2, U3, A3]
    assert apply_recovery_level(history, 2, keep(3)).messages == (U3, A3)


def test_level2_pins_the_latest_request_when_the_tail_has_none() -> None:
    call = Message.assistant("", (CALL,))
    result_msg = Message.tool("c1", "found")
    history = [U1, A1, U2, call, result_msg, A3]
    result = apply_recovery_level(history, 2, keep(3))
    assert result.messages == (U2, call, result_msg, A3)
    assert result.report.dropped == (
        "2 older non-system messages (13 chars); kept the latest user request from before "
        "them (#2)",
    )


def test_level2_never_keeps_a_result_whose_call_was_dropped() -> None:
    history = [U1, Message.assistant("", (CALL,)), Message.tool("c1", "found"), A2]
    assert apply_recovery_level(history, 2, keep(2)).messages == (U1, A2)


def test_a_continuation_prompt_is_not_the_task() -> None:
    history = [U1, Message.assistant("partial"), CONTINUE, A2]
    assert apply_recovery_level(history, 2, keep(2)).messages == (U1, CONTINUE, A2)


def test_continuation_prompt_starts_the_tail_when_there_is_no_real_request() -> None:
    history = [CONTINUE, A1, A2]
    assert apply_recovery_level(history, 2, keep(1)).messages == (CONTINUE, A2)


def test_without_any_user_message_the_tail_is_kept_as_is() -> None:
    assert apply_recovery_level([A1, A2, A3], 2, keep(2)).messages == (A2, A3)


# --- edge cases: no user message, only tools, only assistants, N = 1 -----------------------


def exchange(*ids: str) -> list[Message]:
    """An assistant message calling `ids`, followed by their results."""
    calls = tuple(ToolCall(id=i, name="run") for i in ids)
    return [Message.assistant("", calls), *(Message.tool(i, f"out {i}") for i in ids)]


def test_a_call_and_its_result_are_kept_together_when_there_is_no_user() -> None:
    # The last message is a result; keeping it alone would drop it as an orphan and leave
    # nothing. The whole exchange is kept instead: more than N, never empty.
    history = exchange("c0")
    assert apply_recovery_level(history, 2, keep(1)).messages == tuple(history)
    assert apply_recovery_level(history, 3, DEFAULT).messages == (
        Message.system(TRUNCATION_NOTICE),
        *history,
    )


def test_a_wide_exchange_is_kept_whole_at_level3_when_there_is_no_user() -> None:
    history = [A1, *exchange("c0", "c1", "c2", "c3", "c4")]  # last 4 are all results
    result = apply_recovery_level(history, 3, DEFAULT)
    assert result.messages == (Message.system(TRUNCATION_NOTICE), *history[1:])
    assert result.report.dropped == ("1 older non-system messages (3 chars)",)


def test_results_cut_from_their_call_are_dropped_when_something_else_is_left() -> None:
    # No user: the tail starts at its first message that is not a cut-off result.
    history = [*exchange("c0", "c1"), A2]
    assert apply_recovery_level(history, 2, keep(2)).messages == (A2,)


def test_only_tool_results_leave_nothing_to_keep() -> None:
    # Orphans: no call anywhere, so no provider accepts them and repair drops them at every
    # level. The non-system part is empty because the repaired input has nothing in it.
    orphans = [SYS1, Message.tool("c0", "x"), Message.tool("c1", "y")]
    assert apply_recovery_level(orphans, 1, DEFAULT).messages == (SYS1,)
    assert apply_recovery_level(orphans, 2, keep(1)).messages == (SYS1,)
    assert apply_recovery_level(orphans, 3, DEFAULT).messages == (
        SYS1,
        Message.system(TRUNCATION_NOTICE),
    )


def test_only_assistant_messages() -> None:
    assert apply_recovery_level([A1, A2, A3], 2, keep(1)).messages == (A3,)
    assert apply_recovery_level([A1, A2, A3], 3, DEFAULT).messages == (
        Message.system(TRUNCATION_NOTICE),
        A1,
        A2,
        A3,
    )


def test_a_single_huge_request_survives_level3_verbatim() -> None:
    # "The task survives" (SPEC 1): truncation selects messages, it never cuts the request.
    # If even this does not fit, the recovery loop reports it; the request is not rewritten.
    huge = Message.user("describe this log:\n" + "line\n" * 200_000)
    result = apply_recovery_level([SYS1, huge], 3, DEFAULT)
    assert result.messages == (SYS1, Message.system(TRUNCATION_NOTICE), huge)
    assert result.messages[2] is huge
    assert result.report.dropped == ()


def test_a_huge_request_before_the_last_four_is_pinned_verbatim() -> None:
    huge = Message.user("x" * 1_000_000)
    history = [huge, *exchange("c0"), A1, A2, A3]
    result = apply_recovery_level(history, 3, DEFAULT)
    assert result.messages == (Message.system(TRUNCATION_NOTICE), huge, A1, A2, A3)
    assert result.messages[1] is huge


@pytest.mark.parametrize(
    ("history", "expected"),
    [
        ([U1, A1], (U1, A1)),  # the request is pinned in front of the one kept message
        ([A1, U1], (U1,)),
        ([U1, A1, CONTINUE], (U1, CONTINUE)),  # a continuation prompt is not the task
        ([U1, *exchange("c0")], (U1,)),  # the result lost its call; the request stays
        ([A1, *exchange("c0")], tuple(exchange("c0"))),  # no user: the whole exchange
        ([U1, A1, *exchange("c0"), U2], (U2,)),
    ],
)
def test_level2_keeping_one_message(history: list[Message], expected: tuple[Message, ...]) -> None:
    assert apply_recovery_level(history, 2, keep(1)).messages == expected


def test_level2_of_short_histories() -> None:
    assert apply_recovery_level([], 2, DEFAULT).messages == ()
    assert apply_recovery_level([SYS1, SYS2], 2, DEFAULT).messages == (SYS1, SYS2)
    assert apply_recovery_level([U1, SYS1, A1], 2, DEFAULT).messages == (SYS1, U1, A1)


def test_synthetic_results_count_toward_the_kept_messages() -> None:
    # The pairing is repaired before the tail is chosen, so the kept part never exceeds N + 1.
    call = Message.assistant("", (CALL,))
    history = [U1, call, U2, A2]  # repaired: U1, call, <synthetic>, U2, A2
    assert apply_recovery_level(history, 2, keep(4)).messages == (U2, A2)
    assert apply_recovery_level(history, 2, keep(5)).messages == (
        U1,
        call,
        interrupted_result(CALL),
        U2,
        A2,
    )


# --- level 3 ------------------------------------------------------------------------------


def test_level3_keeps_four_messages_and_injects_the_notice() -> None:
    history = [SYS1, U1, A1, U2, A2, SYS2, U3, A3]
    result = apply_recovery_level(history, 3, keep(10))
    notice = Message.system(TRUNCATION_NOTICE)
    assert result.messages == (SYS1, SYS2, notice, U2, A2, U3, A3)
    assert result.report.name == "level 3: nuclear truncation"
    assert result.report.injected == ("compaction notice (system message)",)


def test_level3_injects_the_notice_once() -> None:
    # A view compacted before (auto-compaction's deterministic fallback, an earlier level 3)
    # already carries the notice: a second one would only repeat it.
    notice = Message.system(TRUNCATION_NOTICE)
    once = apply_recovery_level([SYS1, U1, A1, U2, A2, U3, A3], 3, DEFAULT)
    assert once.messages == (SYS1, notice, U2, A2, U3, A3)
    again = apply_recovery_level([*once.messages, U1, A1], 3, DEFAULT)
    assert again.messages == (SYS1, notice, U3, A3, U1, A1)
    assert again.report.injected == ()


def test_level3_pins_the_request_too() -> None:
    answer = Message.tool("c1", "x")
    history = [U1, Message.assistant("", (CALL,)), answer, A1, A2, A3]
    # The last 4 are answer, A1, A2, A3: no request, so U1 is pinned; the answer lost its call.
    result = apply_recovery_level(history, 3, DEFAULT)
    assert result.messages == (Message.system(TRUNCATION_NOTICE), U1, A1, A2, A3)


# --- helpers ------------------------------------------------------------------------------


def test_real_user_requests() -> None:
    assert is_real_user_request(U1)
    assert not is_real_user_request(CONTINUE)
    assert not is_real_user_request(Message.user(""))
    assert not is_real_user_request(Message.user("  \n"))
    assert not is_real_user_request(A1)
    assert latest_real_user_request([U1, A1, U2, CONTINUE, A2]) is U2
    assert latest_real_user_request([A1, CONTINUE]) is None


def test_kept_tail_directly() -> None:
    assert kept_tail([U1, A1, U2, A2], 1) == (U2, A2)
    assert kept_tail([U1, A1, U2, A2], 3) == (U2, A2)
    assert kept_tail([U1, A1, U2, A2], 4) == (U1, A1, U2, A2)
    assert kept_tail([], 4) == ()

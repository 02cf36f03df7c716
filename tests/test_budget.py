"""Tests for chatcli.history.budget: per-result and per-turn tool-result budgets."""

from __future__ import annotations

import pytest

from chatcli.history.budget import enforce_tool_result_budget, turn_cap, turns
from chatcli.history.text import cut_middle
from chatcli.messages import Message, Role, ToolCall, ToolResult

CALLS = tuple(ToolCall(id=f"c{n}", name="run") for n in range(3))


def exchange(*contents: str) -> list[Message]:
    """One assistant message calling len(contents) tools, then their results."""
    calls = CALLS[: len(contents)]
    results = [Message.tool(c.id, text) for c, text in zip(calls, contents, strict=True)]
    return [Message.assistant("", calls), *results]


def test_turn_cap_is_the_largest_cap_that_fits() -> None:
    assert turn_cap([100, 500, 2000], 10**6, 1000) == 450  # 100 + 450 + 450 = 1000
    assert turn_cap([10, 20], 100, 1000) == 100  # fits: the per-result cap stands
    assert turn_cap([300, 300], 200, 300) == 150
    assert turn_cap([5, 5, 5], 10, 2) == 0  # fewer chars than results


def test_turns_are_the_results_after_each_assistant_message() -> None:
    history = [
        Message.tool("x", "before any call"),
        Message.user("go"),
        *exchange("a", "b"),
        Message.user("more"),
        *exchange("c"),
    ]
    assert turns(history) == [[0], [3, 4], [7]]


def test_each_result_is_cut_to_the_per_result_cap() -> None:
    big = "".join(f"{n}\n" for n in range(20_000))
    history = [Message.user("go"), *exchange(big, "small")]
    result = enforce_tool_result_budget(history, per_result_chars=1000, per_turn_chars=10**6)
    assert result.messages[2].text == cut_middle(big, 1000)
    assert len(result.messages[2].text) <= 1000
    assert result.messages[3] is history[3]
    assert result.report.cut == (
        f"tool result for call 'c0': {len(big):,} -> {len(result.messages[2].text):,} chars",
    )


def test_a_turn_over_budget_cuts_the_largest_results_first() -> None:
    small, medium, large = "s" * 100, "m" * 500, "l" * 2000
    history = exchange(small, medium, large)
    result = enforce_tool_result_budget(history, per_result_chars=10**6, per_turn_chars=1000)
    texts = [m.text for m in result.messages[1:]]
    assert texts == [small, cut_middle(medium, 450), cut_middle(large, 450)]
    assert sum(map(len, texts)) <= 1000


def test_turns_have_separate_budgets() -> None:
    history = [*exchange("a" * 600), Message.user("next"), *exchange("b" * 600)]
    result = enforce_tool_result_budget(history, per_result_chars=1000, per_turn_chars=1000)
    assert result.messages == tuple(history)
    assert not result.report.changed


def test_only_tool_results_are_cut_and_their_fields_survive() -> None:
    details = {"cache_control": {"type": "ephemeral"}}
    tool = Message(
        role=Role.TOOL,
        tool_result=ToolResult(
            call_id="c0", content="e" * 5000, is_error=True, provider_details=details
        ),
    )
    history = [Message.user("u" * 5000), Message.assistant("a" * 5000, CALLS[:1]), tool]
    result = enforce_tool_result_budget(history, per_result_chars=100, per_turn_chars=100)
    assert result.messages[:2] == tuple(history[:2])
    cut = result.messages[2].tool_result
    assert cut is not None
    assert (cut.call_id, cut.is_error, cut.provider_details) == ("c0", True, details)
    assert cut.content == cut_middle("e" * 5000, 100)


def test_nothing_to_cut_returns_the_input_tuple() -> None:
    history = tuple(exchange("short", "also short"))
    result = enforce_tool_result_budget(history, per_result_chars=100, per_turn_chars=100)
    assert result.messages is history
    assert result.report.chars_freed == 0


def test_budget_is_idempotent() -> None:
    history = exchange("x" * 3000, "y\n" * 2000, "z" * 10)
    once = enforce_tool_result_budget(history, per_result_chars=2000, per_turn_chars=2500)
    twice = enforce_tool_result_budget(once.messages, per_result_chars=2000, per_turn_chars=2500)
    assert twice.messages is once.messages


def test_report_counts_chars() -> None:
    history = exchange("x" * 3000)
    report = enforce_tool_result_budget(history, per_result_chars=100, per_turn_chars=10**6).report
    assert report.chars_before == 3000 + len("run") + len("{}")  # name + arguments JSON
    assert report.chars_freed == 3000 - len(cut_middle("x" * 3000, 100))


@pytest.mark.parametrize(("per_result", "per_turn"), [(0, 10), (10, 0), (-1, -1)])
def test_budgets_must_be_positive(per_result: int, per_turn: int) -> None:
    with pytest.raises(ValueError, match="budgets must be positive"):
        enforce_tool_result_budget([], per_result_chars=per_result, per_turn_chars=per_turn)

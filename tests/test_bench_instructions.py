"""benchmarks/instructions.py scores by the conventions its docstring states."""

from __future__ import annotations

import pytest
from benchmarks.instructions import (
    Outcome,
    Scored,
    main,
    precision_recall,
    scored_kind,
    statement_position,
)


def test_none_is_none_and_any_carried_kind_is_right_on_a_goal() -> None:
    assert scored_kind("rule", None) == "none"
    assert scored_kind("goal", "rule") == "goal"
    assert scored_kind("goal", "preference") == "goal"
    assert scored_kind("goal", None) == "none"
    assert scored_kind("rule", "goal") == "goal"


def test_precision_and_recall_count_what_was_said_and_what_was_there() -> None:
    items = [
        Scored(text="a", lang="en", gold="rule", predicted="rule"),
        Scored(text="b", lang="en", gold="rule", predicted="none"),
        Scored(text="c", lang="en", gold="none", predicted="rule"),
        Scored(text="d", lang="en", gold="none", predicted="none"),
    ]
    assert precision_recall(items, frozenset({"rule"})) == (0.5, 0.5, 2)
    assert precision_recall(items, frozenset({"goal"})) == (None, None, 0)


@pytest.mark.parametrize(
    ("same_point", "first_at", "later_at", "passed"),
    [
        (True, -1, 10, True),
        (True, 3, 10, True),
        (True, 10, 3, False),
        (True, 3, -1, False),
        (False, 3, -1, True),
        (False, -1, 10, False),
    ],
)
def test_a_reversal_passes_when_the_update_is_read_last(
    same_point: bool, first_at: int, later_at: int, passed: bool
) -> None:
    pair = {"same_point": same_point}
    assert Outcome(pair=pair, first_at=first_at, later_at=later_at).passed is passed


@pytest.mark.parametrize(
    ("view", "found"),
    [
        ("Keep it.\n#6: We're on unit 5 now.\n#6: Homework cap is 40 minutes.", 13),
        ("Keep it.\n#6: We're on unit 5 now.", -1),
        ("Keep it.\n#6: Homework cap is 40 minutes.", -1),
    ],
)
def test_a_later_message_is_in_view_when_each_statement_is(view: str, found: int) -> None:
    """Each statement of a later message may be carried on its own line; its question, an
    ask of the moment, need not be."""
    later = "We're on unit 5 now.  Homework cap is 40 minutes. Can you book the room?"
    assert statement_position(view, later) == found


def test_the_benchmark_runs_on_the_tuning_set(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--set", "tuning"]) == 0
    out = capsys.readouterr().out
    assert "| rule+constraint |" in out and "| same point | all |" in out

"""Hypothesis properties of every history transform, over random conversations.

Each test draws a conversation (tests/strategies.py: system messages anywhere, broken tool
pairing, long and non-ASCII texts; with user messages or without any) and a config with small
limits (N from 1), applies every transform (pairing repair, budget, levels 1-3) and checks the
invariants their docstrings state.

Timing is not tested here (a shared CI machine makes timed tests flaky). To check that the
levels stay linear, run:

    .venv/bin/python -c "from tests.test_history_properties import time_levels; time_levels()"

which applies each level to histories of 1k, 10k and 100k messages and prints the seconds.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Sequence

from hypothesis import given, settings

from chatcli.config import RecoveryConfig
from chatcli.history.budget import enforce_tool_result_budget, turns
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.result import TransformResult
from chatcli.history.text import MIN_CUT_CHARS
from chatcli.history.truncate import (
    CONTINUATION_PREFIX,
    LEVEL1_ASSISTANT_MAX_CHARS,
    NUCLEAR_KEEP_MESSAGES,
    TRUNCATION_NOTICE,
    apply_recovery_level,
)
from chatcli.messages import Message, Role, ToolCall, total_chars
from tests.strategies import conversations, recovery_configs

Transform = Callable[[Sequence[Message], RecoveryConfig], TransformResult]

TRANSFORMS: dict[str, Transform] = {
    "repair": lambda messages, _: repair_tool_pairing(messages),
    "budget": lambda messages, config: enforce_tool_result_budget(
        messages,
        per_result_chars=config.tool_result_max_chars,
        per_turn_chars=config.tool_result_budget_chars,
    ),
    "level 1": lambda messages, config: apply_recovery_level(messages, 1, config),
    "level 2": lambda messages, config: apply_recovery_level(messages, 2, config),
    "level 3": lambda messages, config: apply_recovery_level(messages, 3, config),
}
REPAIRING = ("repair", "level 1", "level 2", "level 3")
TRUNCATING = ("level 2", "level 3")
NOTICE = Message.system(TRUNCATION_NOTICE)

PROPERTY = settings(max_examples=200, deadline=None)
# Histories without any user message are drawn on purpose: the "start with a user message"
# rule has nothing to start from there, and that is where a tail used to come out empty.
HISTORIES = conversations() | conversations(users=False)


@PROPERTY
@given(HISTORIES, recovery_configs())
def test_transforms_are_pure_deterministic_and_report_truly(
    messages: list[Message], config: RecoveryConfig
) -> None:
    snapshot = copy.deepcopy(messages)
    for name, transform in TRANSFORMS.items():
        result = transform(messages, config)
        assert messages == snapshot, f"{name} mutated its input"
        assert transform(messages, config) == result, f"{name} is not deterministic"
        assert isinstance(result.messages, tuple)
        report = result.report
        assert (report.messages_before, report.chars_before) == (
            len(messages),
            total_chars(messages),
        )
        assert (report.messages_after, report.chars_after) == (
            len(result.messages),
            total_chars(result.messages),
        )


@PROPERTY
@given(HISTORIES, recovery_configs())
def test_pairs_systems_and_the_latest_request_survive(
    messages: list[Message], config: RecoveryConfig
) -> None:
    systems = [m for m in messages if m.role is Role.SYSTEM]
    request = latest_request(messages)
    for name, transform in TRANSFORMS.items():
        out = transform(messages, config).messages
        kept_systems = [m for m in out if m.role is Role.SYSTEM]
        if name == "level 3":
            assert kept_systems == (systems if NOTICE in systems else [*systems, NOTICE]), name
        else:
            assert kept_systems == systems, name
        assert latest_request(out) == request, name
        if name in REPAIRING:
            assert_paired(out)
        else:
            assert shape(out) == shape(messages)  # the budget only shortens content
    once = repair_tool_pairing(messages).messages
    assert repair_tool_pairing(once).messages is once  # idempotent


@PROPERTY
@given(HISTORIES, recovery_configs())
def test_truncation_keeps_a_user_led_bounded_tail(
    messages: list[Message], config: RecoveryConfig
) -> None:
    others = [m for m in messages if m.role is not Role.SYSTEM]
    repaired = [m for m in repair_tool_pairing(messages).messages if m.role is not Role.SYSTEM]
    for name, keep in (
        ("level 2", config.emergency_keep_messages),
        ("level 3", NUCLEAR_KEEP_MESSAGES),
    ):
        out = TRANSFORMS[name](messages, config).messages
        kept = _after_systems(out)
        assert all(m.role is not Role.SYSTEM for m in kept), "systems come first"
        # Never empty while anything but orphan/duplicate results (which repair drops: no
        # provider accepts them) is there to keep; any user or assistant message is.
        assert bool(kept) == bool(repaired), name
        if any(m.role in (Role.USER, Role.ASSISTANT) for m in messages):
            assert kept, name
        if any(m.role is Role.USER for m in others):
            assert kept[0].role is Role.USER, name
            assert len(kept) <= keep + 1, name
            # Apart from a pinned request in front, the kept part comes from the last `keep`.
            rest = kept[1:] if kept[0] not in repaired[-keep:] else kept
            assert is_subsequence(rest, repaired[-keep:]), name
        elif kept:
            assert_whole_unit_tail(kept, repaired, keep)


@PROPERTY
@given(HISTORIES, recovery_configs())
def test_truncating_again_changes_nothing(messages: list[Message], config: RecoveryConfig) -> None:
    # The recovery loop applies each level to the previous level's view, and a compacted view
    # can be truncated again on a later turn: a level must be stable on its own output.
    for name in TRUNCATING:
        once = TRANSFORMS[name](messages, config).messages
        assert TRANSFORMS[name](once, config).messages == once, name


@PROPERTY
@given(HISTORIES, recovery_configs())
def test_sizes_only_shrink_apart_from_synthetic_results_and_the_notice(
    messages: list[Message], config: RecoveryConfig
) -> None:
    # Repair adds only synthetic results; everything after it only cuts or selects.
    repaired = repair_tool_pairing(messages).messages
    originals = {id(m) for m in messages}
    synthetic = [m for m in repaired if m.role is Role.TOOL and id(m) not in originals]
    assert all(m.tool_result and m.tool_result.is_error for m in synthetic)
    assert all("was interrupted" in m.text for m in synthetic)
    assert total_chars(repaired) <= total_chars(messages) + total_chars(synthetic)
    ceiling = total_chars(repaired)
    assert total_chars(TRANSFORMS["level 1"](messages, config).messages) <= ceiling
    assert total_chars(TRANSFORMS["level 2"](messages, config).messages) <= ceiling
    level3 = TRANSFORMS["level 3"](messages, config).messages
    assert total_chars(level3) <= ceiling + len(TRUNCATION_NOTICE)

    budgeted = TRANSFORMS["budget"](messages, config).messages
    assert all(
        new.char_count <= old.char_count for new, old in zip(budgeted, messages, strict=True)
    )
    assert_within_budget(budgeted, config.tool_result_max_chars, config.tool_result_budget_chars)
    level1 = TRANSFORMS["level 1"](messages, config).messages
    assert all(
        len(m.text) <= LEVEL1_ASSISTANT_MAX_CHARS for m in level1 if m.role is Role.ASSISTANT
    )
    assert_within_budget(
        level1, config.tool_result_max_chars // 2, config.tool_result_budget_chars // 2
    )


# --- helpers --------------------------------------------------------------------------------


def latest_request(messages: Sequence[Message]) -> Message | None:
    """The last user message with text that is not a continuation prompt (SPEC 1)."""
    for message in reversed(messages):
        text = message.text.lstrip()
        if message.role is Role.USER and text and not text.startswith(CONTINUATION_PREFIX):
            return message
    return None


def assert_paired(messages: Sequence[Message]) -> None:
    """Every call is answered by exactly one result right after it, in order; nothing else."""
    expected: list[str] = []  # call ids whose results must come next, in order
    for message in messages:
        if message.role is Role.TOOL:
            assert message.tool_result is not None
            assert expected and message.tool_result.call_id == expected.pop(0), "stray result"
            continue
        assert not expected, f"unanswered calls {expected}"
        ids = [call.id for call in message.tool_calls]
        assert len(set(ids)) == len(ids), "repeated call id in one message"
        expected = ids
    assert not expected, f"unanswered calls {expected}"


def assert_whole_unit_tail(kept: Sequence[Message], others: Sequence[Message], keep: int) -> None:
    """With no user message, the kept part is a suffix of the (repaired) non-system messages
    that starts at a whole exchange: the last `keep` minus results cut from their call, or,
    when that leaves nothing, the last assistant message with all of its results."""
    assert list(kept) == list(others[len(others) - len(kept) :]), "not a suffix"
    assert kept[0].role is not Role.TOOL, "starts inside a tool exchange"
    if len(kept) > keep:
        assert all(m.role is Role.TOOL for m in kept[1:]), "more than one unit beyond `keep`"


def shape(messages: Sequence[Message]) -> list[tuple[object, ...]]:
    """Everything about messages except text content."""
    return [
        (
            m.role,
            m.tool_calls,
            m.provider_details,
            None if m.tool_result is None else m.tool_result.call_id,
            None if m.tool_result is None else m.tool_result.is_error,
            None if m.tool_result is None else m.tool_result.provider_details,
        )
        for m in messages
    ]


def assert_within_budget(messages: Sequence[Message], per_result: int, per_turn: int) -> None:
    """Budgets hold whenever the caps leave room for the cut marker."""
    for turn in turns(messages):
        lengths = [len(messages[i].text) for i in turn]
        if per_result >= MIN_CUT_CHARS:
            assert max(lengths) <= per_result
        if per_turn >= MIN_CUT_CHARS * len(turn):
            assert sum(lengths) <= per_turn


def is_subsequence(part: Sequence[Message], whole: Sequence[Message]) -> bool:
    remaining = iter(whole)
    return all(any(m == w for w in remaining) for m in part)


def _after_systems(messages: Sequence[Message]) -> list[Message]:
    first = next((i for i, m in enumerate(messages) if m.role is not Role.SYSTEM), len(messages))
    return list(messages[first:])


# --- timing note (not a test) -----------------------------------------------------------------


def time_levels(sizes: Sequence[int] = (1_000, 10_000, 100_000)) -> None:
    """Print how long each level takes on agent-like histories of `sizes` messages."""
    for size in sizes:
        history = _agent_history(size)
        for level in (1, 2, 3):
            wall, cpu = time.perf_counter(), time.process_time()
            apply_recovery_level(history, level, RecoveryConfig())
            wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
            print(f"{size:>7} messages  level {level}: {wall:.3f} s wall, {cpu:.3f} s CPU")


def _agent_history(size: int) -> list[Message]:
    """An agent session: every 4th tool result is over the budget, every 10th answer long."""
    small, big = "x = 1\n" * 300, "x = 1\n" * 5000  # 1.8k and 30k chars
    history = [Message.system("You are a coding agent.")]
    while len(history) < size:
        n = len(history)
        call = ToolCall(id=f"c{n}", name="read_file", arguments={"path": f"src/{n}.py"})
        history += [
            Message.user(f"step {n}: fix the bug"),
            Message.assistant("Reading the file.", (call,)),
            Message.tool(call.id, big if n % 16 == 1 else small),
            Message.assistant("Done. " * (1500 if n % 40 == 1 else 20)),
        ]
    return history[:size]

"""Hypothesis properties of retention by tokens ("fit"), over random conversations.

Each test draws a conversation (tests/strategies.py: system messages anywhere, broken tool
pairing, long and non-ASCII texts, continuation prompts), a room, a level and a counter (the
estimator, or a stand-in tokenizer with other ratios), applies `retain` and checks what its
docstring states: the view fits the target by the counter used, keeps the newest messages,
the latest request and, where it fits, the first one, with valid pairing; the input is never
changed and the same input gives the same view.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Sequence

from hypothesis import example, given, settings
from hypothesis import strategies as st

from chatcli.config import RecoveryConfig
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.retain import CUT_NOTE, FIRST_REQUEST_SHARE, Retention, retain
from chatcli.history.truncate import TRUNCATION_NOTICE, apply_recovery_level, is_real_user_request
from chatcli.messages import Message, Role, TextPart
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator
from tests.strategies import conversations

PROPERTY = settings(max_examples=80, deadline=None)
TINY_TOKENIZER = TokenEstimator(chars_per_token=1.5, per_message=9)  # a tiny model's tokenizer
COUNTERS = st.sampled_from(
    (
        TokenEstimator(),
        TINY_TOKENIZER,
        TokenEstimator(chars_per_token=3.3, per_message=7),
        MarginEstimator(),  # the default: the text's shape
        MarginEstimator(scale=3.3, margin=0.1, per_message=9),  # calibrated on a tiny model
    )
)
CONFIGS = st.builds(
    RecoveryConfig,
    emergency_keep_messages=st.integers(1, 12),
    target_pct=st.integers(40, 100),
    nuclear_pct=st.integers(1, 40),
)
ROOMS = st.integers(30, 6_000)
LEVELS = st.sampled_from((2, 3))
HISTORIES = conversations() | conversations(users=False)
# A request in two parts, shorter than any cut marker: nothing can be cut from it, so it is
# kept as it is (found by Hypothesis: a no-op "cut" merged its parts into one).
TWO_PARTS = Message(role=Role.USER, parts=(TextPart(text="0"), TextPart(text="0")))
SMALL_TARGET = RecoveryConfig(emergency_keep_messages=1, target_pct=40, nuclear_pct=1)
CUT_MARKER = re.compile(r"\n\[\.\.\. ([0-9,]+) chars cut" + re.escape(CUT_NOTE) + r" \.\.\.\]\n")


@PROPERTY
@given(HISTORIES, ROOMS, LEVELS, CONFIGS, COUNTERS)
def test_the_view_fits_the_target_whenever_anything_can(
    messages: list[Message], room: int, level: int, config: RecoveryConfig, counter: TokenEstimator
) -> None:
    view = retain(messages, level, config, Retention(room=room, count=counter.count)).messages
    if counter.count(view) <= target(room, level, config):
        return
    # Over the target only when nothing but the bare minimum is left: the system messages
    # (and notice), and the latest request cut to its marker or the last exchange whole.
    assert len(others(view)) <= 1 or not any(is_real_user_request(m) for m in messages)
    assert counter.count(fixed_part(view)) + counter.count(others(view)[-1:]) > target(
        room, level, config
    ) or not any(is_real_user_request(m) for m in messages)


@PROPERTY
@given(HISTORIES, ROOMS, LEVELS, CONFIGS, COUNTERS)
@example([Message.system(""), Message.system(""), TWO_PARTS], 30, 2, SMALL_TARGET, TINY_TOKENIZER)
@example([Message.system(""), TWO_PARTS], 30, 2, SMALL_TARGET, TINY_TOKENIZER)
def test_the_newest_messages_and_the_latest_request_are_kept(
    messages: list[Message], room: int, level: int, config: RecoveryConfig, counter: TokenEstimator
) -> None:
    view = retain(messages, level, config, Retention(room=room, count=counter.count)).messages
    source = others(repair_tool_pairing(messages).messages)
    kept = others(view)
    positions = origins(kept, source)
    # In order; after at most two pinned requests (the first, the latest), a suffix of the
    # repaired input: the newest messages, none skipped.
    assert positions == sorted(positions)
    span = positions[pinned_count(positions, source) :]
    assert span == list(range(len(source) - len(span), len(source)))
    latest = last_real_request(source)
    if latest is not None:
        assert latest in positions
    assert kept or not source  # never an empty view


@PROPERTY
@given(HISTORIES, ROOMS, LEVELS, CONFIGS, COUNTERS)
def test_the_first_request_is_kept_where_it_fits(
    messages: list[Message], room: int, level: int, config: RecoveryConfig, counter: TokenEstimator
) -> None:
    retention = Retention(room=room, count=counter.count)
    view = retain(messages, level, config, retention).messages
    source = others(repair_tool_pairing(messages).messages)
    first, latest = first_real_request(source), last_real_request(source)
    if (
        first is None
        or latest is None
        or view == apply_recovery_level(messages, level, config).messages
    ):
        return  # no goal to keep, or the seed's view (the floor) was kept
    systems = fixed_part(view)
    needed = counter.count((*systems, source[first], source[latest]))
    small = counter.count((source[first],)) <= room * FIRST_REQUEST_SHARE
    if small and needed <= target(room, level, config):
        assert first in origins(others(view), source)


@PROPERTY
@given(HISTORIES, ROOMS, LEVELS, CONFIGS, COUNTERS)
def test_pairing_is_valid_the_input_unchanged_and_the_view_deterministic(
    messages: list[Message], room: int, level: int, config: RecoveryConfig, counter: TokenEstimator
) -> None:
    before = copy.deepcopy(messages)
    retention = Retention(room=room, count=counter.count)
    result = retain(messages, level, config, retention)
    assert messages == before
    assert retain(messages, level, config, retention) == result
    view = result.messages
    assert repair_tool_pairing(view).messages == view
    notices = sum(m.role is Role.SYSTEM and m.text == TRUNCATION_NOTICE for m in view)
    assert notices == (1 if level == 3 else 0) or any(m.text == TRUNCATION_NOTICE for m in messages)
    systems = [m for m in repair_tool_pairing(messages).messages if m.role is Role.SYSTEM]
    assert [m for m in view if m.role is Role.SYSTEM and m.text != TRUNCATION_NOTICE] == [
        m for m in systems if m.text != TRUNCATION_NOTICE
    ]


# --- helpers ------------------------------------------------------------------------------


def target(room: int, level: int, config: RecoveryConfig) -> int:
    return room * (config.target_pct if level == 2 else config.nuclear_pct) // 100


def others(messages: Sequence[Message]) -> tuple[Message, ...]:
    return tuple(m for m in messages if m.role is not Role.SYSTEM)


def fixed_part(messages: Sequence[Message]) -> tuple[Message, ...]:
    return tuple(m for m in messages if m.role is Role.SYSTEM)


def is_cut_of(kept: Message, original: Message) -> bool:
    """`kept` is `original`, or `original` cut by retention: its head and tail around a marker
    stating exactly how many chars were cut (the bare marker when nothing else fits)."""
    if kept == original:
        return True
    if (kept.role, kept.tool_calls) != (original.role, original.tool_calls):
        return False
    parts = CUT_MARKER.split(kept.text)
    if len(parts) != 3:
        return False
    head, removed, tail = parts
    text = original.text
    whole = len(head) + int(removed.replace(",", "")) + len(tail) == len(text)
    return whole and text.startswith(head) and text.endswith(tail)


def origins(kept: Sequence[Message], source: Sequence[Message]) -> list[int]:
    """The position in `source` each kept message comes from, matched from the end (the
    newest first), so that equal messages are taken as the newest ones."""
    positions: list[int] = []
    stop = len(source)
    for message in reversed(kept):
        index = next(i for i in range(stop - 1, -1, -1) if is_cut_of(message, source[i]))
        positions.append(index)
        stop = index
    return positions[::-1]


def pinned_count(positions: Sequence[int], source: Sequence[Message]) -> int:
    """How many leading kept messages are pinned, not part of the newest span: at most two
    (the first request and the latest), user messages both."""
    count = 0
    while positions[count:] and not is_suffix(positions[count:], len(source)):
        count += 1
    assert count <= 2
    assert all(source[i].role is Role.USER for i in positions[:count])
    return count


def is_suffix(positions: Sequence[int], length: int) -> bool:
    return list(positions) == list(range(length - len(positions), length))


def last_real_request(source: Sequence[Message]) -> int | None:
    return next(
        (i for i in range(len(source) - 1, -1, -1) if is_real_user_request(source[i])), None
    )


def first_real_request(source: Sequence[Message]) -> int | None:
    return next((i for i, m in enumerate(source) if is_real_user_request(m)), None)

"""Retention by tokens ("fit"): what recovery levels 2 and 3 keep when the window is known.

The seed's levels keep a fixed number of messages (`chatcli.history.truncate`): in a long
session that is a few percent of what the window holds, and a single message larger than the
window is kept whole, so the request fails again at every level. "fit" keeps, instead, the
newest messages that fit a share of the *room* (the window minus the output reserve):
`RecoveryConfig.target_pct` at level 2, `nuclear_pct` at level 3 (plus the compaction
notice). The headroom left is deliberate: the next turns grow on a stable prefix instead of
being cut again at every turn.

The view, in order: the system messages (in their order), the notice (level 3, once), the
session's first user request when it is not in the kept span and costs at most
`FIRST_REQUEST_SHARE` of the room, the latest user request when it is not in the kept span,
then the kept span: the newest messages, taken whole turns at a time from the end. Rules:

- A tool call and its results are one unit: kept or dropped together, never split (pairing
  is repaired before and after, as in the seed's levels).
- A message costing more than `MESSAGE_SHARE` of the target is cut to that share (head +
  tail, with a marker) before it is counted: one huge tool result or answer must not evict
  every smaller message before it. Only message text is cut; tool-call arguments are not.
- The turn at the boundary (the first unit that does not fit, from the user message that
  starts it, else the unit alone) is kept too when cutting its largest message fills what is
  left and keeps at least `MIN_BOUNDARY_TOKENS` of it: whole turns alone leave up to a turn
  unused.
- The latest real user request is always kept; when it alone does not fit what the target
  leaves after the system messages, it is cut to fit (head + tail, the marker says how much
  was cut and that the transcript keeps it all). A session is never stuck on one message.
- The view's first non-system message is a user message (an API requirement): the pinned
  goal, else the span is made to start with a user message whenever it holds one; with none,
  the latest request is pinned in front of it.
- The seed's count is the floor: when the seed's view for the level fits the target and the
  view above does not end with the seed's messages, whole (the goal's reserve or a cut left
  one out), the seed's view is the view, with the goal pinned in front of its messages when
  it is small (as above) and the two still fit the target.
- Nothing else is added, and the view is never empty when the input has a non-system message.
- Markers name the transcript's message numbers when the caller gives them (`number`): a cut
  message's marker its own ("the transcript keeps the whole message #12"), level 3's notice
  the span it stands for (`chatcli.history.truncate.level_notice`).

The view fits the target by `Retention.count` whenever the system messages, the notice and the
latest request cut to its shortest (a marker, or the request itself, parts and all, when its
text is shorter than one) fit it. `count` must be subadditive (the count of a sequence is at
most the sum of the counts of its parts), as every counter of chat prompts is: each message
adds its own tokens plus its template's. Work is linear in messages and characters, plus a
handful of `count` calls per cut message.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from chatcli.config import RecoveryConfig
from chatcli.history.native import is_anchor
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.result import TransformReport, TransformResult, build_result
from chatcli.history.text import cut_middle
from chatcli.history.truncate import (
    LEVEL_NAMES,
    Number,
    apply_recovery_level,
    holds_summary,
    is_real_user_request,
    level_notice,
)
from chatcli.messages import Message, Role

__all__ = [
    "CUT_NOTE",
    "FIRST_REQUEST_SHARE",
    "MESSAGE_SHARE",
    "MIN_BOUNDARY_TOKENS",
    "Count",
    "Retention",
    "cut_message_number",
    "level_target",
    "recover",
    "retain",
]

Count = Callable[[Sequence[Message]], int]

# The session's first request (its goal) is pinned when it costs at most this share of the room.
FIRST_REQUEST_SHARE = 0.10
# No message but the latest request keeps more than this share of the target.
MESSAGE_SHARE = 0.25
# The least a message cut to fill the room left at the span's boundary keeps (tokens): less
# is a marker with a few words around it.
MIN_BOUNDARY_TOKENS = 256
# Added to the cut marker of a message cut by retention.
CUT_NOTE = " to fit the context window; the transcript keeps the whole message"
_CUT_NUMBER = re.compile(re.escape(CUT_NOTE) + r" #(\d+) \.\.\.\]")
# Attempts at cutting a message to a token count (each re-measures with `count`).
_CUT_TRIES = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class Retention:
    """What "fit" measures against: `room`, the tokens the window leaves for the prompt (window
    minus output reserve), and `count`, the prompt tokens of messages (the policy's estimator,
    calibrated when the provider stated numbers, or a real tokenizer)."""

    room: int
    count: Count

    def __post_init__(self) -> None:
        if not isinstance(self.room, int) or self.room < 1:
            raise ValueError(f"room={self.room!r} must be a positive number of tokens")


def recover(
    messages: Sequence[Message],
    level: int,
    config: RecoveryConfig,
    retention: Retention | None = None,
    number: Number | None = None,
) -> TransformResult:
    """Recovery `level` of `messages`: "fit" levels 2 and 3 when the config asks for them and
    the `retention` budget is known, else the seed's level (`apply_recovery_level`).
    `number`: the transcript's message numbers, which the markers name."""
    if level in (2, 3) and retention is not None and config.retention == "fit":
        return retain(messages, level, config, retention, number)
    return apply_recovery_level(messages, level, config, number)


def retain(
    messages: Sequence[Message],
    level: int,
    config: RecoveryConfig,
    retention: Retention,
    number: Number | None = None,
) -> TransformResult:
    """Level 2 or 3 by tokens; see the module docstring."""
    target = level_target(level, config, retention.room)
    fitted = _fit(tuple(messages), target, retention, number, notice=level == 3)
    seed = apply_recovery_level(messages, level, config, number)
    if not _keeps_seed_tail(fitted.messages, _non_system(seed.messages)) and (
        retention.count(seed.messages) <= target
    ):  # the seed's count is the floor: its newest messages, whole
        return _with_goal(seed, tuple(messages), retention, target)
    report = replace(fitted.report, name=f"level {level}: {LEVEL_NAMES[level]} (fit)")
    return TransformResult(messages=fitted.messages, report=report)


def level_target(level: int, config: RecoveryConfig, room: int) -> int:
    """The tokens level 2 or 3 keeps of `room` by "fit": `target_pct` or `nuclear_pct` of it
    (the carried block's room: it comes out of what the level keeps)."""
    if level not in (2, 3):
        raise ValueError(f"retention applies to levels 2 and 3, not {level!r}")
    return room * (config.target_pct if level == 2 else config.nuclear_pct) // 100


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """What the view keeps of the non-system messages: `start` of the kept span, the pinned
    messages (by index, in order), and the cut copies of kept messages (by index)."""

    start: int
    pins: tuple[int, ...]
    cuts: dict[int, Message]


def _fit(
    messages: tuple[Message, ...],
    target: int,
    retention: Retention,
    number: Number | None,
    *,
    notice: bool,
) -> TransformResult:
    repaired = repair_tool_pairing(messages)
    systems = tuple(m for m in repaired.messages if m.role is Role.SYSTEM)
    anchors = tuple(m for m in repaired.messages if is_anchor(m))  # never cut: see truncate
    others = tuple(m for m in repaired.messages if m.role is not Role.SYSTEM and not is_anchor(m))
    # Once is enough: a view truncated before may carry the notice already. Its span is
    # known after the plan: the room is counted with the longest it can be (all of them,
    # and the longer text: the one that says no summary is included).
    kept, widest = (
        level_notice(systems, others, number, summarized=False) if notice else (systems, ())
    )
    fixed = (*kept, *widest, *anchors)
    available = target - retention.count(fixed) if fixed else target
    plan = _plan(others, available, retention, number)
    pinned = tuple(plan.cuts.get(i, others[i]) for i in plan.pins)
    span = tuple(plan.cuts.get(i, others[i]) for i in range(plan.start, len(others)))
    if notice:
        dropped = [m for i, m in enumerate(others[: plan.start]) if i not in plan.pins]
        summarized = holds_summary((*anchors, *pinned, *span))
        kept, notices = level_notice(systems, dropped, number, summarized=summarized)
        fixed = (*kept, *notices, *anchors)
    chosen = build_result(
        "retention",
        repaired.messages,
        (*fixed, *pinned, *span),
        dropped=_dropped_lines(others, plan),
        cut=tuple(_cut_line(i, others[i], cut) for i, cut in sorted(plan.cuts.items())),
        injected=("compaction notice (system message)",)
        if any(m not in systems for m in fixed[: len(fixed) - len(anchors)])
        else (),
        moved=tuple(f"pinned user request #{i} in front of the newest messages" for i in plan.pins),
    )
    return _chain(repaired, chosen, repair_tool_pairing(chosen.messages))


def _plan(
    others: tuple[Message, ...], available: int, retention: Retention, number: Number | None
) -> _Plan:
    """Choose the kept span, the pins and the cuts within `available` tokens."""
    latest, first = _last_real_request(others), _first_real_request(others)
    reserve = _goal_cost(others, first, latest, retention)
    shortest = None if latest is None else _shortest(others[latest], number)
    if shortest is not None and available - reserve < retention.count((shortest,)):
        reserve = 0  # the latest request comes first
    cuts: dict[int, Message] = {}
    budget = available - reserve
    if latest is not None:
        kept = _cut_to(others[latest], max(budget, 0), retention.count, number)
        kept = kept if kept is not None else _shortest(others[latest], number)
        if kept is not others[latest]:
            cuts[latest] = kept
        budget -= retention.count((kept,))
    cap = max(1, int(available * MESSAGE_SHARE))
    start, span_cuts = _span_start(others, latest, budget, cap, retention.count, number)
    if reserve and first is not None and first >= start:
        # The goal is in the span anyway: the span may use what was set aside for it.
        start, span_cuts = _span_start(
            others, latest, budget + reserve, cap, retention.count, number
        )
        reserve = 0
    cuts.update(span_cuts)
    if not (reserve and first is not None and first < start):
        start = _user_start(others, start, latest)  # else the pinned goal leads the view
    pinned = (first if reserve else None, latest)
    pins = tuple(sorted({i for i in pinned if i is not None and i < start}))
    for index in [i for i in cuts if i < start and i not in pins]:
        del cuts[index]
    if not pins and start == len(others) and others:
        start = _units(others)[-1][0]  # never an empty view (no user message at all)
    return _Plan(start=start, pins=pins, cuts=cuts)


def _with_goal(
    seed: TransformResult, messages: tuple[Message, ...], retention: Retention, target: int
) -> TransformResult:
    """The seed's view with the session's first request pinned in front of its messages, when
    the view lacks it, it is small (`_goal_cost`) and the two fit `target`; else the seed's."""
    others = _non_system(messages)
    first, latest = _first_real_request(others), _last_real_request(others)
    if first is None or not _goal_cost(others, first, latest, retention):
        return seed
    goal, view = others[first], seed.messages
    if goal in view:
        return seed
    at = next(
        (i for i, m in enumerate(view) if m.role is not Role.SYSTEM and not is_anchor(m)),
        len(view),
    )
    pinned = (*view[:at], goal, *view[at:])
    if retention.count(pinned) > target:
        return seed
    line = f"pinned user request #{first} in front of the newest messages"
    return _chain(seed, build_result("retention", view, pinned, moved=(line,)))


def _goal_cost(
    others: tuple[Message, ...], first: int | None, latest: int | None, retention: Retention
) -> int:
    """The tokens set aside for the session's first request (its goal): its cost when it is
    not the latest request and costs at most `FIRST_REQUEST_SHARE` of the room, else 0."""
    if first is None or first == latest:
        return 0
    cost = retention.count((others[first],))
    return cost if cost <= retention.room * FIRST_REQUEST_SHARE else 0


def _span_start(
    others: tuple[Message, ...],
    latest: int | None,
    budget: int,
    cap: int,
    count: Count,
    number: Number | None,
) -> tuple[int, dict[int, Message]]:
    """Where the kept span starts, and its cuts: whole units are taken from the end while they
    fit `budget` (the latest request is paid for already). A message over `cap` tokens is cut
    to it first. The turn at the boundary is then taken too when cutting its largest message
    fills what is left (`_boundary_turn`)."""
    start = len(others)
    cuts: dict[int, Message] = {}
    units = _units(others)
    for position in range(len(units) - 1, -1, -1):
        unit_start, unit_end = units[position]
        indexes = range(unit_start, unit_end)
        cost, unit_cuts = _capped(others, indexes, latest, cap, count, number)
        if cost > budget:
            head = units[: position + 1]
            turn = _boundary_turn(others, head, latest, budget, cap, count, number)
            if turn is not None:
                start, turn_cuts = turn
                cuts.update(turn_cuts)
            break
        budget -= cost
        cuts.update(unit_cuts)
        start = unit_start
    return start, cuts


def _capped(
    others: tuple[Message, ...],
    indexes: range,
    latest: int | None,
    cap: int,
    count: Count,
    number: Number | None,
) -> tuple[int, dict[int, Message]]:
    """The cost of the messages at `indexes` (the latest request aside: paid for already),
    each cut to `cap` tokens first, and those cuts."""
    cost, cuts = 0, {}
    for index in indexes:
        if index == latest:
            continue
        message = others[index]
        kept = _cut_to(message, cap, count, number) or message
        if kept is not message:
            cuts[index] = kept
        cost += count((kept,))
    return cost, cuts


def _boundary_turn(
    others: tuple[Message, ...],
    units: list[tuple[int, int]],
    latest: int | None,
    budget: int,
    cap: int,
    count: Count,
    number: Number | None,
) -> tuple[int, dict[int, Message]] | None:
    """The turn of the last of `units` (the first that did not fit), from the user message
    that starts it (within two units, else the unit alone: an agent's turn is many tool
    rounds), with its largest message cut to what `budget` leaves: whole turns alone leave up
    to a turn's worth of the target unused, a lot when the window holds few turns (an agent's
    file reads, each cut to `MESSAGE_SHARE`). A span that then starts with no user message
    keeps it only behind the pinned goal (`_user_start` moves past it otherwise). None when
    the turn holds the latest request, or its largest message would keep fewer than
    `MIN_BOUNDARY_TOKENS`."""
    unit_start, end = units[-1]
    starts_turn = len(units) > 1 and others[units[-2][0]].role is Role.USER
    if others[unit_start].role is not Role.USER and starts_turn:
        unit_start = units[-2][0]  # from the user message that starts the turn
    indexes = range(unit_start, end)
    if latest in indexes:
        return None
    cost, cuts = _capped(others, indexes, latest, cap, count, number)
    largest = max(indexes, key=lambda i: count((cuts.get(i, others[i]),)))
    left = budget - (cost - count((cuts.get(largest, others[largest]),)))
    if left < MIN_BOUNDARY_TOKENS:
        return None
    kept = _cut_to(others[largest], left, count, number)
    if kept is None:
        return None
    if kept is not others[largest]:
        cuts[largest] = kept
    return unit_start, cuts


def _user_start(others: tuple[Message, ...], start: int, latest: int | None) -> int:
    """The span made to start with a user message, when it holds one (an API requirement);
    with none, it stays where it is and the latest request is pinned in front of it."""
    if latest is None or latest < start:
        first_user = next(
            (i for i in range(start, len(others)) if others[i].role is Role.USER), None
        )
        if latest is None and first_user is not None:
            return first_user
        return start
    return next(i for i in range(start, len(others)) if others[i].role is Role.USER)


def _units(others: tuple[Message, ...]) -> list[tuple[int, int]]:
    """(start, end) of each unit: an assistant message with the tool results that follow it,
    or one message. In a repaired history results directly follow their call."""
    units: list[tuple[int, int]] = []
    for index, message in enumerate(others):
        if message.role is Role.TOOL and units:
            units[-1] = (units[-1][0], index + 1)
        else:
            units.append((index, index + 1))
    return units


def _cut_to(message: Message, tokens: int, count: Count, number: Number | None) -> Message | None:
    """`message` with its text cut (head + tail, `CUT_NOTE` and its transcript number in the
    marker) so that it counts at most `tokens`; itself when it fits; None when no cut of its
    text fits."""
    cost = count((message,))
    if cost <= tokens:
        return message
    text = message.text
    if not text:
        return None
    overhead = count((message.with_text(""),))
    chars = len(text) * max(tokens - overhead, 0) // max(cost - overhead, 1)
    for _ in range(_CUT_TRIES):  # bounded: each try shrinks the text
        cut = _cut(message, chars, number)
        measured = count((cut,))
        if measured <= tokens:
            return cut
        if chars <= 0:
            return None
        # From the length the cut has (snapped to a line break, it may be shorter than asked
        # for), and always shorter: asking for a char less may snap to the same line.
        kept = len(cut.text)
        chars = min(kept - 1, kept * max(tokens - overhead, 0) // max(measured - overhead, 1))
    return None


def cut_message_number(text: str) -> int | None:
    """The transcript number a cut's marker in `text` names (None: no such marker): a level
    cuts the view a lower level cut, and a cut of a cut names the message all the same."""
    found = _CUT_NUMBER.search(text)
    return None if found is None else int(found.group(1))


def _shortest(message: Message, number: Number | None) -> Message:
    """The latest request cut to its bare marker: what is left when nothing else fits."""
    return _cut(message, 0, number)


def _cut(message: Message, chars: int, number: Number | None) -> Message:
    """`message` with its text cut to `chars` (head + tail around the marker, which names
    the message's transcript number when `number` knows it: the marker depends only on the
    message and its cut); itself when the text is too short to cut: `with_text` would merge
    its parts (and drop all but the first part's provider_details) while removing nothing."""
    found = number(message) if number is not None else None
    found = found if found is not None else cut_message_number(message.text)
    note = CUT_NOTE if found is None else f"{CUT_NOTE} #{found}"
    text = cut_middle(message.text, chars, note=note)
    return message if text == message.text else message.with_text(text)


def _last_real_request(others: tuple[Message, ...]) -> int | None:
    return next(
        (i for i in range(len(others) - 1, -1, -1) if is_real_user_request(others[i])), None
    )


def _first_real_request(others: tuple[Message, ...]) -> int | None:
    return next((i for i, m in enumerate(others) if is_real_user_request(m)), None)


def _dropped_lines(others: tuple[Message, ...], plan: _Plan) -> tuple[str, ...]:
    dropped = plan.start - len([i for i in plan.pins if i < plan.start])
    if dropped <= 0:
        return ()
    return (f"{dropped:,} older non-system messages (kept the newest that fit)",)


def _non_system(messages: tuple[Message, ...]) -> tuple[Message, ...]:
    return tuple(m for m in messages if m.role is not Role.SYSTEM and not is_anchor(m))


def _keeps_seed_tail(view: tuple[Message, ...], seed: tuple[Message, ...]) -> bool:
    """`view` ends with the seed's kept messages, whole; the seed's pinned request (its first
    message, when the rest does not follow it in `view`) need only be somewhere in `view`."""
    if _ends_with(view, seed):
        return True
    return len(seed) > 1 and _ends_with(view, seed[1:]) and seed[0] in view


def _ends_with(messages: tuple[Message, ...], tail: tuple[Message, ...]) -> bool:
    return len(messages) >= len(tail) and messages[len(messages) - len(tail) :] == tail


def _cut_line(index: int, before: Message, after: Message) -> str:
    return f"{before.role} message #{index}: {len(before.text):,} -> {len(after.text):,} chars"


def _chain(*results: TransformResult) -> TransformResult:
    report: TransformReport = results[0].report
    for result in results[1:]:
        report = report.then(result.report)
    return TransformResult(messages=results[-1].messages, report=report)

"""Carried instructions: what the user said stays in the view when their messages leave it.

A recovery level, microcompaction or compaction removes user messages from the view; the
rules and exact values they held would go with them. `carry_instructions` compares the view
before and after such a transform and carries, verbatim, the sentences of the *removed user
messages* that are rules, constraints, facts or preferences (`classify`, whose vocabulary is
`chatcli.history.instructions`) into one message of the user's own, quoting them::

    [I said earlier (#N: my message N):]
    #3: Never push to main.
    #41: The budget cap is 5,000 EUR.
    [1 more left out]

`#N` is the message's number in the transcript (as /history numbers them, from 1). Rules:

- **The user's channel.** The block is a user message (`Message.carried` holds its items as
  data: whatever reads the block reads that, never its text), placed after the system
  messages (and a provider's compaction) and after any kept message older than all it
  quotes (a pinned first request), so the view reads in the order things were said. Never a
  system message: carried words have no more authority than when the user sent them.
  Providers that want roles to alternate merge it with the next user turn (their adapters
  do).
- **Only the user's own words**: never tool results, assistant text or a compaction summary
  (a model wrote those; a tool result can be attacker-controlled), and only what the user
  typed, not what they pasted (`chatcli.history.typed`: documents, logs, code, pages, mail
  are data). At most `_MESSAGE_ITEMS` items come from one message (rules first, then as
  said); the rest are counted as left out.
- **The latest form, and never a rule without its reversal** (`chatcli.history.statements`):
  a later user sentence clearly on the same point replaces the earlier one, which is then
  not carried (nor one replaced by a sentence still in the view); one that may be on its
  point (it lifts a rule in other words, says something changed, shares half its words, or
  a word and a new value of the same unit) is carried with it, in order, and the earlier
  one only with it, within the budget too; so is a sentence worth nothing alone that a later
  one says changed (then both are).
- **Small windows** (`CarryBudget`): the block's fixed text (its first line and the count
  of what was left out) is about 15 tokens; its room is what the view keeps (a level's
  target: `CarryBudget.room`), and it comes out of it, never on top of it (`carrying`,
  `CarryBudget.limit`); rules and constraints come first and may use up to
  `FIRST_TIER_ROOM` (half) of the room, facts and preferences share what the cap
  (`CarryBudget.tokens`) leaves; within a tier the sentences the recogniser is surest of
  come first (chatter misread as a rule yields); the block says how many were
  left out.
- **No decay**: a view that has the block keeps its items through later transforms (merged
  into the new block, never nested); items replaced later, or said again in the view, leave
  it.

Invariants (tested with hypothesis): the input is never mutated; the same input gives the same
output; the only change to the view is the block (so tool pairs, the system messages and
their order, and the latest user request are as the transform left them); nothing is carried
that no removed user message said. Every function is pure: the same messages give the same
block, with no state kept between calls.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from chatcli.history.instructions import cue_of, kind_of, only_lifts
from chatcli.history.native import is_anchor
from chatcli.history.result import TransformResult, build_result
from chatcli.history.retain import cut_message_number
from chatcli.history.statements import (
    FIRST_TIER,
    KINDS,
    Number,
    Reading,
    Resolved,
    closure,
    resolve,
)
from chatcli.messages import Carried, CarriedItem, Message, Role, TextPart

__all__ = [
    "CARRY_HEADING",
    "KINDS",
    "CarriedItem",
    "CarryBudget",
    "Numbering",
    "carried_items",
    "carry_instructions",
    "carrying",
    "classify",
    "is_carry_block",
    "resolved_statements",
    "with_their_updates",
]

CARRY_HEADING = "I said earlier"
# The block's fixed text, with its left-out line about 15 tokens at most: in windows of 100
# tokens a longer intro left no room for the one item a level could still carry.
_INTRO = f"[{CARRY_HEADING} (#N: my message N):]"
# Attempts at re-running a transform with the block in its input (see `carrying`).
_CARRY_PASSES = 3
# The most items carried from one message: a user states a handful of rules at a time.
_MESSAGE_ITEMS = 12
# Rules and constraints may take at most this share of the room: chosen on the tuning
# sentences with the cap (docs/configuration.md).
FIRST_TIER_ROOM = 0.5
# How finely the recogniser's certainty orders a tier's items (`_rank`): among those about
# as sure, the cheapest first. Chosen on dense sessions of retired held-out sentences
# (benchmarks/README.md).
_SURE_STEPS = 3

Count = Callable[[Sequence[Message]], int]


@dataclass(frozen=True, slots=True, kw_only=True)
class CarryBudget:
    """The block's room: at most `tokens` (the cap) by `count` (the same count the transform
    used); rules and constraints at most `FIRST_TIER_ROOM` of `room`, what the view keeps,
    when it is known. `limit`: the most the view with its block may count, when the block
    must come out of it (a level's target): where the rest of the view leaves less than
    `tokens` (a level cannot cut below its system messages and the latest request), the
    block gets what it leaves (`carrying`)."""

    tokens: int
    count: Count
    room: int | None = None
    limit: int | None = None


class Numbering:
    """The transcript's message numbers (from 1): a message is found by identity, else by its
    role and text (the last equal one; a cut copy of a message is not found). The lookup
    tables are built on the first call: most requests never number anything."""

    def __init__(self, transcript: Sequence[Message]) -> None:
        self._transcript = tuple(transcript)
        self._ids: dict[int, int] | None = None
        self._texts: dict[tuple[Role, str], int] = {}

    def __call__(self, message: Message) -> int | None:
        if self._ids is None:
            numbered = tuple(enumerate(self._transcript, 1))
            self._ids = {id(m): i for i, m in numbered}
            self._texts = {(m.role, m.text): i for i, m in numbered}
        found = self._ids.get(id(message))
        return found if found is not None else self._texts.get((message.role, message.text))


def classify(sentence: str) -> str | None:
    """The kind of a user's sentence worth carrying alone, or None: a rule (a prohibition, an
    obligation, or the lifting of one), a constraint (a limit with a quantity), a fact (an
    exact value or a goal), a preference (an imperative or "I prefer"); see
    `chatcli.history.instructions.kind_of`. Questions (with their mark or without), headings,
    pasted-looking lines and words addressed to AI assistants are not carried; nor, alone, a
    sentence that is a rule only as a lift (`only_lifts`: "Pushing to main is OK now."),
    which is carried only with an earlier item it may lift (`chatcli.history.statements`)."""
    kind = kind_of(sentence)
    return None if kind == "rule" and only_lifts(sentence) else kind


def is_carry_block(message: Message) -> bool:
    """Whether `message` is the block of carried instructions."""
    return message.carried is not None


def carried_items(view: Sequence[Message]) -> tuple[tuple[CarriedItem, ...], int]:
    """The items of the block in `view` (none without one) and how many were left out."""
    carried = next((m.carried for m in view if m.carried is not None), None)
    return ((), 0) if carried is None else (carried.items, carried.left_out)


def carry_instructions(
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    budget: CarryBudget | None = None,
    numbering: Number | None = None,
    reading: Reading | None = None,
) -> TransformResult:
    """`after` (the view a transform made of `before`) with the block of what the removed
    user messages said (see the module docstring). `numbering` gives a message's transcript
    number (default: its place in `before`, right when `before` is the transcript). Without a
    `budget`, nothing is left out. `reading` keeps what reading the user's words found for
    the next call on the same messages (`chatcli.history.statements.Reading`)."""
    before, after = tuple(before), tuple(after)
    number = numbering if numbering is not None else Numbering(before)
    return _carry(before, after, carried_items(before)[1], budget, number, reading)


def _carry(
    before: tuple[Message, ...],
    after: tuple[Message, ...],
    old_left_out: int,
    budget: CarryBudget | None,
    number: Number,
    reading: Reading | None,
) -> TransformResult:
    """`carry_instructions`, counting `old_left_out` as left out before (the count of the
    block of the input the caller started from)."""
    read = reading if reading is not None else Reading()
    resolved = _per_message(resolve(carried_items(before)[0], before, after, number, read))
    chosen, left_out = _within(resolved, budget, old_left_out + resolved.dropped, read)
    view = _with_block(after, _block(chosen, left_out), number)
    injected = () if view == after else (_summary(chosen, left_out),)
    return build_result("carried instructions", after, view, injected=injected)


def carrying(
    transform: Callable[[tuple[Message, ...]], TransformResult],
    messages: Sequence[Message],
    *,
    budget: CarryBudget | None = None,
    numbering: Number | None = None,
    reading: Reading | None = None,
) -> TransformResult:
    """`transform` of `messages`, with what it removed carried (`carry_instructions`). When
    the block changes, the transform runs again with the block in its input, so that the
    block's room comes out of what the transform keeps (a level keeps the block like the
    system messages and fits the rest around them); at most `_CARRY_PASSES` runs, the block
    of the last one whose block fits the room that run left it (`_fitted`), else of the last
    one, carried again within that room (`_room_left`): the block comes out of the
    transform's target, never on top of it. The passes share one `reading`."""
    messages = tuple(messages)
    number = numbering if numbering is not None else Numbering(messages)
    read = reading if reading is not None else Reading()
    left_out = carried_items(messages)[1]
    result = transform(messages)
    passes = [(messages, result, _carry(messages, result.messages, left_out, budget, number, read))]
    for _ in range(_CARRY_PASSES - 1):  # bounded: a handful of passes
        seeded, _, carried = passes[-1]
        block = _block_in(carried.messages)
        if block is None or block in seeded:
            break
        # The block as the view shows it, so that the transform fits the rest around what
        # it will send; the left-out count the input had: each pass counts its own.
        seeded = _with_block(messages, block, number)
        result = transform(seeded)
        again = _carry(seeded, result.messages, left_out, budget, number, read)
        passes.append((seeded, result, again))
        if again.messages == carried.messages:  # settled: fitted around its own block
            break
    seeded, result, carried = _fitted(passes, budget)
    room = _room_left(seeded, result.messages, budget)
    block = _block_in(carried.messages)
    if room is not None and block is not None and room.count((block,)) > room.tokens:
        carried = _carry(seeded, result.messages, left_out, room, number, read)
    report = result.report.then(carried.report)
    return TransformResult(
        messages=carried.messages, report=replace(report, name=result.report.name)
    )


def _fitted(
    passes: list[tuple[tuple[Message, ...], TransformResult, TransformResult]],
    budget: CarryBudget | None,
) -> tuple[tuple[Message, ...], TransformResult, TransformResult]:
    """The last pass (its input, the transform's result, the view with its block) whose
    block fits the room that run left it, else the last pass (its block is then carried
    again within that room). Passes may not settle: a pinned first request the transform
    keeps beside a small block, and cuts beside the larger block that quotes it; carrying
    the small block's items in the room the larger one was cut for would drop the rule and
    keep a preference."""
    for at, (seeded, result, carried) in reversed(list(enumerate(passes))):
        room = _room_left(seeded, result.messages, budget)
        block = _block_in(carried.messages)
        # Without a limit, an earlier pass's room is known only when it was fitted around
        # a block.
        known = at == len(passes) - 1 or (budget is not None and budget.limit is not None)
        if not known and _block_in(seeded) is None:
            continue
        if room is None or block is None or room.count((block,)) <= room.tokens:
            return seeded, result, carried
    return passes[-1]


def _room_left(
    seeded: tuple[Message, ...], view: tuple[Message, ...], budget: CarryBudget | None
) -> CarryBudget | None:
    """`budget` within the room a transform of `seeded` left its block in `view`: no more
    than `budget.limit` less the rest, when the limit is known (the rest was fitted around
    the block of `seeded`: a block that grew since may use what the rest left of the limit,
    and no more); else no more than that block (a larger one would push the rest over its
    target)."""
    if budget is None:
        return None
    tokens = budget.tokens
    if budget.limit is not None:
        rest = budget.count(tuple(m for m in view if not is_carry_block(m)))
        tokens = min(tokens, budget.limit - rest)
    elif (fitted := _block_in(seeded)) is not None:
        tokens = min(tokens, budget.count((fitted,)))
    return replace(budget, tokens=max(tokens, 0))


def _block_in(messages: Sequence[Message]) -> Message | None:
    return next((m for m in messages if is_carry_block(m)), None)


def resolved_statements(
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    earlier: Sequence[CarriedItem] = (),
    numbering: Number | None = None,
) -> tuple[tuple[CarriedItem, ...], tuple[tuple[int, ...], ...]]:
    """What the user messages of `before` that `after` leaves out said, worth keeping, with
    `earlier` items (said before them all), resolved as the block resolves them (the latest
    form only; an update kept with what it may update), in order, all of them (no budget),
    and for each one the indexes of the later ones that must go with it. What a compaction
    pins after its summary is chosen from these, so that a pinned rule is never shown
    without its reversal."""
    before = tuple(before)
    number = numbering if numbering is not None else Numbering(before)
    resolved = resolve(tuple(earlier), before, tuple(after), number)
    return resolved.items, resolved.follows


def with_their_updates(chosen: Sequence[int], follows: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The indexes `chosen`, with every later one they must go with (`resolved_statements`),
    in order."""
    found: set[int] = set()
    for index in chosen:
        found |= closure(index, follows)
    return tuple(sorted(found))


def _per_message(resolved: Resolved) -> Resolved:
    """The items, at most `_MESSAGE_ITEMS` of one message (updates of earlier items first,
    then by kind, then as said), and how many were left out; an item is left out with those
    it must go with (`Resolved.follows`): never an earlier item without its update."""
    items = resolved.items
    updates = {later for follows in resolved.follows for later in follows}
    by_message: dict[int, list[int]] = {}
    for index, item in enumerate(items):
        if item.number is not None:
            by_message.setdefault(item.number, []).append(index)
    over = {
        index
        for indexes in by_message.values()
        for index in sorted(indexes, key=lambda i: (i not in updates, KINDS.index(items[i].kind)))[
            _MESSAGE_ITEMS:
        ]
    }
    if not over:
        return resolved
    out = {i for i in range(len(items)) if closure(i, resolved.follows) & over}
    new = {old: n for n, old in enumerate(i for i in range(len(items)) if i not in out)}
    return Resolved(
        items=tuple(item for index, item in enumerate(items) if index not in out),
        follows=tuple(
            tuple(new[j] for j in follows if j in new)
            for index, follows in enumerate(resolved.follows)
            if index not in out
        ),
        dropped=resolved.dropped + len(out),
        urgent=frozenset(new[i] for i in resolved.urgent if i in new),
    )


def _within(
    resolved: Resolved, budget: CarryBudget | None, left_out: int, read: Reading
) -> tuple[tuple[CarriedItem, ...], int]:
    """The items that fit the budget, in their order, and how many were left out (those
    that did not, and `left_out` more, left out before).

    By rank (`_rank`: what updates a statement still in view, then rules and constraints,
    facts, preferences; the surest first within a tier), an item is taken with the later
    items it must go with (`Resolved.follows`, transitively), when they all fit what is
    left: rules and constraints within their share of the room, all within the cap. Each
    line is counted alone (a count is subadditive), then the whole block is counted, and
    the last group taken dropped while it does not fit."""
    items = resolved.items
    if budget is None or not items:
        return items, left_out
    bare = budget.count((Message.user(""),))
    costs = [budget.count((Message.user(item.line()),)) - bare for item in items]
    frame = _block(items[:1], len(items) + left_out)
    assert frame is not None  # for the type checker: there are items
    left = budget.tokens - (budget.count((frame,)) - costs[0])
    first_left = left if budget.room is None else min(left, int(budget.room * FIRST_TIER_ROOM))
    urgent = resolved.urgent
    sure = [read.certainty(item.text) for item in items]
    # What updates a statement in view comes first; an item that says no change itself and
    # that a later one of those may update comes after the rest of its tier: the update says
    # more than it does (one that says a change, such as the update of a pinned limit, stays
    # first when chatter that may update it comes first too).
    lifted = {
        i
        for i in range(len(items))
        if urgent & (closure(i, resolved.follows) - {i}) and not cue_of(items[i].text)
    }
    groups_cost = [sum(costs[j] for j in closure(i, resolved.follows)) for i in range(len(items))]
    rank = sorted(
        range(len(items)),
        key=lambda i: _rank(
            items[i], i in urgent - lifted, i in lifted, sure[i], groups_cost[i], i
        ),
    )
    chosen: set[int] = set()
    groups: list[set[int]] = []
    for index in rank:
        if index in chosen:
            continue
        group = closure(index, resolved.follows) - chosen
        cost = sum(costs[i] for i in group)
        first = sum(costs[i] for i in group if items[i].kind in FIRST_TIER)
        if cost <= left and first <= first_left:
            chosen |= group
            groups.append(group)
            left -= cost
            first_left -= first
    while groups:  # bounded: one group fewer each time
        block = _block(tuple(items[i] for i in sorted(chosen)), len(items) - len(chosen) + left_out)
        if block is not None and budget.count((block,)) <= budget.tokens:
            break
        chosen -= groups.pop()
    return tuple(items[i] for i in sorted(chosen)), len(items) - len(chosen) + left_out


def _rank(
    item: CarriedItem, urgent: bool, lifted: bool, sure: float, cost: int, index: int
) -> tuple[bool, int, bool, int, int, int]:
    """Where an item comes in what a tight block keeps: what updates a statement still in
    view (`urgent`); then by tier (rules and constraints, facts, preferences); within a
    tier, an item saying no change that such an update may update last (`lifted`: carried
    only with it, it says little the update does not: "Nunca faça push na main.", once
    "Pode fazer push na main agora." is carried first, yields to the lift of another rule);
    then the surest first (`sure`, the recogniser's `certainty`, in `_SURE_STEPS` steps: a
    sentence of chatter misread as a rule yields to the user's rules, and so does a sentence
    carried only as an update, unless its rule is kept), then the cheapest with what it must
    go with (`cost`: a limit said in one line before a rule that brings two updates along;
    the more of them fit), then the newest."""
    tier = 0 if item.kind in FIRST_TIER else KINDS.index(item.kind)
    return (not urgent, tier, lifted, -round(sure * _SURE_STEPS), cost, -index)


def _block(items: tuple[CarriedItem, ...], left_out: int) -> Message | None:
    """The block quoting `items`: its text is rendered here, once; `carried` keeps them."""
    if not items:
        return None
    lines = [_INTRO, *(item.line() for item in items)]
    if left_out:
        lines.append(f"[{left_out:,} more left out]")
    carried = Carried(items=items, left_out=left_out)
    return Message(role=Role.USER, parts=(TextPart(text="\n".join(lines)),), carried=carried)


def _with_block(
    view: tuple[Message, ...], block: Message | None, number: Number
) -> tuple[Message, ...]:
    """`view` with its block (if any) replaced by `block`: after the leading system messages
    and anchors (a provider's compaction, which must come before what follows it), and after
    the messages right after them that are older than everything it quotes (a pinned first
    request), so that the view reads in the order things were said."""
    rest = tuple(m for m in view if not is_carry_block(m))
    if block is None or block.carried is None:
        return rest
    numbers = [i.number for i in block.carried.items if i.number is not None]
    oldest = min(numbers, default=0)
    at = 0
    while at < len(rest) and (
        rest[at].role is Role.SYSTEM or is_anchor(rest[at]) or _older(rest[at], oldest, number)
    ):
        at += 1
    return (*rest[:at], block, *rest[at:])


def _older(message: Message, than: int, number: Number) -> bool:
    found = number(message)
    found = found if found is not None else cut_message_number(message.text)
    return found is not None and found < than


def _summary(items: tuple[CarriedItem, ...], left_out: int) -> str:
    more = f", {left_out:,} left out to fit" if left_out else ""
    return f"carried {len(items):,} instructions and facts of removed user messages{more}"

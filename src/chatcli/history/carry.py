"""Carried instructions: what the user said stays in the view when their messages leave it.

A recovery level, microcompaction or compaction removes user messages from the view; the
rules and exact values they held would go with them. `carry_instructions` compares the view
before and after such a transform and carries, verbatim, the sentences of the *removed user
messages* that are rules, constraints, facts or preferences (`classify`, whose vocabulary is
`chatcli.history.instructions`) into one message of the user's own, quoting them::

    [What I said earlier, verbatim (#N: my message number):]
    #3: Never push to main.
    #41: The budget cap is 5,000 EUR.
    [1 more left out to fit]

`#N` is the message's number in the transcript (as /history numbers them, from 1). Rules:

- **The user's channel.** The block is a user message (`Message.carried` holds its items as
  data: whatever reads the block reads that, never its text), placed after the system
  messages (and a provider's compaction) and after any kept message older than what it
  quotes, so the view reads in the order things were said. Never a system message: carried
  words have no more authority than when the user sent them. Providers that want roles to
  alternate merge it with the next user turn (their adapters do).
- **Only the user's own words**: never tool results, assistant text or a compaction summary
  (a model wrote those; a tool result can be attacker-controlled), and only what the user
  typed, not what they pasted (`chatcli.history.typed`: documents, logs, code, pages, mail
  are data). At most `_MESSAGE_ITEMS` items come from one message (rules first, then as
  said); the rest are counted as left out.
- **The latest form, and never a rule without its reversal.** A later user sentence clearly
  on the same point (it has most of the earlier one's content words, values and rule words
  aside) replaces the earlier one, which is then not carried. A later sentence that says
  something changed ("... is fine now", "forget what I said about ...", "pode ... agora")
  and shares a content word with an earlier item (else: follows it directly) may be on its
  point: both are carried, in order, and the earlier one is carried only with it, within
  the budget too. One replaced by a sentence still in the view is not carried. Sentences
  with the same content words are the same point whatever their values, so a log whose lines
  differ only in numbers resolves to its last line; resolving compares only sentences that
  can be on the same point (`_Points`), so it stays near-linear in the sentences.
- **Small windows** (`CarryBudget`): the block's fixed text is one short line; rules and
  constraints come first and may use up to half of the room (`CarryBudget.room`), facts
  and preferences share what the cap (`CarryBudget.tokens`) leaves; newest first within a
  kind; the block says how many were left out.
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

from bisect import bisect_left
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from chatcli.history.instructions import changes, content_words, kind_of, sentences
from chatcli.history.native import is_anchor
from chatcli.history.result import TransformResult, build_result
from chatcli.history.retain import cut_message_number
from chatcli.history.truncate import is_real_user_request
from chatcli.history.typed import typed_parts
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

CARRY_HEADING = "What I said earlier, verbatim"
# Highest priority first: what a tight block keeps. Rules and constraints are the first tier.
KINDS = ("rule", "constraint", "fact", "preference")
_FIRST_TIER = frozenset(KINDS[:2])
_INTRO = f"[{CARRY_HEADING} (#N: my message number):]"
# A compaction summary is a user message a model wrote (`chatcli.compaction.SUMMARY_HEADER`).
_MODEL_WRITTEN = ("[Earlier conversation compacted by chatcli",)
# Attempts at re-running a transform with the block in its input (see `carrying`).
_CARRY_PASSES = 3
# The most items carried from one message: a user states a handful of rules at a time.
_MESSAGE_ITEMS = 12
# Rules and constraints may take at most this share of the room.
_FIRST_TIER_ROOM = 0.5
# Related earlier items looked at per content word (the newest): bounds resolving a long
# session whose words recur.
_RELATED_PER_WORD = 32

Count = Callable[[Sequence[Message]], int]
Number = Callable[[Message], int | None]


@dataclass(frozen=True, slots=True, kw_only=True)
class CarryBudget:
    """The block's room: at most `tokens` (the cap) by `count` (the same count the transform
    used); rules and constraints at most half of `room`, the view's room, when it is known."""

    tokens: int
    count: Count
    room: int | None = None


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
    """The kind of a user's sentence worth carrying, or None: a rule (a prohibition, an
    obligation, or the lifting of one), a constraint (a limit with a quantity), a fact (an
    exact value or a goal), a preference (an imperative or "I prefer"); see
    `chatcli.history.instructions.kind_of`. Questions, pasted-looking lines and words
    addressed to AI assistants are not carried."""
    return kind_of(sentence)


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
) -> TransformResult:
    """`after` (the view a transform made of `before`) with the block of what the removed
    user messages said (see the module docstring). `numbering` gives a message's transcript
    number (default: its place in `before`, right when `before` is the transcript). Without a
    `budget`, nothing is left out."""
    before, after = tuple(before), tuple(after)
    number = numbering if numbering is not None else Numbering(before)
    old, old_left_out = carried_items(before)
    resolved = _per_message(_resolved(old, before, after, number))
    chosen, left_out = _within(resolved, budget)
    left_out += old_left_out + resolved.dropped
    view = _with_block(after, _block(chosen, left_out), number)
    injected = () if view == after else (_summary(chosen, left_out),)
    return build_result("carried instructions", after, view, injected=injected)


def carrying(
    transform: Callable[[tuple[Message, ...]], TransformResult],
    messages: Sequence[Message],
    *,
    budget: CarryBudget | None = None,
    numbering: Number | None = None,
) -> TransformResult:
    """`transform` of `messages`, with what it removed carried (`carry_instructions`). When
    the block changes, the transform runs again with the block in its input, so that the
    block's room comes out of what the transform keeps (a level keeps the block like the
    system messages and fits the rest around them); at most `_CARRY_PASSES` runs, the block
    of the last one carried from what that run removed."""
    messages = tuple(messages)
    number = numbering if numbering is not None else Numbering(messages)
    result = transform(messages)
    carried = carry_instructions(messages, result.messages, budget=budget, numbering=number)
    left_out = carried_items(messages)[1]
    for _ in range(_CARRY_PASSES - 1):  # bounded: a handful of passes
        block = next((m for m in carried.messages if is_carry_block(m)), None)
        if block is None or block in messages:
            break
        # The left-out count the input had: this pass counts what it leaves out itself.
        seeded = _with_block(messages, _block(carried_items((block,))[0], left_out), number)
        result = transform(seeded)
        again = carry_instructions(seeded, result.messages, budget=budget, numbering=number)
        if again.messages == carried.messages:
            break
        carried = again
    report = result.report.then(carried.report)
    return TransformResult(
        messages=carried.messages, report=replace(report, name=result.report.name)
    )


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
    resolved = _resolved(tuple(earlier), before, tuple(after), number)
    return resolved.items, resolved.follows


def with_their_updates(chosen: Sequence[int], follows: Sequence[Sequence[int]]) -> tuple[int, ...]:
    """The indexes `chosen`, with every later one they must go with (`resolved_statements`),
    in order."""
    found: set[int] = set()
    for index in chosen:
        found |= _closure(index, follows)
    return tuple(sorted(found))


@dataclass(frozen=True, slots=True, kw_only=True)
class _Statement:
    """A sentence in time: `at` orders statements (transcript number), `item` is set for a
    candidate (carried unless replaced; kind "" while it is carried only as an update),
    `words` its content words, `change` whether it says something changed."""

    at: int
    item: CarriedItem | None
    text: str
    words: frozenset[str]
    change: bool


@dataclass(frozen=True, slots=True, kw_only=True)
class _Resolved:
    """The items to carry, in order; for each, the indexes of the later items it must go
    with (updates that may be on its point); how many items were dropped on the way."""

    items: tuple[CarriedItem, ...]
    follows: tuple[tuple[int, ...], ...]
    dropped: int = 0


def _resolved(
    old: tuple[CarriedItem, ...],
    before: tuple[Message, ...],
    after: tuple[Message, ...],
    number: Number,
) -> _Resolved:
    """The candidates (the old block's items and the removed user messages' sentences worth
    carrying) that no later user sentence replaces, in order, each with what it replaces and
    the later items it must be carried with."""
    statements = [_statement(i.number or 0, i, i.text) for i in old]
    statements += _message_statements(before, after, number)
    statements.sort(key=lambda s: s.at)  # stable: old items first at a tie
    points = _Points(statements)
    statements, updates = _with_updates(statements, points)
    kept: list[CarriedItem] = []
    at: dict[int, int] = {}  # statement index -> kept index
    for index, statement in enumerate(statements):
        if statement.item is None or not statement.item.kind or points.replaced_later(index):
            continue
        replaced = {
            statements[j].at
            for j in points.replaced_by(index)
            if statements[j].item is not None and statements[j].at
            if statements[j].at != statement.at
        }
        at[index] = len(kept)
        kept.append(
            replace(statement.item, replaces=tuple(sorted(replaced | set(statement.item.replaces))))
        )
    follows: list[list[int]] = [[] for _ in kept]
    for later, earlier in updates:
        if later in at and earlier in at:
            follows[at[earlier]].append(at[later])
    return _Resolved(items=tuple(kept), follows=tuple(tuple(f) for f in follows))


def _with_updates(
    statements: list[_Statement], points: _Points
) -> tuple[list[_Statement], list[tuple[int, int]]]:
    """The statements with the kindless ones (removed sentences carried only as updates)
    made items of the best kind they may update, or plain statements when they update none;
    and the pairs (later, earlier) of an update and an item it may be on the point of.

    A statement updates the ones it replaces (`_Points`), and, when it says something
    changed, the earlier items that share a content word with it (the newest
    `_RELATED_PER_WORD` per word), or the item right before it when none does."""
    resolved = list(statements)
    best: dict[int, int] = {}  # a shape's (or a text's) highest-ranked kind so far, by rank
    best_text: dict[str, int] = {}
    by_word: dict[str, list[int]] = {}  # content word -> earlier items with it, in order
    last_item: int | None = None
    pairs: list[tuple[int, int]] = []
    for index, statement in enumerate(statements):
        related = _related(statement, by_word, last_item) if statement.change else []
        if statement.item is not None and not statement.item.kind:
            ranks = [best_text.get(statement.text, len(KINDS))]
            ranks += [best.get(s, len(KINDS)) for s in points.shapes_replaced(index)]
            ranks += [KINDS.index(k) for j in related if (k := _kind(resolved[j]))]
            rank = min(ranks)
            item = replace(statement.item, kind=KINDS[rank]) if rank < len(KINDS) else None
            resolved[index] = replace(statement, item=item)
        item = resolved[index].item
        if item is None or not item.kind:
            continue
        pairs += [(index, j) for j in related]
        rank, shape = KINDS.index(item.kind), points.shape[index]
        best[shape] = min(best.get(shape, rank), rank)
        best_text[statement.text] = min(best_text.get(statement.text, rank), rank)
        for word in statement.words:
            by_word.setdefault(word, []).append(index)
        last_item = index
    return resolved, pairs


def _related(
    statement: _Statement, by_word: dict[str, list[int]], last_item: int | None
) -> list[int]:
    """The earlier items a statement that says something changed may be on the point of."""
    found = {j for word in statement.words for j in by_word.get(word, ())[-_RELATED_PER_WORD:]}
    if not found and last_item is not None:
        found.add(last_item)
    return sorted(found)


def _kind(statement: _Statement) -> str:
    return statement.item.kind if statement.item is not None else ""


class _Points:
    """Which statements replace which (`_replaces`), found without comparing every pair.

    Statements with the same content words are one *shape*: within a shape, a statement
    replaces every earlier one unless it is a question or the shape has fewer than two words
    (then only the same text does). Between shapes, only pairs that can cover (`_covers`)
    are compared, found by prefix filtering (as similarity joins do): a log whose lines
    differ only in numbers is one shape, and common words are seldom a prefix."""

    def __init__(self, statements: list[_Statement]) -> None:
        self._statements = statements
        shapes: dict[frozenset[str], int] = {}
        self.shape = [shapes.setdefault(s.words, len(shapes)) for s in statements]
        words = list(shapes)
        self._members: list[list[int]] = [[] for _ in words]
        self._texts: dict[str, list[int]] = {}
        for index, statement in enumerate(statements):
            self._members[self.shape[index]].append(index)
            self._texts.setdefault(statement.text, []).append(index)
        # covers[a]: the other shapes whose statements a (non-question) statement of shape a
        # replaces; covered[a]: the other shapes that replace shape a's statements.
        self._covers: list[list[int]] = [[] for _ in words]
        self._covered: list[list[int]] = [[] for _ in words]
        for a, b in _covering(words):
            self._covers[a].append(b)
            self._covered[b].append(a)
        self._own = [len(w) >= 2 for w in words]  # a shape whose statements replace each other
        # The last non-question statement of each shape, and of a shape or those covering it.
        last = [max((i for i in m if not _asks(statements[i])), default=-1) for m in self._members]
        self._last_covering = [
            max([last[s] if self._own[s] else -1, *(last[c] for c in self._covered[s])])
            for s in range(len(words))
        ]

    def shapes_replaced(self, index: int) -> list[int]:
        """The shapes whose statements the one at `index` replaces (same text aside)."""
        if _asks(self._statements[index]):
            return []
        shape = self.shape[index]
        return [shape, *self._covers[shape]] if self._own[shape] else self._covers[shape]

    def replaced_later(self, index: int) -> bool:
        """Whether a later statement replaces the one at `index`."""
        return self._texts[self._statements[index].text][-1] > index or (
            self._last_covering[self.shape[index]] > index
        )

    def replaced_by(self, index: int) -> list[int]:
        """The indexes of the earlier statements the one at `index` replaces."""
        found = set(self._texts[self._statements[index].text])
        for shape in self.shapes_replaced(index):
            members = self._members[shape]
            found.update(members[: bisect_left(members, index)])
        return sorted(j for j in found if j < index)


def _covering(shapes: list[frozenset[str]]) -> list[tuple[int, int]]:
    """The pairs (a, b) of shapes where `a` covers `b` (`_covers`).

    Prefix filtering: order all words rarest first; sets that share at least `s` words share
    their first common word within the first `len - s + 1` words of each. Covering needs
    `s` of at least four fifths of `b` and half of `a`, so `b` is indexed by its first
    `len - ceil(4 len / 5) + 1` words and `a` looks up its first `len - ceil(len / 2) + 1`;
    a shape of fewer than two words covers none and is covered by none."""
    frequency: dict[str, int] = {}
    for words in shapes:
        for word in words:
            frequency[word] = frequency.get(word, 0) + 1
    rarest = [sorted(words, key=lambda w: (frequency[w], w)) for words in shapes]
    index: dict[str, list[int]] = {}
    for b, ordered in enumerate(rarest):
        if len(ordered) >= 2:
            for word in ordered[: len(ordered) - (4 * len(ordered) + 4) // 5 + 1]:
                index.setdefault(word, []).append(b)
    pairs: list[tuple[int, int]] = []
    for a, ordered in enumerate(rarest):
        if len(ordered) >= 2:
            found = {b for word in ordered[: len(ordered) // 2 + 1] for b in index.get(word, ())}
            pairs += [(a, b) for b in sorted(found - {a}) if _covers(shapes[a], shapes[b])]
    return pairs


def _message_statements(
    before: tuple[Message, ...], after: tuple[Message, ...], number: Number
) -> list[_Statement]:
    """Every sentence the user typed in their messages in `before`, in order: a candidate
    item when its message left the view (its text is not in `after`'s user messages)."""
    texts = {m.text for m in after if m.role is Role.USER and not is_carry_block(m)}
    in_view = "\n".join(texts)
    statements: list[_Statement] = []
    at = 0
    for message in before:
        found = number(message)
        at = found if found is not None else at
        if not _users_own(message):
            continue
        removed = message.text not in texts
        for part in typed_parts(message.text):
            for sentence in sentences(part):
                # A kindless item is carried only as an update (`_with_updates`).
                carried = removed and sentence not in in_view
                kind = (classify(sentence) or "") if carried else None
                item = None if kind is None else CarriedItem(number=found, kind=kind, text=sentence)
                statements.append(_statement(at, item, sentence))
    return statements


def _per_message(resolved: _Resolved) -> _Resolved:
    """The items, at most `_MESSAGE_ITEMS` of one message (by kind, then as said), and how
    many were left out."""
    items = resolved.items
    by_message: dict[int, list[int]] = {}
    for index, item in enumerate(items):
        if item.number is not None:
            by_message.setdefault(item.number, []).append(index)
    out = {
        index
        for indexes in by_message.values()
        for index in sorted(indexes, key=lambda i: KINDS.index(items[i].kind))[_MESSAGE_ITEMS:]
    }
    if not out:
        return resolved
    new = {old: n for n, old in enumerate(i for i in range(len(items)) if i not in out)}
    return _Resolved(
        items=tuple(item for index, item in enumerate(items) if index not in out),
        follows=tuple(
            tuple(new[j] for j in follows if j in new)
            for index, follows in enumerate(resolved.follows)
            if index not in out
        ),
        dropped=resolved.dropped + len(out),
    )


def _users_own(message: Message) -> bool:
    return is_real_user_request(message) and not message.text.startswith(_MODEL_WRITTEN)


def _statement(at: int, item: CarriedItem | None, text: str) -> _Statement:
    return _Statement(at=at, item=item, text=text, words=content_words(text), change=changes(text))


def _replaces(later: _Statement, earlier: _Statement) -> bool:
    """`later` is on the same point as `earlier`: the same sentence, or one with most of its
    content words (a question asks, it replaces nothing)."""
    if later.text == earlier.text:
        return True
    return not _asks(later) and _covers(later.words, earlier.words)


def _asks(statement: _Statement) -> bool:
    return statement.text.endswith("?")


def _covers(later: frozenset[str], earlier: frozenset[str]) -> bool:
    """A sentence with the words `later` is on the point of one with the words `earlier`: it
    has most of them (at least two), and they have half their words in common."""
    if len(earlier) < 2:
        return False
    shared = len(later & earlier)
    return shared >= 0.8 * len(earlier) and shared >= 0.5 * len(later | earlier)


def _within(resolved: _Resolved, budget: CarryBudget | None) -> tuple[tuple[CarriedItem, ...], int]:
    """The items that fit the budget, in their order, and how many did not.

    By rank (rules, constraints, facts, preferences; newest first within a kind), an item is
    taken with the later items it must go with (`_Resolved.follows`, transitively), when
    they all fit what is left: rules and constraints within their share of the room, all
    within the cap. Each line is counted alone (a count is subadditive), then the whole block
    is counted, and the last group taken dropped while it does not fit."""
    items = resolved.items
    if budget is None or not items:
        return items, 0
    bare = budget.count((Message.user(""),))
    costs = [budget.count((Message.user(item.line()),)) - bare for item in items]
    frame = _block(items[:1], len(items))
    assert frame is not None  # for the type checker: there are items
    left = budget.tokens - (budget.count((frame,)) - costs[0])
    first_left = left if budget.room is None else min(left, int(budget.room * _FIRST_TIER_ROOM))
    rank = sorted(range(len(items)), key=lambda i: (KINDS.index(items[i].kind), -i))
    chosen: set[int] = set()
    groups: list[set[int]] = []
    for index in rank:
        if index in chosen:
            continue
        group = _closure(index, resolved.follows) - chosen
        cost = sum(costs[i] for i in group)
        first = sum(costs[i] for i in group if items[i].kind in _FIRST_TIER)
        if cost <= left and first <= first_left:
            chosen |= group
            groups.append(group)
            left -= cost
            first_left -= first
    while groups:  # bounded: one group fewer each time
        block = _block(tuple(items[i] for i in sorted(chosen)), len(items) - len(chosen))
        if block is not None and budget.count((block,)) <= budget.tokens:
            break
        chosen -= groups.pop()
    return tuple(items[i] for i in sorted(chosen)), len(items) - len(chosen)


def _closure(index: int, follows: Sequence[Sequence[int]]) -> set[int]:
    """`index` and every later item it must go with, directly or through another."""
    found = {index}
    stack = [index]
    while stack:  # bounded: each index is pushed once
        for later in follows[stack.pop()]:
            if later not in found:
                found.add(later)
                stack.append(later)
    return found


def _block(items: tuple[CarriedItem, ...], left_out: int) -> Message | None:
    """The block quoting `items`: its text is rendered here, once; `carried` keeps them."""
    if not items:
        return None
    lines = [_INTRO, *(item.line() for item in items)]
    if left_out:
        lines.append(f"[{left_out:,} more left out to fit]")
    carried = Carried(items=items, left_out=left_out)
    return Message(role=Role.USER, parts=(TextPart(text="\n".join(lines)),), carried=carried)


def _with_block(
    view: tuple[Message, ...], block: Message | None, number: Number
) -> tuple[Message, ...]:
    """`view` with its block (if any) replaced by `block`: after the leading system messages
    and anchors (a provider's compaction, which must come before what follows it), and after
    the messages right after them that are older than the newest item it quotes (a pinned
    first request), so that the view reads in the order things were said."""
    rest = tuple(m for m in view if not is_carry_block(m))
    if block is None or block.carried is None:
        return rest
    newest = max((i.number for i in block.carried.items if i.number is not None), default=0)
    at = 0
    while at < len(rest) and (
        rest[at].role is Role.SYSTEM or is_anchor(rest[at]) or _older(rest[at], newest, number)
    ):
        at += 1
    return (*rest[:at], block, *rest[at:])


def _older(message: Message, newest: int, number: Number) -> bool:
    found = number(message)
    found = found if found is not None else cut_message_number(message.text)
    return found is not None and found < newest


def _summary(items: tuple[CarriedItem, ...], left_out: int) -> str:
    more = f", {left_out:,} left out to fit" if left_out else ""
    return f"carried {len(items):,} instructions and facts of removed user messages{more}"

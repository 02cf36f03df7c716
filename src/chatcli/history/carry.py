"""Carried instructions: what the user said stays in the view when their messages leave it.

A recovery level, microcompaction or compaction removes user messages from the view; the
rules and exact values they held would go with them. `carry_instructions` compares the view
before and after such a transform and carries, verbatim, the sentences of the *removed user
messages* that are instructions (the lexicon of `chatcli.history.instructions`) or hold exact
values (amounts, numbers with units, dates, times, versions, paths, URLs, codes), into one
system message right after the view's system messages::

    [Instructions and facts from earlier in this conversation: ...]
    - #3 (rule): Never push to main.
    - #41 (constraint): The budget cap is 5,000 EUR. (replaces #9)
    [1 more left out to fit the context window; the transcript keeps it.]

`#N` is the message's number in the transcript (as /history numbers them, from 1). Rules:

- Only the user's own words: never tool results, assistant text or a compaction summary (a
  model wrote those; a tool result can be attacker-controlled).
- The latest form only: a later user sentence about the same point (it has the earlier one's
  content words, values and rule words aside) replaces the earlier one; a carried sentence
  says which ones it replaces. One replaced by a sentence still in the view is not carried.
  Sentences with the same content words are the same point whatever their values, so a log
  whose lines differ only in numbers resolves to its last line; resolving compares only
  sentences that can be on the same point (`_Points`), so it stays near-linear in the
  sentences of a long paste.
- Pasted data is not the user's instructions: fenced code blocks are never carried, and at
  most `_MESSAGE_ITEMS` items come from one message (rules first, then as said; a user states
  a handful at a time, so a message with more holds a pasted log or document); the rest are
  counted as left out.
- A share of the room (`CarryBudget`): over it, rules outrank constraints, constraints facts,
  facts preferences, newest first within a kind; the block says how many were left out.
- No decay: a view that has the block keeps its items through later transforms (merged into
  the new block, never nested); items replaced later, or said again in the view, leave it.

Invariants (tested with hypothesis): the input is never mutated; the same input gives the same
output; the only change to the view is the block (so tool pairs, the system messages and
their order, and the latest user request are as the transform left them); nothing is carried
that no removed user message said.
"""

from __future__ import annotations

import re
from bisect import bisect_left
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, replace

from chatcli.history.instructions import RULE_WORDS, is_instruction, sentences
from chatcli.history.result import TransformResult, build_result
from chatcli.history.truncate import is_real_user_request
from chatcli.messages import Message, Role

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
]

CARRY_HEADING = "Instructions and facts from earlier in this conversation"
# Highest priority first: what a tight block keeps.
KINDS = ("rule", "constraint", "fact", "preference")
_BLOCK_START = f"[{CARRY_HEADING}"
_INTRO = (
    f"{_BLOCK_START}: the user's own words from messages no longer in view, verbatim, oldest "
    "first; #N is the message's number in the transcript. A later statement on the same point "
    "replaces an earlier one.]"
)
# A compaction summary is a user message a model wrote (`chatcli.compaction.SUMMARY_HEADER`).
_MODEL_WRITTEN = ("[Earlier conversation compacted by chatcli",)
# Attempts at re-running a transform with the block in its input (see `carrying`).
_CARRY_PASSES = 3
# The most items carried from one message: a user states a handful of rules at a time, and a
# message with more holds pasted material (a log, a document), not the user's instructions.
_MESSAGE_ITEMS = 12
_FENCE = re.compile(r"^ {0,3}(`{3,}|~{3,}).*?(?:^ {0,3}\1[^\n]*$|\Z)", re.MULTILINE | re.DOTALL)

Count = Callable[[Sequence[Message]], int]

_VALUE = re.compile(
    "|".join(
        (
            r"https?://\S+",
            r"\b[\w.+-]+@[\w-]+\.[\w.]+",
            r"(?:~|\.{1,2})?/[\w.@-]+(?:/[\w.@-]+)+",
            r"\b[\w-]+(?:/[\w.-]+)+",
            r"\b[\w-]+\.(?:py|js|ts|tsx|json|ya?ml|toml|md|txt|sh|go|rs|java|c|h|cpp|sql|csv|"
            r"ini|cfg|conf|env|lock|html|css)\b",
            r"\bv?\d+\.\d+(?:\.\d+)+\b|\bv\d+(?:\.\d+)?\b",
            r"\b\d{4}-\d{2}-\d{2}\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b|\b\d{1,2}:\d{2}\b",
            r"\b(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.? \d{1,2}\b",
            r"\b\d{1,2} (?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b",
            r"[$€£¥]\s?\d[\d,.]*",
            r"\b\d[\d,.]*\s?(?:%|eur|usd|gbp|brl|chf|jpy|euros?|dollars?|reais|ms|s|sec|"
            r"seconds?|min|minutes?|h|hours?|days?|weeks?|months?|years?|[kmgt]i?b|px|cm|mm|"
            r"km|kg|g|m|lines?|chars?|characters|tokens?|words?|requests?|rps|qps|users?|"
            r"retries|times|cores?|threads?|replicas?|workers?|items?|steps?|rows?|files?)\b",
            r"\b\d{1,3}(?:,\d{3})+\b|\b\d{3,}\b",
            r"\b(?=[\w-]*\d)(?=[\w-]*[A-Za-z])[A-Za-z0-9][\w-]{2,}\b",
        )
    ),
    re.IGNORECASE,
)
_LIMIT = re.compile(
    r"(?<!\w)(?:at most|at least|no more than|no less than|not more than|up to|maximum|max|"
    r"minimum|min|limit|limits|cap|capped|budget|deadline|before|by|within|under|exceed|"
    r"only|less than|more than|no máximo|no mínimo|até|prazo|antes de|como máximo|"
    r"como mínimo|plazo|límite|limite|apenas|somente|solo|sólo)(?!\w)",
    re.IGNORECASE,
)
_PREFERENCE = re.compile(
    r"(?<!\w)(?:prefer|i like|i'd rather|i would rather|i want|i'd like|prefiro|prefiero)(?!\w)",
    re.IGNORECASE,
)
# Content words: of three letters or more, or a number left after values were masked
# ("Server 3 ..." is another point than "Server 4 ...").
_WORD = re.compile(r"[^\W\d_]{3,}|\b\d+\b")
_STOP_WORDS = (
    "the and for are is was were this that with from into now our your you not but can may "
    "will all any also then than just please its it's use using it's them they their there "
    "here what when which who how about again instead anymore actually okay still let let's "
    "has have had been being too very que para com por una uno los las del por não sim"
)
_STOP = frozenset(_STOP_WORDS.split())
_ITEM = re.compile(
    r"^- (?:#(\d+) )?\((rule|constraint|fact|preference)\): (.*?)(?: \(replaces ([#\d, ]+)\))?$"
)
_LEFT_OUT = re.compile(r"^\[(\d[\d,]*) more left out")


@dataclass(frozen=True, slots=True, kw_only=True)
class CarriedItem:
    """One carried sentence: its transcript message `number` (None when unknown), its `kind`
    (one of `KINDS`), its `text` verbatim, and the numbers of the sentences it replaces."""

    number: int | None
    kind: str
    text: str
    replaces: tuple[int, ...] = ()

    def line(self) -> str:
        where = "" if self.number is None else f"#{self.number} "
        replaced = ", ".join(f"#{n}" for n in self.replaces)
        return f"- {where}({self.kind}): {self.text}" + (
            f" (replaces {replaced})" if replaced else ""
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class CarryBudget:
    """The block's room: at most `tokens` by `count` (the same count the transform used)."""

    tokens: int
    count: Count


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
    """The kind of a user's sentence worth carrying, or None: a rule (always, never, must,
    ...), a constraint (a limit with an exact value), a fact (an exact value), a preference
    (an imperative or "I prefer"). Questions are not carried."""
    if sentence.endswith("?"):
        return None
    plain = sentence.replace("’", "'")
    value = _VALUE.search(plain) is not None
    if RULE_WORDS.search(plain) and not (value and _LIMIT.search(plain)):
        return "rule"
    if value and _LIMIT.search(plain):
        return "constraint"
    if value:
        return "fact"
    if is_instruction(plain) or _PREFERENCE.search(plain):
        return "preference"
    return None


def is_carry_block(message: Message) -> bool:
    """Whether `message` is the block of carried instructions."""
    return message.role is Role.SYSTEM and message.text.startswith(_BLOCK_START)


def carried_items(view: Sequence[Message]) -> tuple[tuple[CarriedItem, ...], int]:
    """The items of the block in `view` (none without one) and how many it says were left out."""
    block = next((m for m in view if is_carry_block(m)), None)
    if block is None:
        return (), 0
    items, left_out = [], 0
    for line in block.text.splitlines()[1:]:
        item, more = _ITEM.match(line), _LEFT_OUT.match(line)
        if item is not None:
            number = int(item.group(1)) if item.group(1) else None
            replaces = tuple(int(n) for n in re.findall(r"\d+", item.group(4) or ""))
            items.append(
                CarriedItem(
                    number=number, kind=item.group(2), text=item.group(3), replaces=replaces
                )
            )
        elif more is not None:
            left_out = int(more.group(1).replace(",", ""))
    return tuple(items), left_out


def carry_instructions(
    before: Sequence[Message],
    after: Sequence[Message],
    *,
    budget: CarryBudget | None = None,
    numbering: Callable[[Message], int | None] | None = None,
) -> TransformResult:
    """`after` (the view a transform made of `before`) with the block of what the removed
    user messages said (see the module docstring). `numbering` gives a message's transcript
    number (default: its place in `before`, right when `before` is the transcript). Without a
    `budget`, nothing is left out."""
    before, after = tuple(before), tuple(after)
    number = numbering if numbering is not None else Numbering(before)
    old, old_left_out = carried_items(before)
    candidates, pasted = _per_message(_resolved(old, before, after, number))
    chosen, left_out = _within(candidates, budget)
    left_out += old_left_out + pasted
    view = _with_block(after, _block(chosen, left_out))
    injected = () if view == after else (_summary(chosen, left_out),)
    return build_result("carried instructions", after, view, injected=injected)


def carrying(
    transform: Callable[[tuple[Message, ...]], TransformResult],
    messages: Sequence[Message],
    *,
    budget: CarryBudget | None = None,
    numbering: Callable[[Message], int | None] | None = None,
) -> TransformResult:
    """`transform` of `messages`, with what it removed carried (`carry_instructions`). When
    the block changes, the transform runs again with the block in its input, so that the
    block's room comes out of what the transform keeps (a level keeps the system messages
    and fits the rest around them); at most `_CARRY_PASSES` runs, the block of the last one
    carried from what that run removed."""
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
        seeded = _with_block(messages, _block(carried_items((block,))[0], left_out))
        result = transform(seeded)
        again = carry_instructions(seeded, result.messages, budget=budget, numbering=number)
        if again.messages == carried.messages:
            break
        carried = again
    report = result.report.then(carried.report)
    return TransformResult(
        messages=carried.messages, report=replace(report, name=result.report.name)
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class _Statement:
    """A sentence in time: `at` orders statements (transcript number), `item` is set for a
    candidate (carried unless replaced), `words` its content words."""

    at: int
    item: CarriedItem | None
    text: str
    words: frozenset[str]


def _resolved(
    old: tuple[CarriedItem, ...],
    before: tuple[Message, ...],
    after: tuple[Message, ...],
    number: Callable[[Message], int | None],
) -> tuple[CarriedItem, ...]:
    """The candidates (the old block's items and the removed user messages' sentences worth
    carrying) that no later user sentence replaces, in order, each with what it replaces."""
    statements = [_statement(i.number or 0, i, i.text) for i in old]
    statements += _message_statements(before, after, number)
    statements.sort(key=lambda s: s.at)  # stable: old items first at a tie
    points = _Points(statements)
    statements = _with_reversals(statements, points)
    kept: list[CarriedItem] = []
    for index, statement in enumerate(statements):
        if statement.item is None or points.replaced_later(index):
            continue
        replaced = {
            statements[j].at
            for j in points.replaced_by(index)
            if statements[j].item is not None and statements[j].at
            if statements[j].at != statement.at
        }
        kept.append(
            replace(statement.item, replaces=tuple(sorted(replaced | set(statement.item.replaces))))
        )
    return tuple(kept)


def _with_reversals(statements: list[_Statement], points: _Points) -> list[_Statement]:
    """The statements with the kindless ones (removed sentences carried only when they
    replace one) made items of the kind they replace ("You may push to main now." after
    "Never push to main."), or plain statements when they replace none."""
    resolved = list(statements)
    best: dict[int, int] = {}  # a shape's (or a text's) highest-ranked kind so far, by rank
    best_text: dict[str, int] = {}
    for index, statement in enumerate(statements):
        if statement.item is not None and not statement.item.kind:
            ranks = [best_text.get(statement.text, len(KINDS))]
            ranks += [best.get(s, len(KINDS)) for s in points.shapes_replaced(index)]
            rank = min(ranks)
            item = replace(statement.item, kind=KINDS[rank]) if rank < len(KINDS) else None
            resolved[index] = replace(statement, item=item)
        item = resolved[index].item
        if item is not None and item.kind:
            rank, shape = KINDS.index(item.kind), points.shape[index]
            best[shape] = min(best.get(shape, rank), rank)
            best_text[statement.text] = min(best_text.get(statement.text, rank), rank)
    return resolved


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
    before: tuple[Message, ...], after: tuple[Message, ...], number: Callable[[Message], int | None]
) -> list[_Statement]:
    """Every sentence of the user's messages in `before`, in order: a candidate item when its
    message left the view (its text is not in `after`'s user messages)."""
    texts = {m.text for m in after if m.role is Role.USER}
    in_view = "\n".join(texts)
    statements: list[_Statement] = []
    at = 0
    for message in before:
        found = number(message)
        at = found if found is not None else at
        if not _users_own(message):
            continue
        removed = message.text not in texts
        for chunk, fenced in _fenced(message.text):
            for sentence in sentences(chunk):
                # A kindless item is carried only when it replaces one (`_with_reversals`).
                carried = removed and not fenced and sentence not in in_view
                kind = (classify(sentence) or "") if carried else None
                item = None if kind is None else CarriedItem(number=found, kind=kind, text=sentence)
                statements.append(_statement(at, item, sentence))
    return statements


def _fenced(text: str) -> Iterator[tuple[str, bool]]:
    """`text` in parts, in order, each with whether it is a fenced code block (an unclosed
    fence runs to the end, as in Markdown)."""
    at = 0
    for fence in _FENCE.finditer(text):
        yield text[at : fence.start()], False
        yield fence.group(), True
        at = fence.end()
    yield text[at:], False


def _per_message(items: tuple[CarriedItem, ...]) -> tuple[tuple[CarriedItem, ...], int]:
    """The items, at most `_MESSAGE_ITEMS` of one message (by kind, then as said), and how
    many were left out."""
    by_message: dict[int, list[int]] = {}
    for index, item in enumerate(items):
        if item.number is not None:
            by_message.setdefault(item.number, []).append(index)
    over = [
        index
        for indexes in by_message.values()
        for index in sorted(indexes, key=lambda i: KINDS.index(items[i].kind))[_MESSAGE_ITEMS:]
    ]
    out = set(over)
    return tuple(item for index, item in enumerate(items) if index not in out), len(out)


def _users_own(message: Message) -> bool:
    return is_real_user_request(message) and not message.text.startswith(_MODEL_WRITTEN)


def _statement(at: int, item: CarriedItem | None, text: str) -> _Statement:
    plain = _VALUE.sub(" ", text.replace("’", "'"))
    plain = RULE_WORDS.sub(" ", plain)
    words = frozenset(w for w in _WORD.findall(plain.lower()) if w not in _STOP)
    return _Statement(at=at, item=item, text=text, words=words)


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


def _within(
    items: tuple[CarriedItem, ...], budget: CarryBudget | None
) -> tuple[tuple[CarriedItem, ...], int]:
    """The items that fit the budget (by kind, then newest first) in their order, and how many
    did not. Each line is counted alone (a count is subadditive), then the whole block is
    counted, and the lowest-ranked item dropped while it does not fit."""
    if budget is None or not items:
        return items, 0
    rank = sorted(range(len(items)), key=lambda i: (KINDS.index(items[i].kind), -i))
    bare = budget.count((Message.system(""),))
    frame = _block(items[:1], len(items))
    assert frame is not None  # for the type checker: there are items
    left = budget.tokens - budget.count((frame,)) + budget.count((Message.system(items[0].line()),))
    chosen: list[int] = []
    for index in rank:
        cost = budget.count((Message.system(items[index].line()),)) - bare
        if cost <= left:
            chosen.append(index)
            left -= cost
    while chosen:  # bounded: one item fewer each time
        block = _block(tuple(items[i] for i in sorted(chosen)), len(items) - len(chosen))
        if block is not None and budget.count((block,)) <= budget.tokens:
            break
        chosen.pop()
    return tuple(items[i] for i in sorted(chosen)), len(items) - len(chosen)


def _block(items: tuple[CarriedItem, ...], left_out: int) -> Message | None:
    if not items:
        return None
    lines = [_INTRO, *(item.line() for item in items)]
    if left_out:
        them = "it" if left_out == 1 else "them"
        lines.append(
            f"[{left_out:,} more left out to fit the context window; the transcript keeps {them}.]"
        )
    return Message.system("\n".join(lines))


def _with_block(view: tuple[Message, ...], block: Message | None) -> tuple[Message, ...]:
    """`view` with its block (if any) replaced by `block`, placed after the leading system
    messages."""
    rest = tuple(m for m in view if not is_carry_block(m))
    if block is None:
        return rest
    at = next((i for i, m in enumerate(rest) if m.role is not Role.SYSTEM), len(rest))
    return (*rest[:at], block, *rest[at:])


def _summary(items: tuple[CarriedItem, ...], left_out: int) -> str:
    more = f", {left_out:,} left out to fit" if left_out else ""
    return f"carried {len(items):,} instructions and facts of removed user messages{more}"

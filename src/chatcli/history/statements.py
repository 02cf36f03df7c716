"""What the user's sentences say in time: which later sentence replaces which, which may update
which (`resolve`), for carrying (`chatcli.history.carry`) and compaction's pins.

A *statement* is one sentence the user typed (`chatcli.history.typed`), at its message's
transcript number; a candidate is one of a message that left the view, with its kind
(`classify`: `KINDS`, "" while it is carried only as an update of an earlier item).

- **Replacing** (`_replaces`): a later statement clearly on the same point as an earlier one
  (the same sentence, or most of its content words, values and rule words aside, and none
  of its own beside them when it leaves one out) replaces it: the earlier one is not
  carried. Statements with the same content words are one *shape* whatever their values,
  so a log whose lines differ only in numbers resolves to its last line; only pairs that
  can cover are compared (`_Points`, prefix filtering, as similarity joins do), so
  resolving stays near-linear in the sentences of a long session.
- **Updating** (`_related`): when it is unclear whether a later statement is on the point of
  an earlier item (it lifts a rule in other words, it says something changed, it shares half
  the item's words, or, read as nothing, two words of a rule or limit, or a word and a value
  of what the item's value measures; an
  instruction that says something changed on no earlier item's word may change any rule or
  constraint (one giving a value of what standing limits measure: those limits), and a new
  limit said to change any limit: "The couple topped up the flower
  budget, we can go to fifteen hundred." after "Keep the floral spend under eleven hundred
  dollars."), both are carried, in order, and the earlier item only with the later one
  (`Resolved.follows`): a rule is never shown without its reversal. A removed sentence that
  is not worth carrying on its own is carried as such an update, with the best kind of the
  items it may update; it is not an item later sentences may update in turn (a chain of
  narration sharing words, each "updating" the one before, would be carried whole).
- **Waking** (`_told`): a removed sentence that says something changed, on two words of an
  earlier removed sentence carried for none (one if it lifts it), is carried with it, both
  of the lowest kind: the user said it changed, so it was a rule or a value the recogniser
  missed. On one word of such a sentence, a change is carried alone, of the lowest kind:
  unclear what it changes, a lost change leaves the model with what no longer holds.
- **News** (`_news`): a rule or limit is often lifted in none of its words: a rule that holds
  only while a situation lasts ("No new reptile orders until the quarantine room is
  finished.") by news that it ended ("Builders handed over the isolation unit yesterday, so
  get the geckos coming in."), another by news of why it was made. When nothing else
  updates it, the removed later sentence read as nothing that the model most believes a
  change is carried with it, as above: for a passing situation's rule, even one the model
  barely believes a change (`_NEWS`).
- **Ties**: a later statement is tied to an earlier one by the first letters of their
  content words (`_ties`: "slides" / "slide"), replacing by the content words themselves.
- **Updating what is still in view**: a sentence of a user message the view keeps that is
  older than a removed one (a pinned first request, "Never push to main.") is an *anchor*: it
  is not carried, but a removed later sentence that may be on its point (`_related`) and
  shares a content word with it is carried, with its kind, before anything else
  (`Resolved.urgent`): the view would otherwise show the rule without its reversal. A
  sentence still in view that the recogniser reads as nothing is woken like a removed one
  (`_told`): the later sentence that says it changed, on two of its words (one if it lifts
  it), is carried first.

Everything here is a pure function of the messages: the same messages give the same result.
One module because replacing, updating and waking are one pass over the same statements
(`_with_updates`), each reading what the others decided so far.
"""

from __future__ import annotations

import heapq
import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from chatcli.history.instructions import (
    certainty,
    content_words,
    cue_of,
    directs,
    holds_while,
    kind_of,
    lift_belief,
    only_lifts,
    reads_as_lift,
    sentences,
    value_spans,
)
from chatcli.history.truncate import is_real_user_request
from chatcli.history.typed import typed_parts
from chatcli.messages import CarriedItem, Message, Role

__all__ = ["KINDS", "Reading", "Resolved", "closure", "resolve"]

# Highest priority first: what a tight block keeps.
KINDS = ("rule", "constraint", "fact", "preference")
# Rules and constraints: the first tier.
FIRST_TIER = frozenset(KINDS[:2])
# A compaction summary is a user message a model wrote (`chatcli.compaction.SUMMARY_HEADER`).
_MODEL_WRITTEN = ("[Earlier conversation compacted by chatcli",)
# Related earlier items looked at per content word (the newest): bounds resolving a long
# session whose words recur.
_RELATED_PER_WORD = 32
# A content word at most this many earlier items have is rare enough to tie a change to them.
_RARE_WORD = 2
# The kind of a sentence carried because a later one says it changed (`_told`), and of that
# later one when it is worth carrying for nothing else: the lowest, so that such a pair
# never takes the room of what the recogniser found (as facts, they cost the dense tuning
# sessions a sixth of their preferences at a 20% budget).
_WOKEN = "preference"
# How surely the model must believe a sentence read as nothing lifts or changes something
# (`lift_belief`) for it to be tied to a rule on one rare word, to every standing rule on
# none, or, with no word of change, on the words they share (`_news_tie`): the change words
# ("new", "again", "pode") are in much chatter ("write me a caption for the new class
# flyer"), so are a rule's words, and each such tie carries the chatter with the rule, in the
# rule's share of the room. Chosen on dense sessions of tuning7 and heldout11 read by models
# trained without them (benchmarks/README.md); the later statements of the tuning side's
# pairs it unties: one ("Summer hours: the crew starts at 6 and knocks off at half 2.").
_LIFTING = 0.2
# How surely the model must believe a sentence read as nothing a change (`lift_belief`) for
# it to be carried as the news that lifts a rule holding while a situation lasts (`_news`;
# news of any other rule takes `_LIFTING`): the later statements of the tuning side's pairs
# that the model reads as nothing mostly score above it, three quarters of their chatter
# below. Both chosen on tuning12, tuning7 and heldout11 read by models trained without them
# (benchmarks/README.md).
_NEWS = 0.03
# How surely the recogniser must read an item that lifts or changes something on no earlier
# item's word for it to be tied to every standing rule (`_loosely`): between the rule mass
# (0.4) and what sure rules read. On the held-out dense shape, the model trained with the
# sixteenth to twenty-third held-out sets kept 88% of its rules at 20% without it, 92% with
# it (benchmarks/README.md); with the previous model the retired sets' reversal pairs passed
# as without it.
_LOOSE_TIE = 0.5
# The anchor kind of a sentence still in view that the recogniser reads as nothing: a removed
# later one that says it changed, on two of its words (one if it lifts it), is carried first
# (`_told`).
_UNREAD = "unread"

Number = Callable[[Message], int | None]


# How plainly a statement says something changed (`_Statement.cue`): not at all, with a word
# of change ("now", "again") or as the recogniser reads a lift in other words
# (`reads_as_lift`: "north pit's patched up, fill it"), or lifting a rule ("feel free",
# "forget what I said").
_NO_CUE, _CHANGE, _LIFT = 0, 1, 2


@dataclass(frozen=True, slots=True, kw_only=True)
class _Statement:
    """A sentence in time: `at` orders statements (transcript number), `item` is set for a
    candidate (carried unless replaced; kind "" while it is carried only as an update),
    `words` its content words, `ties` their first letters (`_ties`), `units` what its values
    measure (`_units`), `cue` how plainly it says something changed, `directs` whether a
    change plainly tells the assistant what to do (`directs`), `lifting` whether the model
    believes it lifts or changes something (`lift_belief`, `_LIFTING`), `anchor` the kind of a
    sentence still in view that removed later ones may update ("": none), `belief` how surely
    the model believes it a change (`lift_belief`), `passing` whether it holds only while a
    passing situation lasts (`holds_while`), `sure` how surely the recogniser reads it as its
    kind (`certainty`; read only for one that says a change, the only kind `_loosely` asks
    of: 0 for any other)."""

    at: int
    item: CarriedItem | None
    text: str
    words: frozenset[str]
    ties: frozenset[str]
    units: frozenset[str] = frozenset()
    cue: int
    directs: bool = False
    lifting: bool = False
    belief: float = 0.0
    passing: bool = False
    sure: float = 0.0
    anchor: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class Resolved:
    """The items to carry, in order; for each, the indexes of the later items it must go
    with (updates that may be on its point); how many items were dropped on the way; the
    indexes of the items that update an anchor (carried first)."""

    items: tuple[CarriedItem, ...]
    follows: tuple[tuple[int, ...], ...]
    dropped: int = 0
    urgent: frozenset[int] = frozenset()


def resolve(
    old: tuple[CarriedItem, ...],
    before: tuple[Message, ...],
    after: tuple[Message, ...],
    number: Number,
    reading: Reading | None = None,
) -> Resolved:
    """The candidates (the old block's items and the removed user messages' sentences worth
    carrying) that no later user sentence replaces, in order, each with what it replaces and
    the later items it must be carried with. `reading` keeps what reading found for the next
    call on the same messages (none: read afresh)."""
    read = reading if reading is not None else Reading()
    statements = _statements(old, before, after, number, read)
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
    urgent: set[int] = set()
    for later, earlier in updates:
        if later in at and earlier in at:
            follows[at[earlier]].append(at[later])
        elif later in at and _updates_anchor(statements[later], statements[earlier]):
            urgent.add(at[later])
    return Resolved(
        items=tuple(kept), follows=tuple(tuple(f) for f in follows), urgent=frozenset(urgent)
    )


def _updates_anchor(later: _Statement, earlier: _Statement) -> bool:
    """`later` may be on the point of `earlier`, an anchor, on a shared content word or a
    value of what its value measures ("aberta das 5h às 22h" after a pinned "Recebimento de
    grão só das 6h às 18h"; a lift or a change that shares neither is tied to every earlier
    rule, too loosely to rank first; one without a cue is tied only on half the anchor's
    words, or a value of what its value measures: "... tengan hasta doce preguntas." after a
    pinned "Máximo diez preguntas por prueba ..."); and anything that may be news of a
    passing situation an anchor holds while (`_news`), which shares neither by nature)."""
    return bool(earlier.anchor) and bool(
        later.ties & earlier.ties or later.units & earlier.units or earlier.passing
    )


def _with_updates(
    statements: list[_Statement], points: _Points
) -> tuple[list[_Statement], list[tuple[int, int]]]:
    """The statements with the kindless ones (removed sentences carried only as updates)
    made items of the best kind they may update, or plain statements when they update none;
    and the pairs (later, earlier) of an update and an item it may be on the point of.

    A statement updates the ones it replaces (`_Points`), and the earlier items it may be on
    the point of (`_related`): a question updates nothing."""
    resolved = list(statements)
    best: dict[int, int] = {}  # a shape's (or a text's) highest-ranked kind so far, by rank
    best_text: dict[str, int] = {}
    by_word: dict[str, list[int]] = {}  # content word -> earlier items with it, in order
    by_unit: dict[str, list[int]] = {}  # unit -> earlier standing rules and limits measuring it
    earlier: list[int] = []  # the items so far
    dormant: dict[str, list[int]] = {}  # content word -> earlier sentences carried for none
    pairs: list[tuple[int, int]] = []
    for index, statement in enumerate(statements):
        if statement.anchor == _UNREAD:  # still in view, read as nothing: as a dormant one
            if not statement.cue and not _asks(statement):
                for word in statement.ties:
                    dormant.setdefault(word, []).append(index)
            continue
        if statement.anchor:  # still in view: not carried, but what updates it is
            _index(index, statement, by_word, by_unit)
            earlier.append(index)
            continue
        kindless = statement.item is not None and not statement.item.kind
        related = _related(statement, kindless, resolved, (by_word, by_unit), earlier)
        update_only = False
        if kindless:
            assert statement.item is not None  # for the type checker: kindless says so
            ranks = [best_text.get(statement.text, len(KINDS))]
            ranks += [best.get(s, len(KINDS)) for s in points.shapes_replaced(index)]
            said_again = min(ranks)  # the kind of an item it says again, if any
            ranks += [KINDS.index(k) for j in related if (k := _kind(resolved[j]))]
            rank = min(ranks)
            update_only = said_again == len(KINDS)
            item = replace(statement.item, kind=KINDS[rank]) if rank < len(KINDS) else None
            resolved[index] = replace(statement, item=item)
        told = _told(statement, dormant)
        woken = sorted(j for j, n in told.items() if n >= 2 or statement.cue == _LIFT)
        # The user says it changed: it was a standing rule or value (one still in view is
        # not carried).
        for j in (j for j in woken if not statements[j].anchor):
            first = statements[j].item
            assert first is not None  # for the type checker: only candidates sleep
            resolved[j] = replace(statements[j], item=replace(first, kind=_WOKEN))
        if told and resolved[index].item is None:
            assert statement.item is not None  # for the type checker: kindless, as above
            resolved[index] = replace(statement, item=replace(statement.item, kind=_WOKEN))
            update_only = True
        item = resolved[index].item
        if item is None or not item.kind:
            if statement.item is not None and not statement.cue and not _asks(statement):
                for word in statement.ties:
                    dormant.setdefault(word, []).append(index)
            continue
        pairs += [(index, j) for j in (*related, *woken)]
        if update_only:  # not an item later sentences may update or say again in turn
            continue
        rank, shape = KINDS.index(item.kind), points.shape[index]
        best[shape] = min(best.get(shape, rank), rank)
        best_text[statement.text] = min(best_text.get(statement.text, rank), rank)
        _index(index, resolved[index], by_word, by_unit)
        earlier.append(index)
    return resolved, pairs + _news(statements, resolved, pairs, earlier)


def _news(
    said: list[_Statement],
    resolved: list[_Statement],
    pairs: list[tuple[int, int]],
    items: list[int],
) -> list[tuple[int, int]]:
    """The pairs (later, earlier) of each rule or limit among `items` (those later statements
    may update, anchors too) that no later statement updates on a word or a value of its
    (`pairs`; a lift or a change tied to every standing rule, unsure, is no sign that this
    one's news was told), and the later removed sentence carried for nothing (`said`: as
    read, `resolved`: as `_with_updates` decided), not only a question, that the model most
    believes a change: at least `_NEWS` for a rule that holds only while a passing
    situation lasts (`_Statement.passing`; one that an item read as a change on its own is
    tied to is updated: "The met office called off the alert an hour ago."), `_LIFTING` for
    any other; among those, one that shares a content word with the rule first ("Ya
    cerramos el trimestre." after "No toques la carpeta de facturación hasta que cierre el
    trimestre."). That sentence is made an item of the rule's kind in `resolved`. The news
    that lifts a rule is often told in none of the rule's words, which no tie finds: of its
    situation ("Pups are weaned and the colony's dispersed." after "Don't book any tours near
    the lighthouse while the sea lions are pupping."), or of why it was made ("El vecino de
    los chanchos pagó lo que debía." after "No le vendas aserrín a don Osvaldo.")."""
    updated = {
        earlier
        for later, earlier in pairs
        if said[later].ties & said[earlier].ties
        or said[later].units & said[earlier].units
        or (said[earlier].passing and _read_as_item(said[later]))
    }
    # The candidates, surest first (the earliest at a tie): a rule takes the surest one after
    # it that shares a word with it, else the surest one after it; one before a rule is before
    # every later rule too, so each is popped once.
    candidates = [
        (-said[i].belief, i)
        for i in range(len(said))
        if _unread(said[i], resolved[i]) and said[i].belief >= _NEWS
    ]
    by_tie: dict[str, list[int]] = {}  # content word tie -> the candidates with it, in order
    for _, i in sorted(candidates, key=lambda c: c[1]):
        for word in said[i].ties:
            by_tie.setdefault(word, []).append(i)
    heapq.heapify(candidates)
    taken: set[int] = set()
    found: list[tuple[int, int]] = []
    for j in items:
        rule = resolved[j]
        if j in updated or _kind(rule) not in FIRST_TIER:
            continue
        while candidates and (candidates[0][1] <= j or candidates[0][1] in taken):
            heapq.heappop(candidates)  # bounded: each is popped once
        floor = _NEWS if rule.passing else _LIFTING
        tied = [
            i
            for word in rule.ties
            for i in _after(by_tie.get(word, []), j)
            if i not in taken and said[i].belief >= floor
        ]
        if tied:
            best = min(tied, key=lambda i: (-said[i].belief, i))
        elif candidates and -candidates[0][0] >= floor:
            best = heapq.heappop(candidates)[1]
        else:
            continue
        taken.add(best)
        item = said[best].item
        assert item is not None  # for the type checker: `_unread` says so
        resolved[best] = replace(said[best], item=replace(item, kind=_kind(rule)))
        found.append((best, j))
    return found


def _read_as_item(statement: _Statement) -> bool:
    """A candidate the recogniser reads as worth carrying on its own."""
    return statement.item is not None and bool(statement.item.kind)


def _after(indexes: list[int], index: int) -> list[int]:
    """The `indexes` (in order) after `index`."""
    return indexes[bisect_right(indexes, index) :]


def _unread(said: _Statement, resolved: _Statement) -> bool:
    """A removed sentence carried for nothing, not only a question: it may be news."""
    return said.item is not None and resolved.item is None and not _only_asks(said)


def _index(
    index: int,
    statement: _Statement,
    by_word: dict[str, list[int]],
    by_unit: dict[str, list[int]],
) -> None:
    """Make an earlier item (or anchor) findable by its content words' ties and, for a
    standing rule or limit (`_standing`), by what its values measure."""
    for word in statement.ties:
        by_word.setdefault(word, []).append(index)
    if _kind(statement) in FIRST_TIER and not statement.cue:
        for unit in statement.units:
            by_unit.setdefault(unit, []).append(index)


def _told(statement: _Statement, dormant: dict[str, list[int]]) -> dict[int, int]:
    """The earlier removed sentences carried for none that say no change themselves
    (`dormant`: content word tie -> them, in order) that `statement`, saying something
    changed, shares a content word with, and how many (none for a question or a sentence
    still in view). A user does not say that a passing remark changed: such a sentence was a
    rule or a value the recogniser missed ("The build cache lives in s3://ci-cache-eu." /
    "We moved the build cache; it's s3://ci-cache-central from today."). When the later one
    lifts it, or shares two words with it, both are *woken*: carried, in order, as `_WOKEN`
    (one shared word is too loose to wake it for a mere change: "Nice, the build is green
    again." is no news of the build cache, and a story whose lines each say "again" is no
    such pair).
    Otherwise the later one alone is carried, as `_WOKEN`: unclear what it changes, it is
    news of something the user said ("A Luana foi pro time de plataforma; P1 agora vai pro
    gerente de plantão." after "Incidente P1 se escala com a Luana."), and a change lost
    leaves the model with what no longer holds."""
    if statement.item is None or statement.cue == _NO_CUE or _only_asks(statement):
        return {}
    shared: dict[int, int] = {}
    for word in statement.ties:
        for j in dormant.get(word, ())[-_RELATED_PER_WORD:]:
            shared[j] = shared.get(j, 0) + 1
    return shared


def _related(
    statement: _Statement,
    kindless: bool,
    statements: list[_Statement],
    found_by: tuple[dict[str, list[int]], dict[str, list[int]]],
    items: list[int],
) -> list[int]:
    """The earlier items `statement` may be on the point of (when unsure, both are carried,
    in order, the earlier only with the later), among `items` (the earlier items so far).
    `found_by`: the earlier items by content word tie, and the standing rules and limits by
    unit.

    - A question: none (`_only_asks`).
    - A lift ("feel free", "forget what I said"): the items it shares a content word with,
      and unless it shares two with one, every earlier rule and constraint that says no
      change itself (`_unsure`; when none stands, every fact) ("A partir de ahora
      respóndeme en castellano." after "Contesta siempre en inglés.", whatever else
      "respuestas" is in); one read as an item, only when the recogniser is sure of it
      (`_loosely`), as for a change below.
    - A word of change ("now", "again"): the items it shares two words with, or one that
      few items have (for a sentence carried only as an update, `_rare_tie` too: "Hoy
      llevamos 14 rescates ..., la corriente está tremenda." is no change of a rule on
      "correos"). An instruction that shares none (read as nothing: one that plainly
      directs, `directs`, and the model believes a change, `_Statement.lifting`): every
      earlier rule and constraint that says no change itself ("Flights and hotels can go on
      the corporate Amex now." after "Don't use the company card for travel."). A new
      limit: every such earlier limit too.
    - A lift or a change that would be unsure, but gives a value of what standing rules'
      or limits' values measure, is on their point only ("Subimos el límite: las
      respuestas pueden llegar a 5 MB." after "Las respuestas de la API no pueden pasar de
      1 MB.", not after every other rule).
    - Any other: the items it shares half their words with (two, or one that few items
      have), or a value of what one of theirs measures ("the limit goes up to forty-seven
      characters" may change "no more than forty-two characters"); read as nothing, every
      earlier rule and limit it shares two words with ("north pit's patched up, fill it"
      after "Don't book any grower deliveries into the north pit, it's closed for
      repairs."), with no word of change only when believed a change, a value of the same
      measure or two words and half of the earlier's (`_news_tie`).
    - One that says a change, a limit or a fact: also every earlier rule and limit whose
      value measures the same, on no shared word ("o teto de desperdício é três por cento"
      after "... não pode passar de cinco por cento")."""
    if _only_asks(statement):
        return []
    by_word, by_unit = found_by
    shared: dict[int, int] = {}
    rare: set[int] = set()
    for word in statement.ties:
        having = by_word.get(word, ())
        for j in having[-_RELATED_PER_WORD:]:
            shared[j] = shared.get(j, 0) + 1
            if len(having) <= _RARE_WORD:
                rare.add(j)
    # The standing rules and limits whose values measure what this one's do.
    measured = {j for unit in statement.units for j in by_unit.get(unit, ())}
    if statement.cue == _LIFT:  # on one shared word at most, unsure: any standing rule too
        found = set(shared)
        if all(n < 2 for n in shared.values()) and _loosely(statement, kindless):
            found |= measured or _unsure(statements, items)
    elif (
        statement.cue == _CHANGE
        and not shared
        and _instructs(statement, kindless)
        and _loosely(statement, kindless)
    ):
        # An instruction said to change on no earlier item's word (a fact is news instead).
        found = measured or _unsure(statements, items)
    elif statement.cue == _CHANGE:
        found = {
            j
            for j, n in shared.items()
            if n >= 2 or (j in rare and (not kindless or _rare_tie(statement, statements[j])))
        }
        if _kind(statement) == "constraint":  # a new limit: of what it measures, else any
            found |= measured or _standing(statements, items, frozenset(["constraint"]))
    else:
        found = {
            j
            for j, n in shared.items()
            if (n >= 2 or j in rare)
            and (
                2 * n >= len(statements[j].ties)
                or statement.units & statements[j].units
                or (kindless and n >= 2 and _kind(statements[j]) in FIRST_TIER)
            )
            and (not kindless or _news_tie(statement, statements[j], n))
        }
    if statement.cue or _kind(statement) in ("fact", "constraint"):
        found |= measured  # a new value of what an earlier rule's or limit's value measures
    return sorted(found)


def _loosely(statement: _Statement, kindless: bool) -> bool:
    """Whether a lift or a change on no earlier item's word may be tied to every standing
    rule: one read as nothing may (it is carried only so), one read as an item only when the
    recogniser is sure enough of it (`_LOOSE_TIE`): chatter misread as a rule ("pode explicar
    a abordagem antes") would otherwise come with every rule, in their share of the room."""
    return kindless or statement.sure >= _LOOSE_TIE


def _instructs(statement: _Statement, kindless: bool) -> bool:
    """Read as an instruction (a fact aside), or read as nothing but plainly directing and
    believed a change (`_Statement.lifting`)."""
    return _kind(statement) not in ("", "fact") or (
        kindless and statement.directs and statement.lifting
    )


def _news_tie(later: _Statement, earlier: _Statement, shared: int) -> bool:
    """Whether a sentence read as nothing, with no word of change, ties to `earlier` on the
    `shared` words they share: when the model believes it a change (`_Statement.lifting`),
    it gives a value of what one of earlier's measures ("My last attachment was 2 MB and
    bounced." after "Attachments must stay under 800 KB."), or it says two words and half of
    earlier's ("Farid swapped shifts, so Helga is on call tonight." after "The on-call
    engineer tonight is Farid."); else it is news on a rule's words, not its update ("We've
    14 crew off sick today, ..." after "If a crew member calls in fatigued, you remove them
    from the duty, ..."), and carried with the rule it would take another rule's room."""
    half = shared >= 2 and 2 * shared >= len(earlier.ties)
    return later.lifting or half or bool(later.units & earlier.units)


def _rare_tie(later: _Statement, earlier: _Statement) -> bool:
    """Whether a change read as nothing ties to `earlier` on one rare word: when the model
    believes it a change (`_Statement.lifting`), or the word is a third of the earlier's
    ("Sácame el LATAM de las 7, y desde ahora LATAM está bien siempre." after "Nunca compres
    pasajes de LATAM."; "formwork crew back Monday" is no news of "A320 needs minimum four
    cabin crew, the A321neo needs five")."""
    return later.lifting or 3 * len(later.ties & earlier.ties) >= len(earlier.ties)


def _unsure(statements: list[_Statement], items: list[int]) -> set[int]:
    """What a lift or a change on no earlier item's word may be on the point of: the standing
    rules and limits, or, when none stands, the facts (a limit the recogniser read as one:
    "Os textos do site podem ter até uma página inteira." after "Limite de 300 palavras nos
    posts do blog.")."""
    return _standing(statements, items, FIRST_TIER) or _standing(statements, items, _FACTS)


_FACTS = frozenset(["fact"])


def _standing(statements: list[_Statement], items: list[int], kinds: frozenset[str]) -> set[int]:
    """The earlier `items` of `kinds` that say no change themselves: what a statement that
    changes something on none of their words may be on the point of."""
    return {j for j in items if _kind(statements[j]) in kinds and not statements[j].cue}


def _kind(statement: _Statement) -> str:
    return statement.item.kind if statement.item is not None else statement.anchor


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


class Reading:
    """What reading the user's words found, kept for the words read again (the passes of one
    `carrying`, the levels of one request): a message's typed sentences, a sentence's kind,
    certainty, content words and cue. Owned by its caller and dropped with it; every entry
    is a pure function of its text, so a reading changes no result, only what it costs."""

    def __init__(self) -> None:
        self._sentences: dict[str, tuple[str, ...]] = {}
        self._kinds: dict[str, str | None] = {}
        self._sure: dict[str, float] = {}
        self._said: dict[str, _Statement] = {}

    def sentences(self, text: str) -> tuple[str, ...]:
        """The sentences the user typed in a message's `text` (`typed_parts`)."""
        if text not in self._sentences:
            typed = typed_parts(text)
            self._sentences[text] = tuple(s for part in typed for s in sentences(part))
        return self._sentences[text]

    def kind(self, sentence: str) -> str | None:
        """A sentence's kind (`kind_of`); "" for a rule only as a lift (`only_lifts`),
        carried only with an item it may be on the point of."""
        if sentence not in self._kinds:
            kind = kind_of(sentence)
            self._kinds[sentence] = "" if kind == "rule" and only_lifts(sentence) else kind
        return self._kinds[sentence]

    def certainty(self, sentence: str) -> float:
        """How surely a sentence is what `kind` reads it as (`certainty`)."""
        if sentence not in self._sure:
            self._sure[sentence] = certainty(sentence)
        return self._sure[sentence]

    def statement(
        self, at: int, item: CarriedItem | None, text: str, anchor: str = ""
    ) -> _Statement:
        if text not in self._said:
            cue = {"lift": _LIFT, "change": _CHANGE}.get(cue_of(text), _NO_CUE)
            if cue == _NO_CUE and self.kind(text) == "rule" and reads_as_lift(text):
                cue = _CHANGE  # a change in words no list has (only a rule reads so)
            words = content_words(text)
            belief = lift_belief(text)
            self._said[text] = _Statement(
                at=0,
                item=None,
                text=text,
                words=words,
                ties=_ties(words),
                units=_units(text),
                cue=cue,
                directs=cue == _CHANGE and directs(text),
                lifting=cue != _LIFT and belief >= _LIFTING,
                belief=belief,
                passing=holds_while(text),
                sure=self.certainty(text) if cue != _NO_CUE else 0.0,
            )
        return replace(self._said[text], at=at, item=item, anchor=anchor)


# The letters of a content word that tie it to another's (`_ties`).
_TIE_LETTERS = 4


def _ties(words: frozenset[str]) -> frozenset[str]:
    """The first letters of content words, what ties a later statement to an earlier one it
    may be on the point of (`_related`, `_told`): two forms of one word share them where
    their stems differ ("slides" / "slide", "logotipo" / "logo"). Replacing compares the
    content words themselves (`_covers`): a loose tie carries both, never drops one."""
    return frozenset(word[:_TIE_LETTERS] for word in words)


# A value's unit: its last word ("cuarenta y dos caracteres", "5,000 EUR"), else its form
# without its figures ("$7,000": "$", "10:00": ":").
_UNIT_WORD = re.compile(r"([^\W\d_]+)\W*$")
_FIGURES = re.compile(r"[\d.,\s]+")
# What units of one quantity measure, in any of them ("two hours" may change "90 minutes";
# a sum in dollars, one in euros): a unit not listed measures itself.
_MEASURES = {
    **dict.fromkeys(
        (
            *("second", "sec", "minute", "min", "hour", "hr", "h", "day", "week", "month", "year"),
            *("segundo", "minuto", "hora", "dia", "día", "semana", "mes", "mê", "año", "ano"),
        ),
        "time",
    ),
    **dict.fromkeys(
        (
            *("$", "€", "£", "eur", "euro", "usd", "dollar", "gbp", "pound", "real", "brl"),
            *("mxn", "peso", "quid", "buck"),
        ),
        "money",
    ),
    **dict.fromkeys(("kb", "mb", "gb", "tb", "byte"), "bytes"),
}


def _units(text: str) -> frozenset[str]:
    """What the exact values of a sentence measure (`value_spans`, `_MEASURES`): a sentence
    stating a new value of the same quantity, on a word of an earlier one's, may change it."""
    units = set()
    for start, end in value_spans(text):
        span = text[start:end].lower()
        word = _UNIT_WORD.search(span)
        unit = word.group(1).removesuffix("s") if word else _FIGURES.sub("", span) or "#"
        units.add(_MEASURES.get(unit, unit))
    return frozenset(units)


def _statements(
    old: tuple[CarriedItem, ...],
    before: tuple[Message, ...],
    after: tuple[Message, ...],
    number: Number,
    reading: Reading,
) -> list[_Statement]:
    """The old block's items and the user's sentences (`_message_statements`), in order. An
    old item that quotes a sentence of a message read again (a later pass of carrying reads
    the same messages with the block in its input) is that sentence, read once: two copies
    would each be an earlier sentence sharing the words of what comes later, and a word two
    sentences have is no rare one."""
    said = _message_statements(before, after, number, reading)
    again = {(s.item.number, s.text) for s in said if s.item is not None}
    statements = [
        reading.statement(i.number or 0, i, i.text) for i in old if (i.number, i.text) not in again
    ]
    statements += said
    statements.sort(key=lambda s: s.at)  # stable: old items first at a tie
    return statements


def _message_statements(
    before: tuple[Message, ...],
    after: tuple[Message, ...],
    number: Number,
    reading: Reading | None = None,
) -> list[_Statement]:
    """Every sentence the user typed in their messages in `before`, in order: a candidate
    item when its message left the view (its text is not in `after`'s user messages), an
    anchor when its message stays in view and is older than one that left it."""
    read = reading if reading is not None else Reading()
    texts = {m.text for m in after if m.role is Role.USER and m.carried is None}
    in_view = "\n".join(texts)
    numbered: list[tuple[int, int | None, Message]] = []
    at = 0
    for message in before:
        found = number(message)
        at = found if found is not None else at
        if _users_own(message):
            numbered.append((at, found, message))
    last_removed = max((a for a, _, m in numbered if m.text not in texts), default=0)
    statements: list[_Statement] = []
    for at, found, message in numbered:
        removed = message.text not in texts
        for sentence in read.sentences(message.text):
            # A kindless item is carried only as an update (`_with_updates`).
            carried = removed and sentence not in in_view
            kind = (read.kind(sentence) or "") if carried else None
            item = None if kind is None else CarriedItem(number=found, kind=kind, text=sentence)
            anchor = (read.kind(sentence) or _UNREAD) if not removed and at < last_removed else ""
            statements.append(read.statement(at, item, sentence, anchor))
    return statements


def _users_own(message: Message) -> bool:
    return is_real_user_request(message) and not message.text.startswith(_MODEL_WRITTEN)


def _replaces(later: _Statement, earlier: _Statement) -> bool:
    """`later` is on the same point as `earlier`: the same sentence, or one with most of its
    content words (a question asks, it replaces nothing)."""
    if later.text == earlier.text:
        return True
    return not _asks(later) and _covers(later.words, earlier.words)


def _asks(statement: _Statement) -> bool:
    return statement.text.endswith("?")


def _only_asks(statement: _Statement) -> bool:
    """A question and nothing else: not a statement with a question after it, past a dash, an
    opening "¿" or a comma and "and" ("Pode dar meu número pros pedreiros agora — o
    azulejista confirmou quinta?", "Pushing to main is OK for hotfixes only, and can you also
    update the changelog?", not "What does `smtplib.mail` do, and when would I use it?"), which
    may still be on the point of an earlier item (it replaces none)."""
    if not _asks(statement) or _ASKED_AFTER.search(statement.text):
        return False
    anded = _AND_ASKED.search(statement.text)
    return anded is None or _ASKING.search(statement.text[: anded.start() + 1]) is not None


# A question asked after a statement in the same sentence, past a dash or an opening "¿"
# (`_only_asks`), or past a comma and "and" (`_AND_ASKED`) when what comes before asks
# nothing itself (`_ASKING`: "What does `smtplib.mail` do, and when would I use it?" is one
# question).
_ASKED_AFTER = re.compile(r"[^\s?¿]\s*(?:\s[—–-]\s*|[,;:]?\s*¿)[^—–¿?]*\?$")
_AND_ASKED = re.compile(
    r"[^\s?¿][,;]\s+(?:and|but|so|also|plus|e|mas|y|pero)\s[^—–¿?]*\?$", re.IGNORECASE
)
_ASKING = re.compile(
    r"\b(?:what|how|why|when|where|who|whom|whose|which|o que|por que|quando|onde|qual|quem|"
    r"qué|cómo|por qué|cuándo|dónde|cuál|quién)\b|"
    r"^\W*(?:can|could|would|will|do|does|did|is|are|should|may|shall|have|has)\b",
    re.IGNORECASE,
)


def _covers(later: frozenset[str], earlier: frozenset[str]) -> bool:
    """A sentence with the words `later` is on the point of one with the words `earlier`: it
    has most of them (at least two), they have half their words in common, and it does not
    both leave out a word of the earlier one and add its own. One that does ("Ask me before
    you promise anyone a same-day run." / "You can promise next-day runs without asking
    me.") may be on another point: it is carried with it (`_related`). Numbers aside:
    "Follow-up 11: never skip the refund path tests." and "Follow-up 23: ..." are one point
    said twice."""
    if len(earlier) < 2:
        return False
    if _lettered(later - earlier) and _lettered(earlier - later):
        return False
    shared = len(later & earlier)
    return shared >= 0.8 * len(earlier) and shared >= 0.5 * len(later | earlier)


def _lettered(words: frozenset[str]) -> bool:
    return any(not word.isdigit() for word in words)


def closure(index: int, follows: Sequence[Sequence[int]]) -> set[int]:
    """`index` and every later item it must go with, directly or through another."""
    found = {index}
    stack = [index]
    while stack:  # bounded: each index is pushed once
        for later in follows[stack.pop()]:
            if later not in found:
                found.add(later)
                stack.append(later)
    return found

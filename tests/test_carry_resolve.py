"""Resolving carried statements (chatcli.history.statements): the fast way finds what all
pairs do.

`resolve` decides which removed user sentences are carried, which later sentence replaces
which (`_replaces`) and which later sentence that says something changed may update which
(it shares a content word with it, else it follows it directly), and which removed sentence
updates one still in view (an anchor: carried first), without comparing every pair of
sentences. A hypothesis property compares it with the definition, every pair compared, on
random conversations made of a small vocabulary, so that repeated sentences, near-duplicates,
questions, updates and sentences that differ only in their values are common.
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from chatcli.history import statements as resolving
from chatcli.history.carry import KINDS, CarriedItem, Numbering
from chatcli.messages import Message

WORDS = ("push", "main", "deploy", "budget", "server", "port", "tabs", "logs")
LEADS = ("", "Never ", "Always ", "Use ", "You may ", "I prefer ", "Now ", "Forget ")
VALUES = ("", " 5,000 EUR", " 7Q2", " 9001", " 2026-03-01", " 12", " 40 chars", " 3,000 EUR")

sentence = st.builds(
    lambda lead, words, value, end: (lead + " ".join(words) + value).strip().capitalize() + end,
    st.sampled_from(LEADS),
    st.lists(st.sampled_from(WORDS), max_size=5),
    st.sampled_from(VALUES),
    st.sampled_from((".", ".", "?", " — ok?")),
)
user_text = st.lists(sentence, min_size=1, max_size=4).map(" ".join)
old_item = st.builds(
    lambda number, kind, text: CarriedItem(number=number, kind=kind, text=text),
    st.one_of(st.none(), st.integers(1, 20)),
    st.sampled_from(KINDS),
    sentence,
)


def naive_resolved(
    old: tuple[CarriedItem, ...], before: tuple[Message, ...], after: tuple[Message, ...]
) -> resolving.Resolved:
    """`_resolved` as defined: every pair of statements compared with `_replaces`, and an
    update related to the earlier items and anchors as `_related` says, each compared with
    it; a statement that says something changed wakes the earlier sentences carried for none
    it shares two words with, or one if it lifts (`_told`), and is carried if it shares one;
    words compared by their ties (`_ties`)."""
    number = Numbering(before)
    statements = resolving._statements(old, before, after, number, resolving.Reading())
    said = list(statements)  # as read, before kinds were given
    pairs: list[tuple[int, int]] = []
    updates_only: set[int] = set()  # kindless statements carried only as an update
    dormant: list[int] = []  # removed sentences carried for none that say no change
    for index, statement in enumerate(statements):
        if statement.anchor == resolving._UNREAD:  # in view, read as nothing: it may be woken
            if not statement.cue and not statement.text.endswith("?"):
                dormant.append(index)
            continue
        items = [
            j
            for j in range(index)
            if resolving._kind(statements[j]) not in ("", resolving._UNREAD)
            and j not in updates_only
            and j not in dormant
        ]
        kindless = statement.item is not None and not statement.item.kind
        related = naive_related(statement, kindless, [statements[j] for j in items], items)
        if kindless:
            said_again = [
                resolving._kind(statements[j])
                for j in items
                if statements[j].item and resolving._replaces(statement, statements[j])
            ]
            kinds = said_again + [resolving._kind(statements[j]) for j in related]
            if not said_again:
                updates_only.add(index)
            item = replace(statement.item, kind=min(kinds, key=KINDS.index)) if kinds else None
            statements[index] = replace(statement, item=item)
        told = naive_told(statement, [said[j] for j in dormant], dormant)
        woken = [j for j, n in told.items() if n >= 2 or statement.cue == resolving._LIFT]
        for j in (j for j in woken if not said[j].anchor):
            first = said[j].item
            assert first is not None
            statements[j] = replace(said[j], item=replace(first, kind=resolving._WOKEN))
        if told and statements[index].item is None:
            assert statement.item is not None
            statements[index] = replace(
                statement, item=replace(statement.item, kind=resolving._WOKEN)
            )
            updates_only.add(index)
        if statements[index].item is not None and statements[index].item.kind:
            pairs += [(index, j) for j in (*related, *woken)]
        elif statement.item is not None and not statement.cue and not statement.text.endswith("?"):
            dormant.append(index)
    # News (`_news`): each standing rule or limit no pair updates on a word or a value of its
    # takes the later sentence carried for nothing that the model most believes a change,
    # above its floor, one sharing a word with it first.
    # A rule that holds while a situation lasts is updated by any item tied to it too.
    updated = {
        earlier
        for later, earlier in pairs
        if said[later].ties & said[earlier].ties
        or said[later].units & said[earlier].units
        or (said[earlier].passing and said[later].item is not None and said[later].item.kind)
    }
    for j in range(len(statements)):
        if (
            resolving._kind(statements[j]) not in resolving.FIRST_TIER
            or j in updates_only
            or j in dormant
            or j in updated
        ):
            continue
        floor = resolving._NEWS if said[j].passing else resolving._LIFTING
        news = [
            i
            for i in range(j + 1, len(statements))
            if said[i].item is not None
            and statements[i].item is None
            and not resolving._only_asks(said[i])
            and said[i].belief >= floor
        ]
        if news:
            tied = [i for i in news if said[i].ties & said[j].ties]
            best = max(tied or news, key=lambda i: said[i].belief)
            item = said[best].item
            assert item is not None
            kind = resolving._kind(statements[j])
            statements[best] = replace(said[best], item=replace(item, kind=kind))
            pairs.append((best, j))
            updates_only.add(best)  # news takes no news in turn
    kept: list[CarriedItem] = []
    at: dict[int, int] = {}
    for index, statement in enumerate(statements):
        if statement.item is None or any(
            resolving._replaces(later, statement) for later in statements[index + 1 :]
        ):
            continue
        replaced = {
            other.at
            for other in statements[:index]
            if other.item is not None and other.at and other.at != statement.at
            if resolving._replaces(statement, other)
        }
        at[index] = len(kept)
        kept.append(
            replace(statement.item, replaces=tuple(sorted(replaced | set(statement.item.replaces))))
        )
    follows: list[list[int]] = [[] for _ in kept]
    urgent: set[int] = set()
    for later, earlier in pairs:
        if later in at and earlier in at:
            follows[at[earlier]].append(at[later])
        # What may be on an anchor's point (a shared word) is carried first.
        elif (
            later in at
            and statements[earlier].anchor
            and (
                statements[later].ties & said[earlier].ties
                or statements[later].units & said[earlier].units
                or said[earlier].passing
            )
        ):
            urgent.add(at[later])
    return resolving.Resolved(
        items=tuple(kept), follows=tuple(tuple(f) for f in follows), urgent=frozenset(urgent)
    )


def naive_told(
    statement: resolving._Statement, earlier: list[resolving._Statement], indexes: list[int]
) -> dict[int, int]:
    """The earlier sentences carried for none (`earlier`, at `indexes`) that a statement
    saying something changed shares words with, and how many, as defined."""
    if statement.item is None or not statement.cue or resolving._only_asks(statement):
        return {}
    shared = {j: len(statement.ties & e.ties) for e, j in zip(earlier, indexes, strict=True)}
    return {j: n for j, n in shared.items() if n}


def naive_related(
    statement: resolving._Statement,
    kindless: bool,
    earlier: list[resolving._Statement],
    indexes: list[int],
) -> list[int]:
    """The earlier items (`earlier`, at `indexes`) an update is related to, as defined (what
    may lift or change something when no rule or limit stands: the facts)."""
    if resolving._only_asks(statement):
        return []
    having = {w: sum(1 for e in earlier if w in e.ties) for w in statement.ties}
    related = []
    strong = False  # a lift shares two words with an earlier item
    for e, j in zip(earlier, indexes, strict=True):
        shared = statement.ties & e.ties
        rare = any(having[w] <= resolving._RARE_WORD for w in shared)
        if statement.cue == resolving._LIFT:
            ok = bool(shared)
            strong = strong or len(shared) >= 2
        elif statement.cue == resolving._CHANGE:
            # Read as nothing, one rare word ties it when the model believes it a change or
            # the word is a third of the earlier item's.
            # Read as an item, one rare word ties it.
            rare_tie = rare and (
                not kindless or statement.lifting or 3 * len(shared) >= len(e.ties)
            )
            ok = bool(shared) and (len(shared) >= 2 or rare_tie)
        else:
            half = 2 * len(shared) >= len(e.ties) or bool(statement.units & e.units)
            # Read as nothing, two words of a rule or a limit.
            two = kindless and len(shared) >= 2 and resolving._kind(e) in ("rule", "constraint")
            # Read as nothing, no word of change: only when believed a change, a value of
            # what the earlier one's measures, or two words and half of the earlier one's.
            strong = len(shared) >= 2 and 2 * len(shared) >= len(e.ties)
            news = not kindless or statement.lifting or strong or bool(statement.units & e.units)
            ok = bool(shared) and (len(shared) >= 2 or rare) and (half or two) and news
        if ok:
            related.append(j)
    sharing = any(statement.ties & e.ties for e in earlier)
    instruction = resolving._kind(statement) not in ("", "fact") or (
        kindless and statement.directs and statement.lifting
    )
    # Read as an item, tied to every standing rule on no word only when surely read so.
    loose = kindless or statement.sure >= resolving._LOOSE_TIE
    lift = statement.cue == resolving._LIFT and not strong
    first_tier = standing(earlier, indexes, ("rule", "constraint"))
    facts = standing(earlier, indexes, ("fact",))
    # The standing rules and limits whose values measure what this one's do: when there are
    # any, what a lift or a change on no shared word is on the point of.
    by_index = dict(zip(indexes, earlier, strict=True))
    measured = [j for j in first_tier if statement.units & by_index[j].units]
    if lift:
        related = sorted({*related, *(measured or first_tier or facts)}) if loose else related
    elif statement.cue == resolving._CHANGE and instruction and not sharing and loose:
        related = measured or first_tier or facts
    elif statement.cue == resolving._CHANGE and resolving._kind(statement) == "constraint":
        limits = standing(earlier, indexes, ("constraint",))
        related = sorted({*related, *(measured or limits)})
    if statement.cue or resolving._kind(statement) in ("fact", "constraint"):
        related = sorted({*related, *measured})  # a new value of what one's value measures
    return related


def standing(
    earlier: list[resolving._Statement], indexes: list[int], kinds: tuple[str, ...]
) -> list[int]:
    """The earlier items of `kinds` that say no change themselves."""
    return [
        j
        for e, j in zip(earlier, indexes, strict=True)
        if resolving._kind(e) in kinds and not e.cue
    ]


@settings(max_examples=300, deadline=None)
@given(
    st.lists(old_item, max_size=4),
    st.lists(st.tuples(user_text, st.booleans()), min_size=1, max_size=8),
)
def test_resolving_finds_what_comparing_every_pair_finds(
    old: list[CarriedItem], turns: list[tuple[str, bool]]
) -> None:
    before: list[Message] = [Message.system("You are a careful assistant.")]
    after: list[Message] = list(before)
    for text, kept in turns:
        pair = [Message.user(text), Message.assistant("Noted.")]
        before += pair
        after += pair if kept else []
    view = (tuple(before), tuple(after))
    fast = resolving.resolve(tuple(old), *view, Numbering(view[0]))
    assert fast == naive_resolved(tuple(old), *view)


def test_news_is_found_as_comparing_every_pair_finds_it() -> None:
    """News of a passing situation and news believed a change, carried after the rules, as
    the definition finds them; the story beside them is not carried."""
    users = (
        "Keep the volunteers off the roof while the storm warning is up.",
        "No reserves la furgoneta para excursiones.",
        "Thanks, that helps.",
        "The met office called off the alert an hour ago.",
        "El taller le cambió los frenos ayer.",
        "We sold forty raffle tickets at the fete.",
        "What next?",
    )
    before = [Message.system("You are a careful assistant.")]
    for text in users:
        before += [Message.user(text), Message.assistant("Noted.")]
    view = (tuple(before), (before[0], *before[-2:]))
    fast = resolving.resolve((), *view, Numbering(view[0]))
    assert fast == naive_resolved((), *view)
    assert [i.text for i in fast.items] == [users[0], users[1], users[3], users[4]]
    # Each rule goes with news after it: which news is whose is not known (read as nothing,
    # each news goes to one rule, the one the model believes most left to it; read as a
    # change, it goes with every standing rule), and both come after both rules.
    assert all(follows and set(follows) <= {2, 3} for follows in fast.follows[:2])
    assert set(fast.follows[0]) | set(fast.follows[1]) == {2, 3}
    assert fast.follows[2:] == ((), ())


def test_lines_that_differ_only_in_their_values_are_one_point() -> None:
    lines = [f"The port of worker {n % 3} is {9000 + n}." for n in range(2000)]
    before = (*map(Message.user, lines), Message.assistant("Noted."), Message.user("Go on."))
    items = resolving.resolve((), before, before[-2:], Numbering(before)).items
    assert [i.text for i in items] == [lines[n] for n in (1997, 1998, 1999)]


def test_a_lift_said_twice_still_goes_with_the_rule_it_may_lift() -> None:
    """A lift sharing no word with the rule may lift every earlier rule; said a second time,
    the later one replaces the first and goes with the rule."""
    rule, lift = "Always answer in English.", "From now on, reply to me in Portuguese."
    users = ("Hello there.", rule, "Thanks.", lift, "Go on.", lift, "What next?")
    before = [Message.system("You are a careful assistant.")]
    for text in users:
        before += [Message.user(text), Message.assistant("Noted.")]
    view = (tuple(before), (before[0], *before[-2:]))
    resolved = resolving.resolve((), *view, Numbering(view[0]))
    assert [(i.number, i.text) for i in resolved.items] == [(4, rule), (12, lift)]
    assert resolved.follows == ((1,), ())


def test_an_old_blocks_item_quoting_a_message_read_again_is_read_once() -> None:
    """A later pass of carrying reads the same messages with the block of the pass before in
    its input: what it quotes is each sentence once, with the relations of the first pass (a
    word two copies share was once no rare one, and a limit lost its later change)."""
    limit, change = "Two retries at most for the uploader.", "The uploader may try five times."
    users = ("Hello there.", limit, "Thanks.", "Go on.", change, "What next?")
    before = [Message.system("You are a careful assistant.")]
    for text in users:
        before += [Message.user(text), Message.assistant("Noted.")]
    view = (tuple(before), (before[0], *before[-2:]))
    first = resolving.resolve((), *view, Numbering(view[0]))
    assert [i.text for i in first.items] == [limit, change] and first.follows == ((1,), ())
    again = resolving.resolve(first.items, *view, Numbering(view[0]))
    assert again == first


# Reversal pairs (tests/data/instructions/reversals-heldout4.jsonl, reversals-heldout5.jsonl,
# reversals-heldout7.jsonl, reversals-tuning.jsonl)
# whose later statement the dense shape carried without its earlier one, or left out while
# the earlier one was carried: each later statement must go with the earlier one.
UNTIED = [
    pytest.param(  # rh4-pt-002: a change the vocabulary missed ("subiu"), read as nothing
        "O custo de adubação não pode passar de mil e oitocentos reais por hectare.",
        "Com a alta do milho, o teto da adubação subiu para dois mil e cem por hectare.",
        id="rh4-pt-002",
    ),
    pytest.param(  # rh4-en-004: a new limit, said to change, on none of the limit's words
        "Keep the floral spend under eleven hundred dollars.",
        "The couple topped up the flower budget, we can go to fifteen hundred.",
        id="rh4-en-004",
    ),
    pytest.param(  # rt7-pt-016: a lift with a question after it, past a dash
        "Não passe meu celular pra ninguém.",
        "Pode dar meu número pros pedreiros agora — o azulejista confirmou quinta?",
        id="rt7-pt-016",
    ),
    pytest.param(  # rt7-es-016: the same, past an opening "¿"
        "No le des mi celular a nadie.",
        "Puedes pasarles mi número a los albañiles — ¿confirmó el del piso para el jueves?",
        id="rt7-es-016",
    ),
    pytest.param(  # rh11-en-014: a lift with a question after it, past a comma and "and"
        "Nobody pushes straight to main.",
        "Pushing to main is OK for hotfixes only, and can you also update the changelog?",
        id="rh11-en-014",
    ),
    pytest.param(  # rt7-es-028: on one rare word, a third of the rule's
        "Nunca compres pasajes de LATAM.",
        "Sácame el LATAM de las 7, y desde ahora LATAM está bien siempre.",
        id="rt7-es-028",
    ),
    pytest.param(  # rh4-en-010: a lift the vocabulary missed ("from here on")
        "Stick to C89 in anything you show me.",
        "I finally got a newer compiler working, so C99 and later are fine from here on.",
        id="rh4-en-010",
    ),
    pytest.param(  # rh5-en: a new value of the same code, on none of the limit's words
        "Retry the B2C call at most twice.",
        "Make it three attempts on the B2C payouts before alerting, Safaricom's been flaky.",
        id="rh5-en-b2c",
    ),
    pytest.param(  # rh5-pt: a limit that denies a permission ("não pode") lifts nothing
        "A perda técnica de doses não pode passar de cinco por cento.",
        "O Estado apertou o indicador, agora o teto de desperdício é três por cento.",
        id="rh5-pt-percent",
    ),
    pytest.param(  # rh5-en: a change the vocabulary missed ("drops to")
        "Flight duty periods can't exceed thirteen hours.",
        "For the summer charter programme the duty ceiling drops to twelve.",
        id="rh5-en-duty",
    ),
    pytest.param(  # rh5-en: a lift the vocabulary missed ("edit away")
        "Leave the parcel layer alone, it's the master copy.",
        "The planning team handed the parcels over to us, so edit away.",
        id="rh5-en-parcels",
    ),
    pytest.param(  # rh5-pt: a change from a day on ("a partir de segunda")
        "Marque no máximo quatro escrituras por manhã.",
        "A partir de segunda a notária aceita cinco atos de manhã.",
        id="rh5-pt-deeds",
    ),
    pytest.param(  # rh7-en-002: read as nothing, no word of change, two of the rule's words
        "Don't book any grower deliveries into the north pit, it's closed for repairs.",
        "north pit's patched up, fill it",
        id="rh7-en-002",
    ),
    pytest.param(  # rh7-en-007: the same, on three of the rule's seven words
        "No loyalty discounts at the Midleton shop until the till upgrade is done.",
        "Till's sorted in Midleton, loyalty cards work there like anywhere else.",
        id="rh7-en-007",
    ),
]
# Another pair's rule and limit of the same file, said between them.
OTHERS = (
    "Never email vendors directly, everything goes through me.",
    "Cap thermal dwells at four hours.",
)


def goes_with(earlier: str, later: str, users: tuple[str, ...]) -> bool:
    """Whether, once every turn of `users` but the last is removed, `later` is carried
    whenever `earlier` is (in the closure of what `earlier` must come with)."""
    return later in carried_with(earlier, users)


def carried_with(earlier: str, users: tuple[str, ...]) -> list[str]:
    """What must be carried with `earlier` (its closure) once every turn of `users` but the
    last is removed."""
    before = [Message.system("You are a careful assistant.")]
    for text in users:
        before += [Message.user(text), Message.assistant("Noted.")]
    view = (tuple(before), (before[0], *before[-2:]))
    resolved = resolving.resolve((), *view, Numbering(view[0]))
    texts = [item.text for item in resolved.items]
    return [texts[i] for i in sorted(resolving.closure(texts.index(earlier), resolved.follows))]


@pytest.mark.parametrize(("earlier", "later"), UNTIED)
def test_a_change_in_other_words_goes_with_what_it_changes(earlier: str, later: str) -> None:
    users = ("Hello there.", earlier, "Thanks.", *OTHERS, "Go on.", later, "What next?")
    assert goes_with(earlier, later, users)


@pytest.mark.parametrize(
    ("text", "asks"),
    [
        ("What does `smtplib.mail` do, and when would I use it?", True),
        ("Once more, lap 6: What does `site.main` do, and when would I use it?", True),
        ("Can you check the logs, and tell me what failed?", True),
        ("Pushing to main is OK for hotfixes only, and can you also update the changelog?", False),
        ("Pode dar meu número pros pedreiros agora — o azulejista confirmou quinta?", False),
    ],
)
def test_a_statement_with_a_question_after_it_is_told_from_a_question(
    text: str, asks: bool
) -> None:
    """Only a question relates to nothing; a statement with a question after it may still
    change an earlier rule (a flood of "What does X do, and when would I use it?" must not
    each be carried as a possible update)."""
    statement = resolving.Reading().statement(0, None, text)
    assert resolving._only_asks(statement) is asks


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        pytest.param(
            "Cap the cloud bill at 2,000 dollars a month.",
            "Our AWS ceiling is 2.500 euros.",
            id="dollars-euros",
        ),
        pytest.param(
            "Limit each exam paper to 90 minutes.",
            "The board set papers at two hours.",
            id="minutes-hours",
        ),
        pytest.param(
            "Keep the town hall talk to 45 minutes.",
            "The all-hands slot is 2 hours.",
            id="minutes-hours-2",
        ),
        pytest.param(
            "Attachments must stay under 800 KB.",
            "The mail server takes up to 5 MB per message.",
            id="kb-mb",
        ),
    ],
)
def test_a_new_value_in_another_unit_goes_with_the_limit(earlier: str, later: str) -> None:
    """A value of the same quantity in another unit may change a limit ("two hours" after
    "90 minutes", on heldout11's rh11-en-017): unsure, both are carried."""
    users = ("Hello there.", earlier, "Thanks.", *OTHERS, "Go on.", later, "What next?")
    assert goes_with(earlier, later, users)


def test_a_new_value_of_a_limit_on_no_shared_word_is_on_that_limits_point() -> None:
    """A lift sharing one word with a limit and giving a value of what it measures is on
    that limit's point: carried with it, and not with every other standing rule (each rule
    carried with it would take the room of the rules after it)."""
    rule = "Never share the incident transcript outside the company."
    limit = "API responses must stay under 1 MB."
    later = "Good news, you can now send responses up to 5 MB."
    users = ("Hello there.", rule, limit, "Thanks.", "Go on.", later, "What next?")
    assert carried_with(limit, users) == [limit, later]
    assert carried_with(rule, users) == [rule]


def test_news_is_carried_with_a_rule_that_chatter_may_lift_on_none_of_its_words() -> None:
    """A lift on none of a rule's words may be on its point (unsure, both are carried), but
    it is no sign that the rule's news was told: the news after it, on the rule's word, is
    carried with the rule too."""
    rule = "Don't touch the billing folder until the quarter closes."
    news = "We closed the quarter yesterday."
    users = (
        "Hello there.",
        rule,
        "Thanks.",
        "sure, go ahead and explain the approach first",
        "Go on.",
        news,
        "What next?",
    )
    assert goes_with(rule, news, users)


def test_a_change_read_as_a_rule_is_not_tied_on_one_common_word() -> None:
    """A sentence read as a rule with a word of change ties to an earlier item on two words,
    or one that few items have: on one word that many have, it is chatter ("pulling the
    latest pipeline config now") and not the change of every rule that says "pipeline"."""
    rules = (
        "Never restart the pipeline runners during business hours.",
        "Only the release manager may pause the pipeline.",
        "Pipeline secrets stay in the vault, never in the repo.",
    )
    later = "pulling the latest pipeline config now"
    users = ("Hello there.", *rules, "Thanks.", "Go on.", later, "What next?")
    for rule in rules:
        assert later not in carried_with(rule, users)


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        pytest.param(  # tuning7 chatter: one rare word of a limit, not believed a change
            "A320 needs minimum four cabin crew, the A321neo needs five.",
            "Level 3 is 85% stripped, formwork crew back Monday.",
            id="crew",
        ),
        pytest.param(  # tuning7 chatter: a task with "novo", on none of a rule's words
            "Não abra o portão lateral para entregas.",
            "Escreva um texto para o site sobre o novo parque canino.",
            id="novo",
        ),
    ],
)
def test_chatter_with_a_word_of_change_is_not_carried_with_a_rule(earlier: str, later: str) -> None:
    """A sentence read as nothing with a word of change ("new", "back") that the model does
    not believe a change is tied to no rule on one rare word of many, nor on none: carried
    with the rule, it would take the rule's room."""
    users = ("Hello there.", earlier, "Thanks.", *OTHERS, "Go on.", later, "What next?")
    assert carried_with(earlier, users) == [earlier]


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        pytest.param(  # tuning7: a status report on two of a rule's words
            "nunca manda print de pedido com endereço do cliente no grupo, pelo amor",
            "hoje saíram 38 pedidos e 4 voltaram por endereço errado",
            id="status",
        ),
        pytest.param(  # tuning7: reported speech on two of a rule's words
            "build has to stay under 500mb, steam deck ppl complain otherwise",
            "a guy on reddit said u must always ship a linux build or ur dead to deck players, idk",
            id="hearsay",
        ),
        pytest.param(  # tuning7: news of the day on two of a rule's words
            "If a crew member calls in fatigued, you remove them from the duty, no questions,"
            " and log it as fatigue not sick.",
            "We've 14 crew off sick today, 9 on standby, and two flights short.",
            id="news",
        ),
    ],
)
def test_news_on_a_rules_words_is_not_carried_with_it(earlier: str, later: str) -> None:
    """A sentence read as nothing, with no word of change, that the model does not believe a
    change, that gives no value of what the rule measures and says fewer than half of its
    words is news on the rule's words: tied to it, it would be carried with it and take
    another rule's room."""
    users = ("Hello there.", earlier, "Thanks.", *OTHERS, "Go on.", later, "What next?")
    assert carried_with(earlier, users) == [earlier]


@pytest.mark.parametrize(
    ("earlier", "later"),
    [
        pytest.param(  # rt7-pt-026: a limit read as a fact, lifted in other words
            "Limite de 300 palavras nos posts do blog.",
            "Os textos do site podem ter até uma página inteira.",
            id="rt7-pt-026",
        ),
        pytest.param(  # the data brief's example of a change in other words
            "The standup is at 9:30.",
            "Morning sync moved to ten o'clock.",
            id="standup",
        ),
    ],
)
def test_a_change_when_no_rule_stands_goes_with_the_facts(earlier: str, later: str) -> None:
    """No rule or limit stands: a lift or change on none of the earlier words may be on the
    point of any earlier fact, so the fact is carried only with it."""
    users = ("Hello there.", earlier, "The wiki lives at wiki.example.org.", later, "Ok?")
    assert goes_with(earlier, later, users)


@pytest.mark.parametrize(
    ("pinned", "later"),
    [
        pytest.param(  # rh4-pt-001: the pinned rule is read as nothing
            "Nunca recomende aplicação aérea perto do córrego.",
            "A APP do córrego foi recomposta e o órgão liberou, pode considerar aplicação "
            "aérea lá de novo.",
            id="rh4-pt-001",
        ),
        pytest.param(  # rh4-es-008: the update has no word of change
            "Máximo diez preguntas por prueba para tercer grado.",
            "La dirección pidió que las pruebas de tercero tengan hasta doce preguntas.",
            id="rh4-es-008",
        ),
    ],
)
def test_what_changes_a_sentence_still_in_view_is_carried_first(pinned: str, later: str) -> None:
    """The first request stays in view (a level pins it); its removed update is ranked
    before anything else the block carries."""
    users = (pinned, "Thanks.", *OTHERS, "Go on.", later, "What next?")
    before = [Message.system("You are a careful assistant.")]
    for text in users:
        before += [Message.user(text), Message.assistant("Noted.")]
    view = (tuple(before), (before[0], before[1], *before[-2:]))
    resolved = resolving.resolve((), *view, Numbering(view[0]))
    assert [resolved.items[i].text for i in resolved.urgent] == [later]

"""The carried block's room (chatcli.history.carry): it comes out of what a level keeps, never
on top of it, in small windows too; rules and limits first; an earlier statement never shown
without the later one that changes it."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from benchmarks import fidelity

from chatcli import Client
from chatcli.compaction import compact
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.history import statements
from chatcli.history.carry import (
    CarryBudget,
    carried_items,
    carry_instructions,
    carrying,
    is_carry_block,
)
from chatcli.history.retain import Retention, level_target, retain
from chatcli.messages import Message, Role
from chatcli.tokens.estimate import TokenEstimator
from tests.carry_cases import DENSE_FACTS, DENSE_RULES, DENSE_UPDATES, dense_session
from tests.compaction_fakes import SECTIONS_TEMPLATE, ScriptedSummarizer
from tests.fakes import WindowedProvider

COUNT = TokenEstimator().count


def level_view(messages: Sequence[Message], level: int, room: int) -> tuple[Message, ...]:
    """Level `level` by tokens in `room`, carrying as the ladder does: the block's room is
    what the level keeps, and the view with the block stays within it."""
    config = RecoveryConfig()
    retention = Retention(room=room, count=COUNT)
    target = level_target(level, config, room)
    tokens = target * config.carry_pct // 100
    budget = CarryBudget(tokens=tokens, count=COUNT, room=target, limit=target)
    return carrying(lambda m: retain(m, level, config, retention), messages, budget=budget).messages


def assert_no_statement_without_its_update(view: Sequence[Message]) -> None:
    text = "\n".join(m.text for m in view)
    for earlier, later in DENSE_UPDATES:
        if earlier in text:
            assert text.rfind(later) > text.rfind(earlier), (earlier, later)


@pytest.mark.parametrize("level", [2, 3])
@pytest.mark.parametrize("turns", [60, 130])
def test_a_levels_view_with_its_block_is_within_the_levels_target(level: int, turns: int) -> None:
    """Across rooms of 150 to 1,500 tokens: a block that changed in the last pass, or whose
    left-out line grew, once put the view over the target by a few tokens, and a block sized
    by the whole room put level 3's over its target by up to half the room."""
    messages = dense_session(turns)
    rooms = range(150, 1_500, 11)
    carried = 0
    for room in rooms:
        view = level_view(messages, level, room)
        assert COUNT(view) <= level_target(level, RecoveryConfig(), room), room
        assert sum(is_carry_block(m) for m in view) <= 1
        assert_no_statement_without_its_update(view)
        carried += bool(carried_items(view)[0])
    assert carried > len(rooms) // 2


@pytest.mark.parametrize(("level", "room"), [(2, 315), (2, 1_008), (2, 1_261), (3, 579)])
def test_a_block_that_grew_in_the_last_pass_keeps_what_the_target_has_room_for(
    level: int, room: int
) -> None:
    """In these rooms the last pass removed a message more than the one before (the rest was
    fitted around a larger block): its items were left out, cut to the size of the block
    the rest was fitted around, though the view had room for them within the target."""
    view = level_view(dense_session(60), level, room)
    assert COUNT(view) <= level_target(level, RecoveryConfig(), room)
    items, left_out = carried_items(view)
    assert items and left_out == 0


@pytest.mark.parametrize("window", [400, 600, 1_000, 1_400])
def test_a_dense_session_in_a_small_window_keeps_its_rules_through_the_client(
    window: int,
) -> None:
    """130 one-line turns, 12 of them worth carrying, sent in a window of 400 to 1,400
    tokens: one call (pre-flight recovery), every rule and limit in the view, the values
    changed later only with their change, nothing over the window."""
    provider = WindowedProvider(window=window)
    reply = Client(provider, microcompact=None).send(dense_session(), max_tokens=100)
    assert reply.calls == 1
    sent = provider.requests[-1].messages
    assert provider.count(sent) + 100 <= window
    text = "\n".join(m.text for m in sent)
    assert all(rule in text for rule in DENSE_RULES)
    assert sum(fact in text for fact in DENSE_FACTS) >= 3
    assert_no_statement_without_its_update(sent)
    assert DENSE_UPDATES[1][0] not in text  # replaced by its correction: not carried
    blocks = [m for m in sent if is_carry_block(m)]
    assert len(blocks) == 1 and blocks[0].role is Role.USER


@pytest.mark.parametrize("window", [150, 196, 219, 300, 500, 800])
def test_a_compactions_fallback_fits_its_budget_with_the_block(window: int) -> None:
    """A summary that does not fit: the fallback's last level keeps the block within what its
    view leaves of the budget (a block of the whole share once put it over the budget)."""
    summary = SECTIONS_TEMPLATE.format(goal="-", rules="-")
    result = compact(
        ScriptedSummarizer([summary]),
        dense_session(),
        window=window,
        config=CompactionConfig(keep_turns=2),
        fallback=True,
    )
    assert result.report.fallback is not None
    assert result.report.tokens_after <= window
    assert_no_statement_without_its_update(result.messages)
    if window >= 300:
        assert carried_items(result.messages)[0]


# Two rules of the tuning set (t2-en-0009, t-en-0216).
SURER, WEAKER = (
    "Don't install packages into the base conda environment.",
    "Don't touch the shader graph files, the artists own those.",
)


@pytest.mark.parametrize(("sure", "kept"), [(SURER, SURER), (WEAKER, WEAKER)])
def test_a_tight_block_keeps_the_rule_the_recogniser_is_surer_of(
    monkeypatch: pytest.MonkeyPatch, sure: str, kept: str
) -> None:
    """Rules' share of the room holds one of two: the one read more surely is carried,
    older or newer (chatter misread as a rule yields to the user's rules)."""
    monkeypatch.setattr(statements, "certainty", lambda text: 0.95 if text == sure else 0.55)
    messages = (
        Message.user(SURER),
        Message.assistant("Noted."),
        Message.user(WEAKER),
        Message.assistant("Noted."),
        Message.user("What is next on the list?"),
    )
    one = COUNT((Message.user(f"#3: {WEAKER}"),)) - COUNT((Message.user(""),))
    budget = CarryBudget(tokens=1_000, count=COUNT, room=2 * one + 1)
    view = carry_instructions(messages, messages[-1:], budget=budget).messages
    assert [item.text for item in carried_items(view)[0]] == [kept]


def test_a_tight_block_keeps_another_rules_lift_before_a_rule_whose_lift_it_keeps() -> None:
    """The issue's four reversals, the first request still in view: with room for three of
    the four lines, the three lifts are carried, not the rule a kept lift already lifts."""
    users = (
        "Never push to main.",
        "Do not use the staging cluster.",
        "Never deploy on Fridays.",
        "Nunca faça push na main.",
        "Pushing to main is OK now.",
        "The staging cluster is back, feel free to use it.",
        "Pode fazer push na main agora.",
        "Forget what I said about Friday deploys; we can deploy any day now.",
    )
    messages: list[Message] = []
    for text in users:
        messages += [Message.user(text), Message.assistant("OK.")]
    messages.append(Message.user("What next?"))
    after = (messages[0], messages[-1])
    whole = carry_instructions(messages, after).messages
    lifted = "Nunca faça push na main."
    assert lifted in [item.text for item in carried_items(whole)[0]]
    bare = COUNT((Message.user(""),))
    line = COUNT((Message.user(f"#7: {lifted}"),)) - bare
    more = COUNT((Message.user("[1 more left out]"),)) - bare
    block = next(m for m in whole if is_carry_block(m))
    budget = CarryBudget(tokens=COUNT((block,)) - line + more, count=COUNT)
    view = carry_instructions(messages, after, budget=budget).messages
    assert [item.text for item in carried_items(view)[0]] == [
        "The staging cluster is back, feel free to use it.",
        "Pode fazer push na main agora.",
        "Forget what I said about Friday deploys; we can deploy any day now.",
    ]


@pytest.mark.parametrize(
    ("strategy", "seed", "pct"),
    [
        pytest.param("level 2", 4, 10, id="level-2"),
        pytest.param("compaction", 1, 20, id="compaction"),
    ],
)
def test_a_rule_is_not_traded_for_a_preference_when_the_passes_do_not_settle(
    strategy: str, seed: int, pct: int
) -> None:
    """benchmarks/fidelity.py's pasted shape, five rounds. Level 2 at 10% (449 tokens) kept
    the pinned first request beside a block of one preference and cut it beside the larger
    block quoting it; the last pass's block, carried again in the room fitted around the
    smaller one, dropped the rule and kept "Format a number, given the following data:".
    A compaction's fallback at 20% settled on its second pass, fitted around its own block:
    that room, not the first pass's, is the block's."""
    counter = fidelity.tiktoken_counter("o200k_base")
    run = (
        fidelity.level(2, counter, None)
        if strategy == "level 2"
        else fidelity.compaction(fidelity.headings_only, counter, None)
    )
    session = fidelity.pasted_session(seed, counter)
    assert session.filler is not None
    budget = counter.count(session.messages) * pct // 100
    view = transcript = session.messages
    for round_ in range(fidelity.ROUNDS):
        if round_:
            more = session.filler(seed * 100 + round_, budget // 2)
            view, transcript = [*view, *more], [*transcript, *more]
        view = run(view, budget, transcript)
        text = "\n".join(m.text for m in view)
        assert "BANANA" in text and "ZX-4471" in text, round_
        assert counter.count(view) <= budget

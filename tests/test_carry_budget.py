"""The carried block's room (chatcli.history.carry): it comes out of a level's target, never on
top of it, in small windows too."""

from __future__ import annotations

import pytest

from chatcli.config import RecoveryConfig
from chatcli.history.carry import CarryBudget, carried_items, carrying, is_carry_block
from chatcli.history.retain import Retention, retain
from chatcli.messages import Message
from chatcli.tokens.estimate import TokenEstimator
from tests.carry_cases import dense_session

COUNT = TokenEstimator().count


def level_view(messages: list[Message], level: int, room: int) -> tuple[Message, ...]:
    """Level `level` by tokens in `room`, carrying with the default share of it."""
    config = RecoveryConfig()
    retention = Retention(room=room, count=COUNT)
    budget = CarryBudget(tokens=room * config.carry_pct // 100, count=COUNT, room=room)
    return carrying(lambda m: retain(m, level, config, retention), messages, budget=budget).messages


@pytest.mark.parametrize("turns", [60, 130])
def test_a_levels_view_with_its_block_is_within_the_levels_target(turns: int) -> None:
    """Across rooms of 150 to 1,500 tokens (a block that changed in the last pass, or whose
    left-out line grew, once put the view over the target by a few tokens)."""
    messages = dense_session(turns)
    rooms = range(150, 1_500, 11)
    carried = 0
    for room in rooms:
        view = level_view(messages, 2, room)
        assert COUNT(view) <= room * RecoveryConfig().target_pct // 100, room
        assert sum(is_carry_block(m) for m in view) <= 1
        carried += bool(carried_items(view)[0])
    assert carried > len(rooms) // 2

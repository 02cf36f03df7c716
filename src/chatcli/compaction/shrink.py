"""A conversation over the budget, shrunk so that compaction can carry it.

Overflow during compaction never sticks: a conversation over the budget (the window minus the
output reserve) is shrunk before it is split. Tool results are budgeted, inline media (base64
data URLs) is replaced by `MEDIA_MARKER`, and every assistant or tool message is cut to a
share of the budget; user messages, and so the user's latest request and instructions, are
kept verbatim beside the summary.
"""

from __future__ import annotations

import re

from chatcli.compaction.plan import Plan
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.text import cut_middle
from chatcli.messages import Message, Role

__all__ = ["MEDIA_MARKER", "fitted"]

_MEDIA = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=]+")
MEDIA_MARKER = "[media removed for compaction]"
# Over the budget, no assistant or tool message keeps more than this share of it.
_MESSAGE_SHARE = 4


def fitted(messages: tuple[Message, ...], plan: Plan) -> tuple[Message, ...]:
    """`messages` shrunk to what compaction can carry when over the budget (see the module
    docstring); as they are otherwise, or when the budget is unknown."""
    if plan.budget is None or plan.estimator.count(messages) <= plan.budget:
        return messages
    budgeted = enforce_tool_result_budget(
        messages,
        per_result_chars=plan.recovery.tool_result_max_chars,
        per_turn_chars=plan.recovery.tool_result_budget_chars,
    ).messages
    limit = int(plan.budget * plan.estimator.chars_per_token) // _MESSAGE_SHARE
    return tuple(_fitted_message(m, limit) for m in budgeted)


def _fitted_message(message: Message, limit: int) -> Message:
    text = _MEDIA.sub(MEDIA_MARKER, message.text)
    if message.role in (Role.ASSISTANT, Role.TOOL):
        text = cut_middle(text, limit, note=" for compaction")
    return message if text == message.text else message.with_text(text)

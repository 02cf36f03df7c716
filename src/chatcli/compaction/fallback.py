"""The fallback of a failed summary: the deterministic recovery levels, which cannot fail.

With `fallback=True` a compaction whose summary failed applies the lowest recovery level
(`apply_recovery_level`) whose result fits the budget, with what it removes from the user's
messages carried (`chatcli.history.carry`). A fallback that does not shrink the view (level 3
adds its notice to a view it cannot shorten) is not applied: the compaction fails as if there
were no fallback, and the request's own recovery levels deal with the view.
"""

from __future__ import annotations

from dataclasses import replace
from functools import partial

from chatcli.compaction.plan import Plan, carry_budget
from chatcli.compaction.report import CompactionReport, CompactionResult, usage_of
from chatcli.errors import CompactionError
from chatcli.history.carry import carrying
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import Message
from chatcli.providers.base import Response

__all__ = ["fall_back"]


def fall_back(
    messages: tuple[Message, ...],
    plan: Plan,
    *,
    reason: str,
    calls: tuple[Response | None, ...] = (),
    cannot_summarise: bool = False,
) -> CompactionResult:
    """The lowest deterministic recovery level whose result fits (level 3 if none does).

    A result that is not smaller than `messages` is not applied: CompactionError (level 3
    adds its notice, so a view it cannot shorten grows). `calls` are the summary calls made
    before the failure (None: one that raised): they were paid for; `cannot_summarise`:
    the failure was the model's summary (the report says so).
    """
    for level in (1, 2, 3):
        budget = carry_budget(messages, plan)
        if level == 3:  # the last one: its block gets what the rest leaves of the budget
            budget = replace(budget, limit=plan.budget)
        result = carrying(
            partial(apply_recovery_level, level=level, config=plan.recovery, number=plan.numbering),
            messages,
            budget=budget,
            numbering=plan.numbering,
        )
        tokens = plan.estimator.count(result.messages)
        if plan.budget is None or tokens <= plan.budget:
            break
    before = plan.estimator.count(messages)
    if tokens >= before:
        raise CompactionError(
            f"{reason}; the recovery levels do not shrink the conversation either "
            f"(~{before:,} -> ~{tokens:,} tokens), so it is left as it is"
        )
    report = CompactionReport(
        messages_before=len(messages),
        messages_after=len(result.messages),
        tokens_before=before,
        tokens_after=tokens,
        calls=len(calls),
        usage=usage_of(calls),
        fallback=result.report,
        reason=reason,
        cannot_summarise=cannot_summarise,
    )
    return CompactionResult(messages=result.messages, report=report)

"""/compact: one compaction, from the conversation to a verified new working view.

`compact` (and `acompact`) replace the middle of the working view (between the system
messages and the last few turns) with a summary written by a model, in fixed sections. The
full transcript is the caller's and is never touched; every input is immutable, so a failure
leaves the conversation exactly as it was.

The steps (`compaction_steps`): shrink a conversation over the budget (`chatcli.compaction.shrink`),
split it (`chatcli.compaction.plan`), summarise the middle (`chatcli.compaction.summarise`),
or the conversation's previous request where the summariser's prompt cache holds it
(`chatcli.compaction.warm`: its summary asked for after that request, `previous`),
then accept the summary only when it passes the checks (`chatcli.compaction.verify`), with
what it did not state pinned after it and what the removed user messages said carried.
Otherwise, and on any provider error that retrying did not fix, `CompactionError` is raised,
chained to the cause, and carrying what the summary calls spent; with `fallback=True` the
recovery levels are tried first (`chatcli.compaction.fallback`). `/compact` does not fall
back: the user is told why and decides.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Sequence
from dataclasses import replace

from chatcli.compaction.drive import AsyncSleep, Sleep, Steps, adrive, drive
from chatcli.compaction.fallback import fall_back
from chatcli.compaction.plan import Plan, Split, carry_budget, make_plan, max_tail_chars, split
from chatcli.compaction.previous import PreviousRequest
from chatcli.compaction.prompt import render
from chatcli.compaction.report import CompactionReport, CompactionResult, usage_of
from chatcli.compaction.shrink import fitted
from chatcli.compaction.summarise import SummaryOverflow, replanned, summarise
from chatcli.compaction.summary import summary_text
from chatcli.compaction.verify import (
    check_summary,
    latest_request,
    missing,
    pins,
    required,
    validate,
)
from chatcli.compaction.warm import rendered_tokens, summarise_warm
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.errors import CannotSummarise, CompactionError
from chatcli.history.carry import carry_instructions, is_carry_block
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.truncate import Number
from chatcli.messages import Message
from chatcli.providers.base import Provider, Response
from chatcli.tokens.estimate import TokenEstimator

__all__ = ["acompact", "compact", "compaction_steps"]


def compact(
    provider: Provider,
    messages: Sequence[Message],
    *,
    focus: str | None = None,
    config: CompactionConfig | None = None,
    estimator: TokenEstimator | None = None,
    window: int | None = None,
    output_reserve: int = 0,
    summarizer: Provider | None = None,
    summarizer_window: int | None = None,
    fallback: bool = False,
    recovery_config: RecoveryConfig | None = None,
    sleep: Sleep = time.sleep,
    numbering: Number | None = None,
    previous: PreviousRequest | None = None,
) -> CompactionResult:
    """Replace the middle of `messages` with a verified summary (see the module docstring).

    `window` defaults to the provider's declared `context_window`; `summarizer` (default:
    `provider`) writes the summary within `summarizer_window` (default: its declared window,
    else `window`). `sleep` waits before a retried summary call. `numbering`: the
    transcript's message numbers, which the summary's header names for the span it replaced
    (and the fallback levels' markers); None when `messages` are not from a transcript.
    `previous`: the conversation's last request as it was sent to `provider`, and what it
    added since (`chatcli.compaction.previous`), so the summary is asked for after it, on
    the provider's prompt cache (`chatcli.compaction.warm`); None: the rendered request.
    Raises `CompactionError` when no valid view was produced.
    """
    plan = make_plan(
        provider,
        summarizer,
        focus,
        config,
        estimator,
        window,
        output_reserve,
        summarizer_window,
        fallback,
        recovery_config,
        numbering,
        previous=previous,
    )
    return drive(compaction_steps(tuple(messages), plan), summarizer or provider, sleep)


async def acompact(
    provider: Provider,
    messages: Sequence[Message],
    *,
    focus: str | None = None,
    config: CompactionConfig | None = None,
    estimator: TokenEstimator | None = None,
    window: int | None = None,
    output_reserve: int = 0,
    summarizer: Provider | None = None,
    summarizer_window: int | None = None,
    fallback: bool = False,
    recovery_config: RecoveryConfig | None = None,
    asleep: AsyncSleep = asyncio.sleep,
    numbering: Number | None = None,
    previous: PreviousRequest | None = None,
) -> CompactionResult:
    """The async twin of `compact` (`asleep` waits before a retried summary call)."""
    plan = make_plan(
        provider,
        summarizer,
        focus,
        config,
        estimator,
        window,
        output_reserve,
        summarizer_window,
        fallback,
        recovery_config,
        numbering,
        previous=previous,
    )
    return await adrive(compaction_steps(tuple(messages), plan), summarizer or provider, asleep)


def compaction_steps(messages: tuple[Message, ...], plan: Plan) -> Steps[CompactionResult]:
    """Summarise, verify, validate; fall back to the recovery levels when allowed."""
    calls: list[Response | None] = []  # None: a call that raised (counted, maybe billed)
    try:
        repaired = fitted(repair_tool_pairing(messages).messages, plan)
        parts = split(repaired, plan.config.keep_turns, max_tail_chars(plan))
        summary, source, warm = yield from _summary(parts, plan, calls)
        result = _accept(messages, parts, summary, source, tuple(calls), plan)
        return replace(result, report=replace(result.report, warm=warm))
    except CompactionError as exc:
        # Raised by this compaction, so no one else holds it: what it spent goes with it.
        exc.calls, exc.usage = len(calls), usage_of(calls)
        if not plan.fallback:
            raise
        try:
            cannot = isinstance(exc, CannotSummarise)
            return fall_back(
                messages, plan, reason=str(exc), calls=tuple(calls), cannot_summarise=cannot
            )
        except CompactionError as worse:
            worse.calls, worse.usage = exc.calls, exc.usage
            raise worse from exc


def _summary(
    parts: Split, plan: Plan, calls: list[Response | None]
) -> Steps[tuple[str, str, bool]]:
    """(the summary, the text it was written from, whether on the warm prefix): there when
    it is taken and works (`chatcli.compaction.warm`), else of the middle rendered as text."""
    blocks = render(parts.middle)
    warm = yield from summarise_warm(plan, calls, rendered_tokens(blocks, plan))
    if warm is not None:
        return (*warm, True)
    try:
        summary = yield from summarise(blocks, plan, calls, level=0)
    except SummaryOverflow as overflow:
        # Once, with the window and token ratio the summariser's error states.
        summary = yield from summarise(blocks, replanned(plan, overflow), calls, level=0)
    return summary, "\n".join(blocks) + (plan.focus or ""), False


def _accept(
    messages: tuple[Message, ...],
    parts: Split,
    summary: str,
    source: str,
    calls: tuple[Response | None, ...],
    plan: Plan,
) -> CompactionResult:
    """Verify and validate the summary (checked against `source`, the text it was written
    from); the new view, or CompactionError with nothing changed."""
    check_summary(summary, source)
    kept = (*parts.systems, *parts.tail)
    items, follows, request = required(
        messages, kept, latest_request(parts.middle + parts.tail), plan.numbering
    )
    # What the removed user messages said is carried; what is carried needs no pin.
    block = _carried(messages, kept, plan)
    stated = "\n".join([summary, *(m.text for m in (*parts.systems, *block))])
    pinned = pins(items, follows, stated, request)
    request = request if request and missing(summary, (request,)) else ""
    text = summary_text(summary, pinned, request, parts.middle, plan.numbering)
    # The summary first, then the user's own words, then the kept turns: read in that order.
    view = (*parts.systems, Message.user(text), *block, *parts.tail)
    report = CompactionReport(
        messages_before=len(messages),
        messages_after=len(view),
        tokens_before=plan.estimator.count(messages),
        tokens_after=plan.estimator.count(view),
        summarized=len(parts.middle),
        calls=len(calls),
        usage=usage_of(calls),
        model=next((c.model for c in reversed(calls) if c is not None and c.model), None),
        summary=summary,
        pinned=pinned + ((request,) if request else ()),
    )
    validate(view, report, plan)
    return CompactionResult(messages=view, report=report)


def _carried(
    messages: tuple[Message, ...], kept: tuple[Message, ...], plan: Plan
) -> tuple[Message, ...]:
    """The block of what the user messages `kept` leaves out said (`chatcli.history.carry`),
    if any."""
    if not plan.recovery.carry_pct:
        return ()
    budget = carry_budget(messages, plan)
    view = carry_instructions(messages, kept, budget=budget, numbering=plan.numbering).messages
    return tuple(m for m in view if is_carry_block(m))

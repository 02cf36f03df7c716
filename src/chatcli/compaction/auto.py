"""Auto-compaction: compaction before a request whose prompt passes a share of the window,
stopped by a circuit breaker when it keeps failing.

`should_auto_compact` decides when (`CompactionConfig.auto_compact_pct` of the effective
window, the window minus the output reserve). `auto_compact` never raises `CompactionError`:
a failure is a strike on the `CompactionBreaker` and the input is sent as it is. It falls back
to the recovery levels (`chatcli.compaction.fallback`) only when the conversation already
exceeds the effective window; when the breaker is open (after `max_failures` failed or
ineffective compactions in a row, or at once when the model's summary was rejected: a model
that could not summarise once will not on the next turn either) no model call is made at all,
and the recovery levels shrink a conversation that exceeds the effective window.
`AutoCompaction` says what was done.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from chatcli.compaction.drive import AsyncSleep, Sleep, Steps, adrive, drive
from chatcli.compaction.fallback import fall_back
from chatcli.compaction.plan import Plan, make_plan
from chatcli.compaction.previous import PreviousRequest
from chatcli.compaction.report import CompactionReport, CompactionResult
from chatcli.compaction.run import compaction_steps
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.errors import CannotSummarise, CompactionError
from chatcli.history.truncate import Number
from chatcli.messages import Message
from chatcli.providers.base import Provider
from chatcli.tokens.estimate import TokenEstimator

__all__ = [
    "AutoCompaction",
    "CompactionBreaker",
    "aauto_compact",
    "auto_compact",
    "should_auto_compact",
]


def should_auto_compact(estimate: int, window: int, output_reserve: int, pct: int) -> bool:
    """Whether a prompt of `estimate` tokens passes `pct`% of the effective window.

    The effective window is `window - output_reserve`: the room the prompt really has.
    """
    effective = max(window - output_reserve, 0)
    return estimate * 100 > effective * pct


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionBreaker:
    """Stops auto-compaction that keeps failing or freeing too little (a value; pure methods).

    Each failed compaction, fallback, or compaction that freed less than `min_freed_pct`
    percent is a strike; a good compaction clears them. At `max_strikes` in a row it is open:
    auto-compaction stops making model calls. A failure that would repeat opens it at once
    (`CannotSummarise`: the model's summary failed the checks, or its window has no room for
    one; `unable` says why): asking again would fail the same way, at the same cost, on every
    later turn. `take_notice` says so exactly once.
    """

    max_strikes: int = 3
    min_freed_pct: int = 10
    strikes: int = 0
    last_reason: str = ""
    reported: bool = False
    unable: str = ""

    @classmethod
    def from_config(cls, config: CompactionConfig) -> CompactionBreaker:
        return cls(max_strikes=config.max_failures, min_freed_pct=config.min_freed_pct)

    @property
    def is_open(self) -> bool:
        return self.strikes >= self.max_strikes

    def after_compaction(self, report: CompactionReport) -> CompactionBreaker:
        if report.fallback is not None:
            return self.after_failure(report.reason, cannot_summarise=report.cannot_summarise)
        if report.freed_pct < self.min_freed_pct:
            return self.after_failure(
                f"it freed only {report.freed_pct:.0f}% of the tokens "
                f"(less than {self.min_freed_pct}%)"
            )
        return replace(self, strikes=0, last_reason="")

    def after_failure(self, reason: str, *, cannot_summarise: bool = False) -> CompactionBreaker:
        """One more strike; a failure that would repeat (`cannot_summarise`) opens it."""
        if cannot_summarise:
            return replace(self, strikes=self.max_strikes, last_reason=reason, unable=reason)
        return replace(self, strikes=self.strikes + 1, last_reason=reason)

    def take_notice(self) -> tuple[CompactionBreaker, str | None]:
        """(the breaker, a message) the first time it is seen open; (itself, None) after."""
        if not self.is_open or self.reported:
            return self, None
        if self.unable:
            notice = (
                "Auto-compaction is off for this session: the model cannot summarise this "
                f"conversation ({self.unable}). /compact will not ask it again (it "
                "refuses at once; /model switches to another model); overflow recovery still "
                "keeps each request within the window."
            )
        else:
            notice = (
                f"Auto-compaction is off for this session after {self.strikes} failed or "
                f"ineffective compactions in a row (last: {self.last_reason}). Use /compact "
                "to compact by hand; overflow recovery still applies."
            )
        return replace(self, reported=True), notice


@dataclass(frozen=True, slots=True, kw_only=True)
class AutoCompaction:
    """What `auto_compact` decided.

    `messages` is the view to send: the input itself when nothing was done or the compaction
    failed (`error` then says why). `notice` is the breaker's once-only message.
    """

    messages: tuple[Message, ...]
    breaker: CompactionBreaker
    result: CompactionResult | None = None
    error: CompactionError | None = None
    notice: str | None = None


def auto_compact(
    provider: Provider,
    messages: Sequence[Message],
    *,
    breaker: CompactionBreaker,
    window: int,
    output_reserve: int = 0,
    config: CompactionConfig | None = None,
    estimator: TokenEstimator | None = None,
    summarizer: Provider | None = None,
    summarizer_window: int | None = None,
    recovery_config: RecoveryConfig | None = None,
    sleep: Sleep = time.sleep,
    numbering: Number | None = None,
    on_start: Callable[[], object] | None = None,
    previous: PreviousRequest | None = None,
) -> AutoCompaction:
    """Compact before a request when the estimate passes `auto_compact_pct` of the window.

    Never raises CompactionError: a failure is a strike on the breaker and the input is sent
    as it is (or, when it exceeds the effective window, the deterministic levels shrink it).
    A summary call that is retried (and then works) is no failure. `sleep` waits before it.
    `on_start` is called when a compaction starts (before its first model call), so that an
    application can say it is compacting, not waiting for an answer. `previous`: the
    conversation's last request, as for `chatcli.compaction.compact`.
    """
    plan = make_plan(
        provider,
        summarizer,
        None,
        config,
        estimator,
        window,
        output_reserve,
        summarizer_window,
        False,
        recovery_config,
        numbering,
        previous=previous,
    )
    budget = max(window - output_reserve, 0)
    steps = _auto(tuple(messages), plan, breaker, budget=budget, on_start=on_start)
    return drive(steps, summarizer or provider, sleep)


async def aauto_compact(
    provider: Provider,
    messages: Sequence[Message],
    *,
    breaker: CompactionBreaker,
    window: int,
    output_reserve: int = 0,
    config: CompactionConfig | None = None,
    estimator: TokenEstimator | None = None,
    summarizer: Provider | None = None,
    summarizer_window: int | None = None,
    recovery_config: RecoveryConfig | None = None,
    asleep: AsyncSleep = asyncio.sleep,
    numbering: Number | None = None,
    on_start: Callable[[], object] | None = None,
    previous: PreviousRequest | None = None,
) -> AutoCompaction:
    """The async twin of `auto_compact`."""
    plan = make_plan(
        provider,
        summarizer,
        None,
        config,
        estimator,
        window,
        output_reserve,
        summarizer_window,
        False,
        recovery_config,
        numbering,
        previous=previous,
    )
    budget = max(window - output_reserve, 0)
    steps = _auto(tuple(messages), plan, breaker, budget=budget, on_start=on_start)
    return await adrive(steps, summarizer or provider, asleep)


def _auto(
    messages: tuple[Message, ...],
    plan: Plan,
    breaker: CompactionBreaker,
    *,
    budget: int,
    on_start: Callable[[], object] | None,
) -> Steps[AutoCompaction]:
    estimate = plan.estimator.count(messages)
    if not should_auto_compact(estimate, budget, 0, plan.config.auto_compact_pct):
        return AutoCompaction(messages=messages, breaker=breaker)
    over = estimate > budget
    if breaker.is_open:
        breaker, notice = breaker.take_notice()
        try:
            result = fall_back(messages, plan, reason="auto-compaction is off") if over else None
        except CompactionError:
            result = None  # nothing shrinks it: the request's own recovery levels apply
        view = messages if result is None else result.messages
        return AutoCompaction(messages=view, breaker=breaker, result=result, notice=notice)
    if on_start is not None:
        on_start()
    try:
        result = yield from compaction_steps(messages, replace(plan, fallback=over))
    except CompactionError as exc:
        cannot = isinstance(exc, CannotSummarise)
        breaker, notice = breaker.after_failure(str(exc), cannot_summarise=cannot).take_notice()
        return AutoCompaction(messages=messages, breaker=breaker, error=exc, notice=notice)
    breaker, notice = breaker.after_compaction(result.report).take_notice()
    return AutoCompaction(messages=result.messages, breaker=breaker, result=result, notice=notice)

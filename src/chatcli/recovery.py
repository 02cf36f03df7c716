"""The recovery engine: a pure policy, and `Client`, which drives it over a provider.

The policy is a sans-IO generator (the pattern of httpx's auth flows): it yields an action —
`Send` a request, or `Sleep` before a retry — and is sent back the outcome (the provider's
`Response` or the exception it raised; `None` after a sleep). It returns the `Reply`, or
raises `ContextRecoveryError` / `ProviderError`. It does no I/O, so one policy serves the sync
and the async driver of `Client`, and tests can walk it step by step.

One `send()`, in order (SPEC sections 1-3):

1. The working view: transcript -> microcompaction -> tool-result budget (configured limits)
   -> pairing repair (see "The working view, in this order" below).
2. Pre-flight (predictive mode): max_tokens above the model's known cap is lowered to it; a
   view whose estimate plus the output reserve clearly exceeds the known window (by more than
   `PREFLIGHT_MARGIN`) gets max_tokens fitted to the room left (as in 4) or, when that room
   is too small, the first recovery level predicted to fit, without a round trip.
3. Send. An error is classified once (`ProviderError.info`, else `classify_error`).
4. Context overflow (an error, or the `context_window` stop reason, whose partial answer is
   kept and continued) -> when the provider states that the prompt fits and only the
   output asked for does not (Anthropic's "199759 + 8192 > 200000", vLLM's "max_tokens ...
   is too large: 64000 ... 24235 input tokens"), and the room left is still useful
   (`useful_output_room`), max_tokens is lowered to that room and the history resent
   untouched (`MaxTokensFitted`). Otherwise the next
   recovery level, at most `config.max_recovery_attempts` levels (of the three there are).
   When the provider states the prompt size, the estimator is calibrated on the view it
   counted, and levels predicted not to fit are skipped without a call (`LevelSkipped`).
5. Output cap ("max_tokens too large") -> max_tokens lowered to the stated cap, history
   untouched; at most `MAX_OUTPUT_CAP_LOWERINGS` times.
6. Rate limit / transient -> wait (Retry-After, else exponential backoff) and resend the same
   request; at most `max_retries` times in a row (a successful call resets the count).
7. Stop at max_tokens -> keep the partial, raise the limit (no higher than the room the
   window leaves, once calibrated; with none set, the provider's own limit is what the cut
   answer produced, and it is never lowered: `next_max_tokens`), ask the model to
   continue, stitch;
   `config.max_token_escalations` times, then the partial is returned with `truncated=True`.
8. Anything else -> `ProviderError`, chained to the provider's exception.

Decisions where the SPEC leaves room:

- **The working view, in this order.** Every request's view is built from the caller's
  transcript by microcompaction (`RecoveryPolicy.microcompact`; None turns it off), then the
  tool-result budget, then pairing repair. Microcompaction goes first because it decides by
  a result's age and its ORIGINAL size, and describes the original in its stub (kind, lines,
  chars): given the transcript it sees both as they are. After the budget it would see
  results already cut; it can add the cut chars back from the marker (so the decision would
  be the same) but not the lines or the text that was cut, and the budget would have spent
  work cutting results about to become stubs. The budget then bounds what microcompaction
  left (old results are already small, so only recent large ones are cut). Pairing repair
  is last: the two before it only rewrite tool-result contents (no message added, dropped or
  moved, so they cannot unpair anything, and ages, counted in assistant messages, are the
  same either way), and repairing last guarantees the view that is sent is paired.
  Microcompaction is deterministic, so the provider's prompt cache survives it.
- **Levels are cumulative**: level n is applied to level n-1's view, not to the transcript.
  The levels are meant to be progressively more aggressive; applied in a chain, each view is
  never larger than the one before (level 2's tail keeps level 1's clipped tool results
  instead of bringing back full ones), and the chain is still a pure function of the
  transcript, so any level's view can be computed for a prediction without sending the ones
  before it.
- **A level that changes nothing is never sent** (predictive mode): its view is the one just
  rejected (or, before sending, predicted not to fit), so the answer is known. Level 1 has
  nothing to cut in plain chat, level 2 nothing in a history of at most
  `emergency_keep_messages` non-system messages; such a level is skipped without a call
  (`LevelSkipped` "changes nothing"), window known or not, and when no level changes
  anything `ContextRecoveryError` is raised without another call. The plain ladder
  (`predictive=False`, the benchmark's baseline) sends every level as the SPEC lists them.
- **Skips are trusted only when calibrated, and the last level only when clear.** Levels
  before the last are skipped when predicted not to fit: a wrong skip costs nothing but a
  harsher view, since a later level is still tried. The last allowed level is the task's
  last chance: skipping it fails the request, so it is sent unless a calibrated prediction
  puts it over the window by more than `LAST_LEVEL_MARGIN`: trying costs one call,
  refusing costs the task. Calibration is a single ratio taken from the view the provider
  counted, usually far larger than the last level's; on a small view the per-message
  template overhead and a dropped message (a server's chat format may omit the notice)
  move the real count by 10-20% either way (llama-cpp-python counted 430 tokens for a view
  predicted at 505). Beyond the margin the miss is not an estimation error, and
  `ContextRecoveryError` is raised without another call. A prediction from the
  uncalibrated chars/token estimate is only a guess, and a guess never fails a request
  without asking the provider: the last allowed level is then sent anyway.
- **Lowering max_tokens beats truncating, down to a point.** Lowering max_tokens keeps the
  whole history but shortens the answer the model may give; too short a room and the answer
  is cut and continued (each continuation resends the whole, nearly full, window) or a tool
  call carrying a file never fits, and dropping old history is the better trade. The room is
  useful when it holds a quarter of the output asked for (callers size max_tokens for their
  longest answer, typical ones are far shorter), never less than `MIN_OUTPUT_ROOM` tokens (a
  few paragraphs or a mid-size tool call), and never more than was asked. A request for more
  output than the whole window is measured against the window: it could never be met,
  whatever is cut.
  The fit uses only what the provider stated, so the plain ladder makes it too; it is tried
  once per request (if the fitted request still overflows, the levels take over). Pre-flight
  fits from the estimate too, with `PREFLIGHT_MARGIN` added to the prompt. Once calibrated,
  the same rule chooses the level: a level whose view leaves a useful room is sent with
  max_tokens fitted to it, rather than skipped for a harsher one (or the request failed) —
  which matters when the output alone nearly fills the window (a continuation after an
  escalation, a max_tokens near the window size).
- **The output reserve.** A prediction counts the output next to the prompt: the max_tokens
  asked for, or, when none is, the model's output cap, but no more than
  `DEFAULT_MAX_TOKENS` (4,096). Nothing reserved would let a prompt that fills the window
  go out, to be rejected or answered with nothing; the whole cap (64,000 for recent
  models) would truncate history pre-emptively for output most answers never use. 4,096 is
  a long answer. An output that does not fit is fitted like one asked for (max_tokens set
  to the room left), so the reserve never truncates history that a shorter answer would
  fit next to. With the cap unknown nothing is reserved: many servers then answer into
  whatever room the prompt leaves.
- **Escalation stops at the room the window leaves.** A continuation carries the partial
  answer, so it is larger than the request that was cut; in a nearly full window (after
  max_tokens was fitted to the room, say) the doubled limit is certain to be rejected. With
  the window known (predictive mode), the continuation is checked before it is sent, as in
  pre-flight: if it does not fit even at the current limit, recovery shortens the view first
  (a level that leaves a useful room may get max_tokens fitted to it: recovery lowering the
  limit, not escalation), and if no level is predicted to fit, the partial is returned,
  truncated, without a call. Then the limit is doubled up to the cap and, once calibrated,
  up to the room predicted next to the continuation. It is never lowered: a room not above
  the current limit means the continuation is sent at the current limit (the check made it
  fit). An uncalibrated estimate (~20% low against real tokenizers) never caps an
  escalation: it would hold back one the provider accepts, costing a continuation, whereas
  a rejected one is fitted from the provider's numbers.
- **Escalation at the cap still continues.** The SPEC's attempts 1 and 2 double the limit;
  when the limit is already at the model's cap it cannot double, but the continuation still
  makes progress (the partial is kept and the model resumes), so it is sent at the cap.
  "3rd+" is read as: once the escalations are used up, return the partial, truncated.
- **A tool call whose arguments were cut off is never returned.** Every answer loses the
  calls its adapter marked incomplete (cut, or unparseable), and an answer stopped at
  max_tokens also loses its last call even when its arguments parse: generation ended inside
  it, so what parsed may be a prefix (`{"path": "a"}` of `{"path": "a", "text": ...}`).
  The calls before it were closed before the next began; they are complete. An answer that
  stopped to call tools (`tool_use`) and has no call left is returned as cut: stop reason
  `max_tokens`, `truncated=True`.
- **A cut answer that holds complete tool calls is returned, not continued** (truncated): a
  continuation can only send the partial as text (calls cannot be sent without results), so
  the model would not know it had made those calls; returning them lets the caller run them.
- **An overflow of a continuation request that cannot be recovered returns the partial
  answer** (truncated, with a `RecoveryFailed` event) rather than raising and losing it,
  whether the provider stated it or a calibrated prediction did (then without a call).
- **An answer cut because the window filled up is kept** (the `context_window` stop,
  Anthropic's `model_context_window_exceeded`): it was paid for. It is an overflow (the view
  is recovered as for an error) and a cut answer (its last call dropped, the rest continued
  and stitched as after max_tokens, without raising the limit: the room was short, not the
  limit), and when recovery runs out it is returned truncated. Only when there is nothing
  to keep is `ContextRecoveryError` raised; it is then chained to a `ProviderError` holding
  what the stop stated, as every give-up without a provider exception is.
- **A silent truncation is said so**: an overflow an adapter detected from the usage (the
  server cut the prompt and answered anyway) gets a `SilentTruncationDetected` event
  before its recovery events; `_silent_truncation` is the one place that recognises it.
- `Reply.view` is the working view the answer is based on; the continuation scaffolding
  (partial answer + continuation message) is not part of it, the stitched answer replaces it.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field
from typing import Any, NoReturn

from chatcli.compaction import CompactionResult, acompact, compact
from chatcli.config import CompactionConfig, MicrocompactConfig, RecoveryConfig
from chatcli.continuation import (
    DEFAULT_MAX_TOKENS,
    continuation_request_messages,
    drop_incomplete_tool_calls,
    mark_cut_tool_call,
    next_max_tokens,
    stitch,
)
from chatcli.errors import (
    SILENT_TRUNCATION,
    ConfigError,
    ContextRecoveryError,
    ErrorInfo,
    ErrorKind,
    ProviderError,
    classify_error,
)
from chatcli.events import (
    Continued,
    Escalated,
    Event,
    Hook,
    LevelApplied,
    LevelSkipped,
    MaxTokensFitted,
    OutputCapLowered,
    OverflowDetected,
    PreflightRecovery,
    RecoveryFailed,
    Retried,
    SilentTruncationDetected,
    ToolCallsDropped,
    logger,
)
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.microcompact import microcompact
from chatcli.history.pairing import interrupted_result, repair_tool_pairing
from chatcli.history.result import TransformResult
from chatcli.history.truncate import COMPACTION_NOTICE, LEVEL_NAMES, apply_recovery_level
from chatcli.messages import Message, Role, StopReason, Usage, total_chars
from chatcli.providers.base import Provider, Request, Response, ToolSpec
from chatcli.retry import (
    DEFAULT_MAX_RETRIES,
    RETRY_BASE_DELAY,
    RETRY_MAX_DELAY,
    RETRYABLE,
    retry_delay,
)
from chatcli.tokens import TokenEstimator

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "LAST_LEVEL_MARGIN",
    "MAX_OUTPUT_CAP_LOWERINGS",
    "MIN_OUTPUT_ROOM",
    "PREFLIGHT_MARGIN",
    "RETRY_BASE_DELAY",
    "RETRY_MAX_DELAY",
    "Action",
    "Client",
    "Flow",
    "Outcome",
    "RecoveryPolicy",
    "Reply",
    "Send",
    "Sleep",
    "retry_delay",
    "useful_output_room",
]

# Output-cap errors answered by lowering max_tokens; two cover "stated cap, then a stricter
# one" (e.g. a proxy in front of the model); more means the provider is not converging.
MAX_OUTPUT_CAP_LOWERINGS = 2
# The least output room worth lowering max_tokens to instead of truncating history (see
# "Lowering max_tokens beats truncating" above and `useful_output_room`).
MIN_OUTPUT_ROOM = 1024
# The uncalibrated estimate (~4 chars/token) can be 10-20% off a real tokenizer; recovering
# pre-emptively from a near miss would drop history that fits. Only a clear excess counts.
PREFLIGHT_MARGIN = 0.10
# A calibrated prediction for the last allowed level within this fraction over the window is
# a near miss, still sent (see "the last level only when clear" above).
LAST_LEVEL_MARGIN = 0.15
# Microcompaction is on by default, with `MicrocompactConfig`'s defaults (a frozen value, so
# one shared instance is safe as a default argument).
_MICROCOMPACT_DEFAULTS = MicrocompactConfig()


@dataclass(frozen=True, slots=True, kw_only=True)
class Reply:
    """The answer to one `send()`.

    `message`: one assistant message (continuations stitched in). `usage`: summed over every
    provider call that reported usage. `events`: everything recovery did, in order.
    `truncated`: the answer is partial (escalations ran out, or a cut answer was returned).
    `view`: the working view the answer is based on. `calls`: provider calls made.
    """

    message: Message
    usage: Usage
    events: tuple[Event, ...]
    truncated: bool
    view: tuple[Message, ...]
    stop_reason: StopReason
    calls: int


@dataclass(frozen=True, slots=True, kw_only=True)
class Send:
    """Action: call the provider with `request`; answer with its Response or exception."""

    request: Request


@dataclass(frozen=True, slots=True, kw_only=True)
class Sleep:
    """Action: wait `seconds` before the next action; answer with None."""

    seconds: float


Action = Send | Sleep
Outcome = Response | Exception | None
Flow = Generator[Action, Outcome, Reply]


def useful_output_room(requested: int, limit: int) -> int:
    """The least room for the answer (tokens) that is worth lowering max_tokens to, rather than
    truncating history, when `requested` output tokens do not fit a `limit`-token window.

    A quarter of the request, at least `MIN_OUTPUT_ROOM`, at most the request itself; a
    request above the whole window counts as a request for the window.
    """
    wanted = min(requested, limit)
    return min(wanted, max(MIN_OUTPUT_ROOM, wanted // 4))


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryPolicy:
    """The settings of the recovery policy; `flow()` runs it for one send().

    `context_window` / `max_output_tokens`: the model's limits, None when unknown.
    `predictive=False` is the SPEC's plain ladder: no pre-flight, no calibration, no skips,
    every level sent in turn (the benchmark compares the two).
    `microcompact`: how old tool results are shrunk in every request's view (the first stage
    of the working view, see the module docstring); None turns microcompaction off.
    """

    config: RecoveryConfig = field(default_factory=RecoveryConfig)
    estimator: TokenEstimator = field(default_factory=TokenEstimator)
    context_window: int | None = None
    max_output_tokens: int | None = None
    max_retries: int = DEFAULT_MAX_RETRIES
    predictive: bool = True
    microcompact: MicrocompactConfig | None = _MICROCOMPACT_DEFAULTS

    def __post_init__(self) -> None:
        for name in ("context_window", "max_output_tokens"):
            value = getattr(self, name)
            if value is not None and (not isinstance(value, int) or value < 1):
                raise ConfigError(f"{name}={value!r} must be a positive integer or None")
        if not isinstance(self.max_retries, int) or self.max_retries < 0:
            raise ConfigError(f"max_retries={self.max_retries!r} must be an integer >= 0")

    def flow(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
        emit: Callable[[Event], None] = lambda event: None,
    ) -> Flow:
        """The generator for one send(); `emit` receives each event as it happens."""
        if max_tokens is not None and max_tokens < 1:
            raise ValueError(f"max_tokens must be positive, got {max_tokens}")
        return _Run(self, tuple(messages), max_tokens, tuple(tools), emit).steps()

    def apply_microcompaction(self, messages: Sequence[Message]) -> tuple[Message, ...]:
        """The first stage of every request's view: `messages` with old tool results shrunk
        (`chatcli.history.microcompact`), as they are when `microcompact` is None. Idempotent,
        so a flow given its output sends the view a flow given `messages` sends."""
        if self.microcompact is None:
            return tuple(messages)
        return microcompact(messages, self.microcompact).messages


class _Views:
    """The working view at each level, computed lazily once per send (see "cumulative")."""

    def __init__(self, transcript: tuple[Message, ...], policy: RecoveryPolicy) -> None:
        config = policy.config
        budgeted = enforce_tool_result_budget(
            policy.apply_microcompaction(transcript),
            per_result_chars=config.tool_result_max_chars,
            per_turn_chars=config.tool_result_budget_chars,
        )
        self._config = config
        self._results: list[TransformResult] = [repair_tool_pairing(budgeted.messages)]

    def at(self, level: int) -> TransformResult:
        while len(self._results) <= level:
            previous = self._results[-1].messages
            self._results.append(apply_recovery_level(previous, len(self._results), self._config))
        return self._results[level]


class _Run:
    """The state of one send(). Mutable, but private to the generator that owns it."""

    def __init__(
        self,
        policy: RecoveryPolicy,
        transcript: tuple[Message, ...],
        max_tokens: int | None,
        tools: tuple[ToolSpec, ...],
        emit: Callable[[Event], None],
    ) -> None:
        self.policy, self.config = policy, policy.config
        self.transcript, self.tools, self._emit = transcript, tools, emit
        self.views = _Views(transcript, policy)
        self.max_level = min(len(LEVEL_NAMES), policy.config.max_recovery_attempts)
        self.level = 0
        self.max_tokens = max_tokens
        self.cap, self.window = policy.max_output_tokens, policy.context_window
        self.estimator, self.calibrated = policy.estimator, False
        self.partial: Message | None = None  # the cut answer being continued
        self.partial_stop = StopReason.MAX_TOKENS  # what cut it
        self.fitted = False  # the current request was fitted from the provider's numbers
        self.escalations = self.continuations = 0
        self.retries = self.cap_lowerings = self.calls = 0
        self.usage = Usage()
        self.events: list[Event] = []
        self.attempts: list[str] = []

    def steps(self) -> Flow:
        if self.policy.predictive:
            self.preflight()
        for _ in range(self.call_limit()):
            request = self.request()
            outcome = yield Send(request=request)
            self.calls += 1
            step: Sleep | Reply | None
            if isinstance(outcome, Response):
                step = self.on_response(outcome, request)
            elif isinstance(outcome, Exception):
                step = self.on_error(outcome, request)
            else:
                raise TypeError(f"a Send is answered with a Response or exception, not {outcome!r}")
            if isinstance(step, Reply):
                return step
            if step is not None:
                yield step
        raise AssertionError("unreachable: every call consumes a bounded budget")

    def call_limit(self) -> int:
        """An upper bound on provider calls: each outcome that is not a retry uses a level, an
        escalation, a cap lowering or a fit (one per level or answer received, + 1), or ends
        the run; at most `max_retries` retries come between two such outcomes."""
        changes = self.max_level + self.config.max_token_escalations  # each a new request
        fits = changes + 1  # at most one per request
        outcomes = changes + MAX_OUTPUT_CAP_LOWERINGS + fits + 1  # + 1: the one that ends it
        return outcomes * (self.policy.max_retries + 1)

    def emit(self, event: Event) -> None:
        self.events.append(event)
        self._emit(event)

    # -- requests -------------------------------------------------------------------------

    def request_messages(self, level: int) -> tuple[Message, ...]:
        view = self.views.at(level).messages
        return view if self.partial is None else continuation_request_messages(view, self.partial)

    def request(self) -> Request:
        messages = self.request_messages(self.level)
        return Request(messages=messages, max_tokens=self.max_tokens, tools=self.tools)

    def finish(self, message: Message, stop_reason: StopReason, *, truncated: bool) -> Reply:
        return Reply(
            message=message,
            usage=self.usage,
            events=tuple(self.events),
            truncated=truncated,
            view=self.views.at(self.level).messages,
            stop_reason=stop_reason,
            calls=self.calls,
        )

    # -- outcomes -------------------------------------------------------------------------

    def on_response(self, response: Response, request: Request) -> Reply | None:
        self.usage += response.usage
        self.retries = 0
        self.fitted = False
        message = self.runnable(response)
        if response.stop_reason is StopReason.CONTEXT_WINDOW:
            return self.on_window_filled(message, _window_stop_info(response), request)
        if response.stop_reason is StopReason.MAX_TOKENS:
            return self.on_cut(message, response.usage.output_tokens)
        if self.partial is not None:
            message = stitch(self.partial, message)
        if response.stop_reason is StopReason.TOOL_USE and not message.tool_calls:
            # It stopped to call tools and holds none (each was dropped as cut off): the
            # answer is incomplete, and "tool_use" with no call leaves a caller waiting.
            return self.finish(message, StopReason.MAX_TOKENS, truncated=True)
        return self.finish(message, response.stop_reason, truncated=False)

    def runnable(self, response: Response) -> Message:
        """The answer without the tool calls that must never run: the ones the adapter saw
        were cut or unparseable, and, in an answer cut off (max_tokens, or the window filled
        up), its last call even when its arguments happen to parse (`mark_cut_tool_call`)."""
        marked = mark_cut_tool_call(response.message, response.stop_reason)
        message, dropped = drop_incomplete_tool_calls(marked)
        if dropped:
            self.emit(ToolCallsDropped(names=tuple(call.name for call in dropped)))
        return message

    def on_error(self, error: Exception, request: Request) -> Sleep | Reply | None:
        info = error.info if isinstance(error, ProviderError) else classify_error(error)
        if info.kind in RETRYABLE:
            return self.retry(info, error)
        if info.kind is ErrorKind.CONTEXT_OVERFLOW:
            if (silent := _silent_truncation(info)) is not None:
                self.emit(silent)  # the issue asks for an event saying so, before recovery
            return self.on_overflow(info, request, cause=error)
        if info.kind is ErrorKind.OUTPUT_CAP:
            self.lower_output_cap(info, error)
            return None
        _reraise(info, error)

    def retry(self, info: ErrorInfo, error: Exception) -> Sleep:
        delay = retry_delay(self.retries + 1, info.retry_after)
        if self.retries >= self.policy.max_retries or delay is None:
            _reraise(info, error)
        self.retries += 1
        self.emit(Retried(kind=info.kind, attempt=self.retries, delay=delay))
        return Sleep(seconds=delay)

    def lower_output_cap(self, info: ErrorInfo, error: Exception) -> None:
        new = info.output_limit if info.output_limit is not None else self.cap
        old = self.max_tokens
        if new is None or (old is not None and new >= old):
            _reraise(info, error)  # no lower limit to try
        if self.cap_lowerings >= MAX_OUTPUT_CAP_LOWERINGS:
            _reraise(info, error)
        self.cap_lowerings += 1
        self.cap = self.max_tokens = new
        self.emit(OutputCapLowered(old=old, new=new))

    def on_cut(self, message: Message, produced: int) -> Reply | None:
        """The answer stopped at max_tokens after `produced` output tokens (its cut call
        already dropped): keep it, and continue it, or return it when it holds complete calls
        for the caller to run."""
        self.keep(message, StopReason.MAX_TOKENS)
        assert self.partial is not None  # for the type checker: just kept
        if self.partial.tool_calls or self.escalations >= self.config.max_token_escalations:
            return self.finish(self.partial, StopReason.MAX_TOKENS, truncated=True)
        self.escalations += 1
        if not self.continuation_fits():
            return self.give_up(_continuation_overflow(self.window), cause=None)
        self.escalate(produced)
        self.continue_partial()
        return None

    def on_window_filled(self, message: Message, info: ErrorInfo, request: Request) -> Reply | None:
        """The window filled up while the model was answering (`context_window` stop): the
        answer is cut, as at max_tokens, and paid for, so it is kept. A higher limit cannot
        help; the view is recovered and the answer continued, or, when recovery runs out,
        returned truncated (`give_up`). Complete calls are returned to run, as in `on_cut`."""
        if message.text or message.tool_calls:
            self.keep(message, StopReason.CONTEXT_WINDOW)
        if self.partial is not None and self.partial.tool_calls:
            return self.finish(self.partial, StopReason.CONTEXT_WINDOW, truncated=True)
        outcome = self.on_overflow(info, request, cause=None)
        if outcome is None and self.partial is not None:
            self.continue_partial()
        return outcome

    def keep(self, message: Message, stop_reason: StopReason) -> None:
        """Keep a cut answer as the partial (stitched to the one before it)."""
        self.partial = message if self.partial is None else stitch(self.partial, message)
        self.partial_stop = stop_reason

    def continue_partial(self) -> None:
        self.continuations += 1
        self.emit(Continued(attempt=self.continuations, max_tokens=self.max_tokens))

    def continuation_fits(self) -> bool:
        """Before a continuation (it carries the partial answer, so it is larger than the
        request that was cut): if it is predicted not to fit at the current limit, recovery
        shortens the view first, as in pre-flight. False: no level is predicted to fit."""
        if not self.policy.predictive or self.window is None:
            return True
        estimate = self.estimator.count(self.request_messages(self.level))
        return self.fits(estimate) or self.shorten_before_sending(estimate)

    def escalate(self, produced: int) -> None:
        """Raise max_tokens for a continuation: doubled up to the cap, and no higher than the
        room the window is predicted to leave (a limit above it is certain to be rejected).
        Never lowered: a room not above the current limit means no escalation. With no limit
        set, the one the provider applied is the `produced` tokens the cut answer holds."""
        raised = next_max_tokens(self.max_tokens, cap=self.cap, produced=produced)
        room = self.predicted_room()
        if raised is not None and room is not None:
            raised = min(raised, room)
        current = self.max_tokens if self.max_tokens is not None else produced
        if raised is not None and raised > current:
            self.emit(Escalated(attempt=self.escalations, old=self.max_tokens, new=raised))
            self.max_tokens = raised

    def predicted_room(self) -> int | None:
        """The output room the window leaves next to the request at the current level, as
        the calibrated estimate predicts it; None when the window is unknown or the estimate
        uncalibrated (a guess would hold back an escalation the provider would accept)."""
        if not self.calibrated or self.window is None:
            return None
        return self.window - self.estimator.count(self.request_messages(self.level))

    # -- context recovery -----------------------------------------------------------------

    def preflight(self) -> None:
        if self.cap is not None and self.max_tokens is not None and self.max_tokens > self.cap:
            self.emit(OutputCapLowered(old=self.max_tokens, new=self.cap))
            self.max_tokens = self.cap
        if self.window is None or self.max_level == 0:
            return
        estimate = self.estimator.count(self.request_messages(0))
        if not (self.fits(estimate) or self.fit_estimated(estimate)):
            self.shorten_before_sending(estimate)

    def shorten_before_sending(self, estimate: int) -> bool:
        """The next request is predicted not to fit (`estimate` tokens of prompt): apply the
        first level predicted to fit, without a call. False when none is: only a calibrated
        prediction says so (an uncalibrated one is a guess, and the provider is asked)."""
        assert self.window is not None  # for the type checker: callers checked it
        reserve = self.reserve()
        self.emit(PreflightRecovery(estimate=estimate, reserve=reserve, window=self.window))
        level = self.next_level()
        if level is not None:
            self.apply_level(level, preflight=True)
        return level is not None or not self.calibrated

    def fit_estimated(self, estimate: int) -> bool:
        """Pre-flight: the prompt fits but the output asked for does not. The estimate is a
        guess, so the room it leaves is measured with `PREFLIGHT_MARGIN` added to it; if the
        guess is still short, the provider's numbers fit it exactly after one call."""
        if self.window is None:
            return False
        return self.fit_output(
            prompt=estimate,
            limit=self.window,
            requested=self.reserve(),
            margin=PREFLIGHT_MARGIN,
            estimated=True,
        )

    def on_overflow(
        self, info: ErrorInfo, request: Request, cause: Exception | None
    ) -> Reply | None:
        prompt = _stated_prompt_tokens(info, request.max_tokens)
        detected = OverflowDetected(
            info=info, prompt_tokens=prompt, limit=info.limit, max_tokens=info.max_tokens
        )
        self.emit(detected)
        if self.policy.predictive:
            self.learn(prompt, info.limit, request)
        if self.fit_stated(info, prompt, request):
            return None
        level = self.next_level()
        if level is None:
            return self.give_up(info, cause)
        self.apply_level(level)
        return None

    def fit_stated(self, info: ErrorInfo, prompt: int | None, request: Request) -> bool:
        """Fit max_tokens to the room the provider's numbers leave, once per request."""
        requested = info.max_tokens if info.max_tokens is not None else request.max_tokens
        if self.fitted or prompt is None or info.limit is None or requested is None:
            return False
        self.fitted = self.fit_output(prompt=prompt, limit=info.limit, requested=requested)
        return self.fitted

    def fit_output(
        self,
        *,
        prompt: int,
        limit: int,
        requested: int,
        margin: float = 0.0,
        estimated: bool = False,
    ) -> bool:
        """Lower max_tokens to the room `prompt` (grown by `margin`) leaves in the window,
        when that room is useful; False when it is not, or the output was not the problem."""
        room = limit - math.ceil(prompt * (1.0 + margin))
        if room >= requested or room < useful_output_room(requested, limit):
            return False
        fitted = MaxTokensFitted(
            old=self.max_tokens, new=room, prompt_tokens=prompt, limit=limit, estimated=estimated
        )
        self.emit(fitted)
        self.max_tokens = room
        return True

    def learn(self, prompt: int | None, limit: int | None, request: Request) -> None:
        """Take the provider's numbers: its limit is the window, its count calibrates."""
        if limit is not None:
            self.window = limit
        if prompt is not None:
            self.estimator = self.estimator.calibrated(request.messages, prompt)
            self.calibrated = True

    def reserve(self) -> int:
        """The output tokens a prediction counts next to the prompt: max_tokens, or, with
        none set, the model's cap no higher than `DEFAULT_MAX_TOKENS` (see "The output
        reserve" above); 0 when the cap is unknown too."""
        if self.max_tokens is not None:
            return self.max_tokens
        return 0 if self.cap is None else min(self.cap, DEFAULT_MAX_TOKENS)

    def fits(self, predicted: int) -> bool:
        """`predicted` prompt tokens plus the output asked for fit the window (uncalibrated:
        unless clearly over it, by more than `PREFLIGHT_MARGIN`)."""
        if self.window is None:
            return True
        margin = 1.0 if self.calibrated else 1.0 + PREFLIGHT_MARGIN
        return predicted + self.reserve() <= self.window * margin

    def next_level(self) -> int | None:
        """The next level worth sending, emitting a `LevelSkipped` for each one passed over."""
        for level in range(self.level + 1, self.max_level + 1):  # bounded: the allowed levels
            if self.policy.predictive and self.unchanged(level):
                self.skip(LevelSkipped(level=level, name=LEVEL_NAMES[level], unchanged=True))
            elif self.worth_sending(level):
                return level
        return None

    def unchanged(self, level: int) -> bool:
        """`level` leaves the view as it is now (the one just rejected, or predicted not to
        fit before sending): e.g. level 1 on plain chat, level 2 on a short history."""
        return self.views.at(level).messages == self.views.at(self.level).messages

    def worth_sending(self, level: int) -> bool:
        """`level` is worth a call: nothing predicts that its view misses the window (when
        something does, a `LevelSkipped` says so)."""
        if not self.policy.predictive or self.window is None:
            return True
        predicted = self.estimator.count(self.request_messages(level))
        if self.fits(predicted) or self.leaves_room(predicted):
            return True
        if level == self.max_level and self.near_miss(predicted):
            return True  # the last chance: refusing it fails the request
        reserve, window = self.reserve(), self.window
        name = LEVEL_NAMES[level]
        self.skip(
            LevelSkipped(
                level=level, name=name, predicted_tokens=predicted, reserve=reserve, limit=window
            )
        )
        return False

    def near_miss(self, predicted: int) -> bool:
        """The last level is worth a call: uncalibrated (a guess), or calibrated and over the
        window by no more than `LAST_LEVEL_MARGIN`."""
        if not self.calibrated or self.window is None:
            return True
        return predicted + self.reserve() <= self.window * (1.0 + LAST_LEVEL_MARGIN)

    def skip(self, event: LevelSkipped) -> None:
        self.emit(event)
        self.attempts.append(event.describe())

    def leaves_room(self, predicted: int) -> bool:
        """A calibrated prediction that the view fits with a useful room for the answer, if
        not all that was asked: the level is sent with max_tokens fitted (`fit_level`)."""
        if not self.calibrated or self.window is None:
            return False
        return self.window - predicted >= useful_output_room(self.reserve(), self.window)

    def fit_level(self, level: int) -> None:
        """After a level: a calibrated prediction that the output asked for does not fit next
        to its view lowers max_tokens to the room left, instead of a rejected call."""
        if not self.calibrated or self.window is None:
            return
        predicted = self.estimator.count(self.request_messages(level))
        limit, requested = self.window, self.reserve()
        self.fit_output(prompt=predicted, limit=limit, requested=requested, estimated=True)

    def apply_level(self, level: int, *, preflight: bool = False) -> None:
        self.level, self.fitted = level, False
        result = self.views.at(level)
        notices, synthetic = _added_messages(self.transcript, result.messages)
        event = LevelApplied(
            level=level,
            name=LEVEL_NAMES[level],
            report=result.report,
            kept=len(result.messages) - notices - synthetic,
            total=len(self.transcript),
            chars_freed=total_chars(self.transcript) - total_chars(result.messages),
            added=_added_phrases(notices, synthetic),
            preflight=preflight,
        )
        self.emit(event)
        self.attempts.append(event.action())
        self.fit_level(level)

    def give_up(self, info: ErrorInfo, cause: Exception | None) -> Reply:
        attempts = tuple(self.attempts)
        self.emit(RecoveryFailed(attempts=attempts, info=info))
        if self.partial is not None and self.partial.text:
            return self.finish(self.partial, self.partial_stop, truncated=True)
        tried = f"after {len(attempts)} recovery step(s)" if attempts else "recovery is disabled"
        message = f"the conversation does not fit the context window ({tried}): {info.message}"
        # An overflow known from a stop reason or a prediction has no provider exception:
        # the chain still ends in the ProviderError that states what was known.
        raise ContextRecoveryError(message, info=info, attempts=attempts) from (
            cause if cause is not None else ProviderError(info)
        )


def _added_messages(transcript: tuple[Message, ...], view: tuple[Message, ...]) -> tuple[int, int]:
    """(compaction notices, synthetic results for interrupted calls) in `view` that chatcli
    made: the transcript does not hold them. Only an error result equal to the one pairing
    repair makes for its call is looked up in the transcript (a linear `in`); those are few."""
    notices = max(0, _notices(view) - _notices(transcript))
    errors = [m for m in view if m.tool_result is not None and m.tool_result.is_error]
    calls = {call.id: call for m in view for call in m.tool_calls} if errors else {}
    synthetic = 0
    for message in errors:
        call = calls.get(message.tool_result.call_id) if message.tool_result else None
        if call is not None and interrupted_result(call) == message and message not in transcript:
            synthetic += 1
    return notices, synthetic


def _notices(messages: Sequence[Message]) -> int:
    return sum(1 for m in messages if m.role is Role.SYSTEM and m.text == COMPACTION_NOTICE)


def _added_phrases(notices: int, synthetic: int) -> tuple[str, ...]:
    phrases = ["the compaction notice"] if notices else []
    if synthetic == 1:
        phrases.append("a result for an interrupted tool call")
    elif synthetic:
        phrases.append(f"{synthetic} results for interrupted tool calls")
    return tuple(phrases)


def _stated_prompt_tokens(info: ErrorInfo, sent_max_tokens: int | None) -> int | None:
    """The prompt size the provider states, directly or as requested minus output."""
    if info.prompt_tokens is not None:
        return info.prompt_tokens
    output = info.max_tokens if info.max_tokens is not None else sent_max_tokens
    if info.requested_tokens is None or output is None:
        return None
    return info.requested_tokens - output if info.requested_tokens > output else None


def _silent_truncation(info: ErrorInfo) -> SilentTruncationDetected | None:
    """The event for an overflow an adapter detected itself because the server cut the prompt
    silently (its usage gave it away: `ErrorInfo.reason` is `SILENT_TRUNCATION`), else None."""
    if info.kind is not ErrorKind.CONTEXT_OVERFLOW or info.reason != SILENT_TRUNCATION:
        return None
    return SilentTruncationDetected(expected_tokens=info.prompt_tokens, detail=info.message)


def _continuation_overflow(window: int | None) -> ErrorInfo:
    """What a continuation that no level is predicted to fit is given up with (no call)."""
    message = "the continuation of the cut answer is predicted not to fit the context window"
    return ErrorInfo(kind=ErrorKind.CONTEXT_OVERFLOW, message=message, limit=window)


def _window_stop_info(response: Response) -> ErrorInfo:
    """The `context_window` stop reason (Anthropic/Bedrock `model_context_window_exceeded`):
    the window filled up while answering. The prompt size it reports calibrates the estimate."""
    prompt = response.usage.prompt_tokens
    return ErrorInfo(
        kind=ErrorKind.CONTEXT_OVERFLOW,
        message="the context window filled up while the model was answering",
        prompt_tokens=prompt or None,
    )


def _reraise(info: ErrorInfo, error: Exception) -> NoReturn:
    if isinstance(error, ProviderError):
        raise error
    raise ProviderError(info) from error


class Client:
    """Sends conversations to a provider and recovers them (see the module docstring).

    `hooks` receive every event as it happens (events are also logged under "chatcli").
    `sleep` / `asleep` wait before retries (injected so tests need not wait).
    `context_window` / `max_output_tokens` default to the provider's attributes of those names.
    `microcompact`: microcompaction of old tool results in every request's view, with
    `MicrocompactConfig`'s defaults unless given (`MicrocompactConfig.from_env()` reads its
    settings from the environment); None turns it off. The caller's messages keep them whole
    either way.
    """

    def __init__(
        self,
        provider: Provider,
        config: RecoveryConfig | None = None,
        *,
        hooks: Sequence[Hook] = (),
        estimator: TokenEstimator | None = None,
        sleep: Callable[[float], Any] = time.sleep,
        asleep: Callable[[float], Awaitable[Any]] = asyncio.sleep,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        max_retries: int = DEFAULT_MAX_RETRIES,
        predictive: bool = True,
        microcompact: MicrocompactConfig | None = _MICROCOMPACT_DEFAULTS,
    ) -> None:
        self.provider = provider
        self.policy = RecoveryPolicy(
            config=config if config is not None else RecoveryConfig(),
            estimator=estimator if estimator is not None else TokenEstimator(),
            context_window=_declared(provider, "context_window", context_window),
            max_output_tokens=_declared(provider, "max_output_tokens", max_output_tokens),
            max_retries=max_retries,
            predictive=predictive,
            microcompact=microcompact,
        )
        self.hooks = tuple(hooks)
        self._sleep, self._asleep = sleep, asleep

    def send(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> Reply:
        """Send `messages`, recovering as needed; the caller's messages are never changed."""
        flow = self.policy.flow(messages, max_tokens=max_tokens, tools=tools, emit=self._emit)
        step = _advance(flow, None)
        while not isinstance(step, Reply):  # bounded by the policy's call limit
            step = _advance(flow, self._perform(step))
        return step

    async def asend(
        self,
        messages: Sequence[Message],
        *,
        max_tokens: int | None = None,
        tools: Sequence[ToolSpec] = (),
    ) -> Reply:
        """The async `send`: the same policy, awaiting the provider and the sleeps."""
        flow = self.policy.flow(messages, max_tokens=max_tokens, tools=tools, emit=self._emit)
        step = _advance(flow, None)
        while not isinstance(step, Reply):  # bounded by the policy's call limit
            step = _advance(flow, await self._aperform(step))
        return step

    def compact(
        self,
        messages: Sequence[Message],
        *,
        focus: str | None = None,
        max_tokens: int | None = None,
        config: CompactionConfig | None = None,
        summarizer: Provider | None = None,
    ) -> CompactionResult:
        """/compact: the working view with the middle of `messages` replaced by a verified
        summary (`chatcli.compaction`). Raises `CompactionError`, with nothing changed, when no
        valid summary could be made; `messages` are never changed either way."""
        args = self._compaction_args(focus, max_tokens, config, summarizer)
        return compact(self.provider, messages, sleep=self._sleep, **args)

    async def acompact(
        self,
        messages: Sequence[Message],
        *,
        focus: str | None = None,
        max_tokens: int | None = None,
        config: CompactionConfig | None = None,
        summarizer: Provider | None = None,
    ) -> CompactionResult:
        """The async `compact`."""
        args = self._compaction_args(focus, max_tokens, config, summarizer)
        return await acompact(self.provider, messages, asleep=self._asleep, **args)

    def _compaction_args(
        self,
        focus: str | None,
        max_tokens: int | None,
        config: CompactionConfig | None,
        summarizer: Provider | None,
    ) -> dict[str, Any]:
        return {
            "focus": focus,
            "config": config,
            "estimator": self.policy.estimator,
            "window": self.policy.context_window,
            "output_reserve": max_tokens or 0,
            "summarizer": summarizer,
            "recovery_config": self.policy.config,
        }

    def _perform(self, action: Action) -> Outcome:
        """Do what the policy asked; a provider's exception is its outcome, not raised here
        (the policy classifies it and re-raises what it cannot recover)."""
        if isinstance(action, Sleep):
            self._sleep(action.seconds)
            return None
        try:
            return self.provider.complete(action.request)
        except Exception as exc:
            return exc

    async def _aperform(self, action: Action) -> Outcome:
        """The async `_perform`."""
        if isinstance(action, Sleep):
            await self._asleep(action.seconds)
            return None
        try:
            return await self.provider.acomplete(action.request)
        except Exception as exc:
            return exc

    def _emit(self, event: Event) -> None:
        logger.log(event.log_level, "%s", event.describe(), extra={"chatcli_event": event})
        for hook in self.hooks:
            hook(event)


def _advance(flow: Flow, outcome: Outcome) -> Action | Reply:
    """Answer the flow's last action with `outcome`: its next action, or its Reply."""
    try:
        return flow.send(outcome)
    except StopIteration as done:
        reply: Reply = done.value
        return reply


def _declared(provider: Provider, name: str, given: int | None) -> int | None:
    if given is not None:
        return given
    value = getattr(provider, name, None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None

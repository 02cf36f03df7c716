"""One send(): the policy's generator, answering the outcome of each provider call.

It wires the parts together — `Prediction` (what fits), `Ladder` (which view), `PartialAnswer`
(the answer being continued) — and decides what each outcome leads to: a retry, a fitted
max_tokens, a recovery level, a continuation, the Reply, or the error (see
docs/design/recovery.md for the order and the decisions).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import replace
from typing import NoReturn

from chatcli.continuation import drop_incomplete_tool_calls, mark_cut_tool_call
from chatcli.errors import (
    SILENT_TRUNCATION,
    ContextRecoveryError,
    ErrorInfo,
    ErrorKind,
    ProviderError,
    classify_error,
)
from chatcli.events import (
    CompactionPaused,
    Event,
    OverflowDetected,
    RecoveryFailed,
    Retried,
    SilentTruncationDetected,
    ToolCallsDropped,
)
from chatcli.history.truncate import Number
from chatcli.messages import Message, StopReason, Usage
from chatcli.policy.actions import Flow, Reply, Send, Sleep
from chatcli.policy.journal import Journal
from chatcli.policy.ladder import Ladder
from chatcli.policy.partial import PartialAnswer
from chatcli.policy.prediction import Prediction
from chatcli.policy.retry import RETRYABLE, never_answered, retry_delay
from chatcli.policy.values import PolicyValues
from chatcli.providers.base import Request, Response, ToolSpec
from chatcli.request_settings import Settings

__all__ = ["MAX_OUTPUT_CAP_LOWERINGS", "RECOVERY_ADVICE", "Run"]

# Output-cap errors answered by lowering max_tokens; two cover "stated cap, then a stricter
# one" (e.g. a proxy in front of the model); more means the provider is not converging.
MAX_OUTPUT_CAP_LOWERINGS = 2
# What a user can do when even the system messages and a cut latest request do not fit.
RECOVERY_ADVICE = (
    "To go on: /clear the conversation, declare a larger --context-window, "
    "or shorten the system prompt."
)

DROPPED_TURN_ADVICE = (
    "The server stated no window, so no recovery level can help. To go on: declare the "
    "server's window (--context-window), or check that its chat template keeps every message "
    "(some drop tool results)."
)


class Run:
    """The state of one send(). Mutable, but private to the generator that owns it."""

    def __init__(
        self,
        policy: PolicyValues,
        transcript: tuple[Message, ...],
        max_tokens: int | None,
        tools: tuple[ToolSpec, ...],
        emit: Callable[[Event], None],
        settings: Settings,
        numbering: Number | None = None,
    ) -> None:
        self.policy, self.tools, self.settings = policy, tools, settings
        self.journal = journal = Journal(emit)
        self.prediction = Prediction(
            journal,
            window=policy.context_window,
            cap=policy.max_output_tokens,
            max_tokens=max_tokens,
            estimator=policy.estimator,
            settings=settings,
            memos=policy.memos,
            tools=tools,
        )
        self.answer = PartialAnswer(journal, max_escalations=policy.config.max_token_escalations)
        self.ladder = Ladder(transcript, policy, self.prediction, self.answer, journal, numbering)
        self.retries = self.cap_lowerings = self.calls = 0
        self.resent = False  # the last request was sent again at once (`never_answered`)
        self.usage = Usage()
        self.final_usage: Usage | None = None  # the last answered call's

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
        the run; at most `max_retries` retries, and one re-send of a request no server
        answered, come between two such outcomes."""
        changes = self.ladder.max_steps + self.answer.max_escalations  # each a new request
        fits = changes + 1  # at most one per request
        outcomes = changes + MAX_OUTPUT_CAP_LOWERINGS + fits + 1  # + 1: the one that ends it
        return outcomes * (self.policy.max_retries + 2)

    def request(self) -> Request:
        messages = self.ladder.request_messages()
        max_tokens = self.prediction.max_tokens
        return Request(
            messages=messages,
            max_tokens=max_tokens,
            tools=self.tools,
            settings=self.sent_settings(),
        )

    def sent_settings(self) -> Settings:
        """The caller's settings; a continuation's without `response_format`: a structured-
        output constraint applies to a whole answer, and would make the model start a new JSON
        document instead of resuming the one it was cut in (`finish` checks the result)."""
        if self.answer.message is None or self.settings.response_format is None:
            return self.settings
        return replace(self.settings, response_format=None)

    def finish(self, message: Message, stop_reason: StopReason, *, truncated: bool) -> Reply:
        if not truncated and self.answer.continuations and not _parses_as_asked(message, self):
            truncated = True  # stitched, but not the JSON document asked for: say it is partial
        return Reply(
            message=message,
            usage=self.usage,
            events=tuple(self.journal.events),
            truncated=truncated,
            view=self.ladder.view,
            stop_reason=stop_reason,
            calls=self.calls,
            final_usage=self.final_usage,
        )

    def preflight(self) -> None:
        self.prediction.lower_to_cap()
        if self.prediction.window is None or self.ladder.max_level == 0:
            return
        estimate = self.ladder.predicted(0)
        if not (self.prediction.fits(estimate) or self.prediction.fit_estimated(estimate)):
            self.ladder.shorten_before_sending(estimate)

    # -- answers --------------------------------------------------------------------------

    def on_response(self, response: Response, request: Request) -> Reply | None:
        self.usage += response.usage
        self.final_usage = response.usage
        self.retries, self.resent = 0, False
        self.prediction.fitted = False
        message = self.runnable(response)
        if response.stop_reason is StopReason.CONTEXT_WINDOW:
            answered = response.usage.output_tokens or None  # 0: not reported
            return self.on_window_filled(message, _window_stop_info(response), request, answered)
        if response.stop_reason is StopReason.MAX_TOKENS:
            return self.on_cut(message, response.usage.output_tokens)
        message = self.answer.stitched(message)
        if response.stop_reason is StopReason.COMPACTION:
            self.journal.emit(CompactionPaused())
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
            self.journal.emit(ToolCallsDropped(names=tuple(call.name for call in dropped)))
        return message

    def on_cut(self, message: Message, produced: int) -> Reply | None:
        """The answer stopped at max_tokens after `produced` output tokens (its cut call
        already dropped): keep it, and continue it, or return it when it holds complete calls
        for the caller to run."""
        partial = self.answer.keep(message, StopReason.MAX_TOKENS)
        if partial.tool_calls or not self.answer.may_escalate():
            return self.finish(partial, StopReason.MAX_TOKENS, truncated=True)
        if not self.continuation_fits():
            return self.give_up(_continuation_overflow(self.prediction.window), cause=None)
        room = self.prediction.room(self.ladder.request_messages())
        self.answer.escalate(self.prediction, produced, room)
        self.answer.continue_(self.prediction.max_tokens)
        return None

    def on_window_filled(
        self, message: Message, info: ErrorInfo, request: Request, answered: int | None
    ) -> Reply | None:
        """The window filled up while the model was answering (`context_window` stop) after
        `answered` output tokens: the answer is cut, as at max_tokens, and paid for, so it is
        kept. A higher limit cannot help; the view is recovered and the answer continued, or,
        when recovery runs out, returned truncated (`give_up`). Complete calls are returned to
        run, as in `on_cut`."""
        if message.text or message.tool_calls:
            self.answer.keep(message, StopReason.CONTEXT_WINDOW)
        partial = self.answer.message
        if partial is not None and partial.tool_calls:
            return self.finish(partial, StopReason.CONTEXT_WINDOW, truncated=True)
        outcome = self.on_overflow(info, request, None, answering=True, answered=answered)
        if outcome is None and self.answer.message is not None:
            self.answer.continue_(self.prediction.max_tokens)
        return outcome

    def continuation_fits(self) -> bool:
        """Before a continuation (it carries the partial answer, so it is larger than the
        request that was cut): if it is predicted not to fit at the current limit, recovery
        shortens the view first, as in pre-flight. False: no level is predicted to fit."""
        if not self.policy.predictive or self.prediction.window is None:
            return True
        estimate = self.ladder.predicted()
        return self.prediction.fits(estimate) or self.ladder.shorten_before_sending(estimate)

    # -- errors ---------------------------------------------------------------------------

    def on_error(self, error: Exception, request: Request) -> Sleep | Reply | None:
        info = error.info if isinstance(error, ProviderError) else classify_error(error)
        if info.kind in RETRYABLE:
            return self.retry(info, error)
        if info.kind is ErrorKind.CONTEXT_OVERFLOW:
            if (silent := _silent_truncation(info)) is not None:
                self.journal.emit(silent)  # before the recovery it leads to
                if info.limit is None:
                    # The server dropped the turn after the model's last answer and stated no
                    # window: no level sends that turn in a form it would keep.
                    return self.give_up(info, cause=error, advice=DROPPED_TURN_ADVICE)
            return self.on_overflow(info, request, cause=error)
        if info.kind is ErrorKind.OUTPUT_CAP:
            self.lower_output_cap(info, error)
            return None
        _reraise(info, error)

    def retry(self, info: ErrorInfo, error: Exception) -> Sleep:
        if never_answered(error) and not self.resent:  # sent again at once, once
            self.resent = True
            self.journal.emit(Retried(kind=info.kind, attempt=self.retries + 1, delay=0.0))
            return Sleep(seconds=0.0)
        delay = retry_delay(self.retries + 1, info.retry_after)
        if self.retries >= self.policy.max_retries or delay is None:
            _reraise(info, error)
        self.retries += 1
        attempt = self.retries + self.resent  # a re-send at once counts as an attempt
        self.journal.emit(Retried(kind=info.kind, attempt=attempt, delay=delay))
        return Sleep(seconds=delay)

    def lower_output_cap(self, info: ErrorInfo, error: Exception) -> None:
        if self.cap_lowerings >= MAX_OUTPUT_CAP_LOWERINGS:
            _reraise(info, error)
        if not self.prediction.lower_output_cap(info):
            _reraise(info, error)  # no lower limit to try
        self.cap_lowerings += 1

    def on_overflow(
        self,
        info: ErrorInfo,
        request: Request,
        cause: Exception | None,
        *,
        answering: bool = False,
        answered: int | None = None,
    ) -> Reply | None:
        """`request` overflowed (`answering`: filled the window while answering, after
        `answered` output tokens): fit max_tokens to the room the provider states, or apply
        the next level, or give up. The event names the window known before when the provider
        states none."""
        prompt = _stated_prompt_tokens(info, request.max_tokens)
        detected = OverflowDetected(
            info=info,
            prompt_tokens=prompt,
            limit=info.limit if info.limit is not None else self.prediction.window,
            max_tokens=answered if answering else info.max_tokens,
            while_answering=answering,
        )
        self.journal.emit(detected)
        predict = self.policy.predictive
        self.prediction.learn(prompt, info.limit, request.messages, predict=predict)
        if self.prediction.fit_stated(info, prompt, request.max_tokens):
            return None
        level = self.ladder.next_level()
        if level is None:
            return self.give_up(info, cause)
        self.ladder.apply(level)
        return None

    def give_up(
        self, info: ErrorInfo, cause: Exception | None, *, advice: str = RECOVERY_ADVICE
    ) -> Reply:
        attempts = tuple(self.journal.attempts)
        self.journal.emit(RecoveryFailed(attempts=attempts, info=info))
        partial = self.answer.message
        if partial is not None and partial.text:
            return self.finish(partial, self.answer.stop, truncated=True)
        tried = f"after {len(attempts)} recovery step(s)"
        if not attempts:
            tried = "recovery is disabled" if self.ladder.max_level == 0 else "no step could help"
        message = (
            f"the conversation does not fit the context window ({tried}): {info.message}. {advice}"
        )
        # An overflow known from a stop reason or a prediction has no provider exception:
        # the chain still ends in the ProviderError that states what was known.
        raise ContextRecoveryError(message, info=info, attempts=attempts) from (
            cause if cause is not None else ProviderError(info)
        )


def _parses_as_asked(message: Message, run: Run) -> bool:
    """A structured answer (`response_format` set) is one JSON document; anything else passes."""
    if run.settings.response_format is None:
        return True
    try:
        json.loads(message.text)
    except ValueError:
        return False
    return True


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

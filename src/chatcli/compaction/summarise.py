"""The summary calls: one summary of the middle, whatever its size, each call retried when it
failed for a transient reason.

- **The summary call never overflows.** A middle larger than the summariser's window is
  summarised in chunks, then the summaries are merged, at most `MAX_MERGE_LEVELS` levels.
  When the window is unknown or the estimate was wrong and a summary call overflows anyway
  (`SummaryOverflow`), `replanned` gives the plan the window and the token ratio the error
  states, so the chunking can be planned once more.
- **Transient failures are asked again.** A summary call that fails with a rate limit or a
  transient error (5xx, timeout, connection reset) is sent again after the wait
  `chatcli.policy.retry.retry_delay` gives (the provider's Retry-After when it is at most
  `RETRY_MAX_DELAY`, else exponential backoff), at most `MAX_SUMMARY_RETRIES` times; only
  then does it fail the compaction, as `CompactionError` chained to the provider's error.
  The wait is the driver's (`chatcli.compaction.drive`), so it is injected.
- **Structured where the server can.** With `Plan.structured`, a summary is asked for as a
  JSON object of the sections (`chatcli.compaction.prompt.summary_schema`) and rendered back
  to Markdown; a server that refuses the schema (an invalid-request error) is asked again
  with the plain prompt, and so is every later call of the compaction.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from chatcli.compaction.drive import Call, Steps
from chatcli.compaction.plan import Plan, chunk_capacity, chunks, summary_tokens
from chatcli.compaction.prompt import structured_summary, summary_request
from chatcli.errors import (
    CannotSummarise,
    CompactionError,
    ErrorInfo,
    ErrorKind,
    ProviderError,
    classify_error,
)
from chatcli.policy.retry import DEFAULT_MAX_RETRIES, RETRYABLE, retry_delay
from chatcli.providers.base import Request, Response

__all__ = [
    "MAX_MERGE_LEVELS",
    "MAX_SUMMARY_RETRIES",
    "SummaryOverflow",
    "ask",
    "refused",
    "replanned",
    "summarise",
]

# Levels of "summarise the summaries" before giving up; each level divides the text by the
# chunk capacity over the summary size (at least 3 with the window split of
# `chatcli.compaction.plan`), so three levels cover a middle dozens of windows long.
MAX_MERGE_LEVELS = 3
# Times one summary call is sent again after a rate limit or a transient error: the same
# number the recovery loop allows a chat call.
MAX_SUMMARY_RETRIES = DEFAULT_MAX_RETRIES


class SummaryOverflow(CompactionError):
    """A summary call did not fit the summariser's real window."""

    def __init__(self, message: str, *, info: ErrorInfo, request: Request) -> None:
        super().__init__(message)
        self.info = info
        self.request = request


def replanned(plan: Plan, overflow: SummaryOverflow) -> Plan:
    """The plan with the window and the token ratio the overflow error states.

    Without a stated window there is nothing better to try: the overflow stands.
    """
    info = overflow.info
    window = info.limit or plan.summarizer_window
    if window is None:
        raise overflow
    estimator = plan.summary_estimator
    if info.prompt_tokens:
        estimator = estimator.calibrated(overflow.request.messages, info.prompt_tokens)
    return replace(
        plan,
        summary_estimator=estimator,
        summarizer_window=window,
        summary_tokens=summary_tokens(plan.config, window),
        window_error=overflow.__cause__,
    )


@dataclass(slots=True)
class _Form:
    """Whether the summary calls ask for the structured form: True until a server refuses it
    (then plain for the rest of the compaction)."""

    structured: bool


def summarise(
    blocks: tuple[str, ...],
    plan: Plan,
    calls: list[Response | None],
    *,
    level: int,
    form: _Form | None = None,
) -> Steps[str]:
    """One summary of `blocks`; chunks and merges when they do not fit the window. Every call
    made is appended to `calls` (None: one that raised)."""
    form = form if form is not None else _Form(structured=plan.structured)
    parts = chunks(blocks, chunk_capacity(plan))
    merging = level > 0
    if len(parts) == 1:
        return (yield from _ask(parts[0], plan, calls, form, merging=merging))
    if level >= MAX_MERGE_LEVELS:
        raise CompactionError(
            f"the conversation is too large for the summariser's window even after "
            f"{MAX_MERGE_LEVELS} levels of merging ({len(parts)} parts left)"
        )
    partials = []
    for number, chunk in enumerate(parts, start=1):
        part = (number, len(parts))
        partials.append((yield from _ask(chunk, plan, calls, form, merging=merging, part=part)))
    merged = tuple(f"### Summary of part {n}\n{text}" for n, text in enumerate(partials, 1))
    return (yield from summarise(merged, plan, calls, level=level + 1, form=form))


def _ask(
    body: str,
    plan: Plan,
    calls: list[Response | None],
    form: _Form,
    *,
    merging: bool,
    part: tuple[int, int] | None = None,
) -> Steps[str]:
    """One summary of `body` (the rendered request, `summary_request`)."""

    def request(structured: bool) -> Request:
        return summary_request(
            body,
            plan.summary_tokens,
            plan.focus,
            merging=merging,
            part=part,
            structured=structured,
        )

    return (yield from _asked(request, calls, form))


def ask(
    request: Callable[[bool], Request], calls: list[Response | None], *, structured: bool
) -> Steps[str]:
    """One summary's text from the request `request(structured)` makes (a structured one
    first when `structured`), on its own; see `_asked`."""
    return (yield from _asked(request, calls, _Form(structured=structured)))


def _asked(
    request: Callable[[bool], Request], calls: list[Response | None], form: _Form
) -> Steps[str]:
    """One summary's text (a structured answer rendered as Markdown); an empty one is
    CannotSummarise. A structured request the server refuses is asked again plainly, and so
    is every later one of `form`."""
    try:
        response = yield from _call(request(form.structured), calls)
    except CompactionError as exc:
        if not (form.structured and refused(exc)):
            raise
        form.structured = False
        response = yield from _call(request(False), calls)
    text = response.message.text.strip()
    if form.structured:
        text = structured_summary(text) or text  # no JSON object: checked as it is
    if not text:
        raise CannotSummarise("the summariser returned an empty summary")
    return text


def refused(error: CompactionError) -> bool:
    """Whether a summary call failed because the server does not take the request's form
    (an invalid request: the schema, not the conversation)."""
    cause = error.__cause__
    if not isinstance(cause, Exception):
        return False
    info = cause.info if isinstance(cause, ProviderError) else classify_error(cause)
    return info.kind is ErrorKind.INVALID_REQUEST


def _call(request: Request, calls: list[Response | None]) -> Steps[Response]:
    """One summary call, sent again after a rate limit or a transient error (at most
    `MAX_SUMMARY_RETRIES` times); then a provider failure becomes CompactionError, chained."""
    retries = 0
    wait = 0.0
    while True:  # each pass returns, raises, or counts a retry (bounded above)
        try:
            response = yield Call(request=request, wait=wait)
        except Exception as exc:
            calls.append(None)
            info = exc.info if isinstance(exc, ProviderError) else classify_error(exc)
            delay = _retry_wait(info, retries + 1)
            if delay is None:
                raise _call_failed(info, exc, request, retries) from exc
            retries, wait = retries + 1, delay
        else:
            calls.append(response)
            return response


def _retry_wait(info: ErrorInfo, retry: int) -> float | None:
    """Seconds to wait before retry number `retry`, or None: the failure stands."""
    if info.kind not in RETRYABLE or retry > MAX_SUMMARY_RETRIES:
        return None
    return retry_delay(retry, info.retry_after)


def _call_failed(
    info: ErrorInfo, exc: Exception, request: Request, retries: int
) -> CompactionError:
    after = f" after {retries} {'retry' if retries == 1 else 'retries'}" if retries else ""
    message = f"the summary call failed{after}: {_describe(info, exc)}"
    if info.is_overflow:
        return SummaryOverflow(message, info=info, request=request)
    return CompactionError(message)


def _describe(info: ErrorInfo, exc: Exception) -> str:
    message = info.message or type(exc).__name__
    return message if info.kind is ErrorKind.OTHER else f"{info.kind.value}: {message}"

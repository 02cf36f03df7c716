"""/compact and auto-compaction: an LLM handoff summary of the middle of a conversation.

`compact` (and `acompact`) replace the middle of the working view (between the system
messages and the last few turns) with a summary written by a model, in fixed sections. The
full transcript is the caller's and is never touched; every input is immutable, so a failure
leaves the conversation exactly as it was.

What guards it (each is tested):

- **The task and the user's rules survive.** Before a summary is accepted, the user's
  explicit instructions in the summarised span (imperative sentences and always / never /
  don't / must rules, in English, Portuguese or Spanish) and the latest user request, when it
  is summarised, are looked up in it (case, punctuation and spacing ignored). Whatever is
  missing is pinned verbatim after the summary. No model call is needed for that.
- **Transactional.** The new view is returned only when it is valid: the summary is not empty,
  not nonsense (most of its words must occur in the conversation or the prompt) and has most
  of the fixed sections as headings (a refusal or free text is no handoff summary), the view
  is smaller than before and fits the budget (window minus output reserve, when known), and
  tool pairing is intact. Otherwise, and on any provider error (timeout, rate limit,
  overflow...) that retrying did not fix, `CompactionError` is raised, chained to the cause.
  Cancellation (`asyncio.CancelledError`, `KeyboardInterrupt`) is not converted: it
  propagates as itself, so `asyncio.timeout` and task cancellation keep working; nothing has
  changed either way.
- **The summary call never overflows.** A middle larger than the summariser's window is
  summarised in chunks, then the summaries are merged, at most `MAX_MERGE_LEVELS` levels.
  When the window is unknown or the estimate was wrong and a summary call overflows anyway,
  the chunking is planned once more from the window and prompt size the error states.
- **Never stuck.** With `fallback=True` a failed summary falls back to the deterministic
  recovery levels (`apply_recovery_level`, which cannot fail): the lowest level that fits.
  `/compact` does not fall back (the user is told why and decides); auto-compaction does, but
  only when the conversation already exceeds the effective window, or when its circuit
  breaker is open (after `max_failures` failed or ineffective compactions in a row) and the
  conversation exceeds the effective window: then no model call is made at all. A fallback
  that does not shrink the view (level 3 adds its notice to a view it cannot shorten) is not
  applied: the compaction fails as if there were no fallback, and the request's own
  recovery levels deal with the view.

**Overflow during compaction never sticks.** A conversation over the budget is shrunk before
it is split (`_fitted`): tool results budgeted, inline media (base64 data URLs) replaced by a
marker, every assistant or tool message cut to a share of the budget; user messages, and so
the user's latest request and instructions, are kept verbatim beside the summary.

**Transient failures are asked again.** A summary call that fails with a rate limit or a
transient error (5xx, timeout, connection reset) is sent again after the wait
`chatcli.policy.retry.retry_delay` gives (the provider's Retry-After when it is at most
`RETRY_MAX_DELAY`, else exponential backoff), at most `MAX_SUMMARY_RETRIES` times; only then
does it fail the compaction. The wait is injected (`sleep` / `asleep`).

The model calls are written once, as a generator that yields `_Call`s (a request, and how long
to wait before sending it) and receives `Response`s (or the provider's exception, thrown in);
`_drive` and `_adrive` run it.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from itertools import accumulate
from typing import TypeVar

from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.errors import CompactionError, ErrorInfo, ErrorKind, ProviderError, classify_error
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.carry import CarryBudget, carry_instructions, carrying
from chatcli.history.instructions import extract_instructions
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.result import TransformReport
from chatcli.history.text import cut_middle
from chatcli.history.truncate import Number, apply_recovery_level, is_real_user_request
from chatcli.messages import Message, Role, Usage, total_chars
from chatcli.policy.retry import DEFAULT_MAX_RETRIES, RETRYABLE, retry_delay
from chatcli.providers.base import Provider, Request, Response
from chatcli.tokens.estimate import TokenEstimator

__all__ = [
    "MAX_MERGE_LEVELS",
    "MAX_SUMMARY_RETRIES",
    "MEDIA_MARKER",
    "SUMMARY_HEADER",
    "SUMMARY_SECTIONS",
    "AutoCompaction",
    "CompactionBreaker",
    "CompactionReport",
    "CompactionResult",
    "aauto_compact",
    "acompact",
    "auto_compact",
    "compact",
    "extract_instructions",
    "is_summary_message",
    "should_auto_compact",
]

SUMMARY_SECTIONS = (
    "User's goal",
    "Explicit instructions and constraints",
    "Decisions made",
    "Files and resources touched",
    "Errors and how they were solved",
    "Done and pending",
    "Current step",
)
SUMMARY_HEADER = "[Earlier conversation compacted by chatcli"
_PINNED_HEADER = "[Kept verbatim from the user's messages, because the summary did not state them:]"
_LATEST_HEADER = "[The user's latest request, verbatim:]"
# Levels of "summarise the summaries" before giving up; each level divides the text by the
# chunk capacity over the summary size (at least 3 with the window split below), so three
# levels cover a middle dozens of windows long.
MAX_MERGE_LEVELS = 3
# Times one summary call is sent again after a rate limit or a transient error: the same
# number the recovery loop allows a chat call.
MAX_SUMMARY_RETRIES = DEFAULT_MAX_RETRIES
# The summariser needs to know what happened, not whole outputs: each tool result is shown
# to it cut to this size (the transcript keeps them in full).
_RENDERED_RESULT_CHARS = 4000
# A summary call's max_tokens is at most this share of the summariser's window, so the
# conversation always gets the rest and merging always makes progress.
_SUMMARY_WINDOW_SHARE = 4
# The token estimate is an estimate: chunks use this share of the room it computes.
_CHUNK_SAFETY = 0.9
# A summary whose words mostly do not occur in the conversation or the prompt is nonsense.
_MIN_KNOWN_WORDS = 0.3
# Sections of SUMMARY_SECTIONS a summary must have as headings. A model may fairly merge or
# drop a section or two that do not apply (no errors, no files in a plain chat); a refusal
# ("Sorry, I cannot summarise this conversation.") or free text has none, and the words of
# either occur in the conversation, so only the structure tells them from a handoff summary.
_MIN_SECTIONS = 5

_SYSTEM_PROMPT = (
    "You write handoff summaries of conversations between a user and an AI assistant. "
    "Another assistant will continue the work from your summary alone. Write only the "
    "summary, as Markdown with these sections in this order, keeping the headings exactly as "
    "written (in English):\n\n"
    + "\n".join(f"## {section}" for section in SUMMARY_SECTIONS)
    + "\n\nWrite the rest in the language of the conversation. Under 'Explicit instructions "
    "and constraints', quote every rule or instruction the user gave, word for word. Be "
    "specific: file paths, names, commands, numbers, exact error messages. No pleasantries. "
    "Do not answer the user or continue the conversation."
)

T = TypeVar("T")
Sleep = Callable[[float], object]
AsyncSleep = Callable[[float], Awaitable[object]]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Call:
    """What the steps ask the driver: wait `wait` seconds (a retry's backoff), then send."""

    request: Request
    wait: float = 0.0


Steps = Generator[_Call, Response, T]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionReport:
    """What one compaction did. Token figures are estimates of the working view.

    `usage` is the summariser's own usage (track its cost as its own line); `calls` the number
    of summary calls, including those that failed or whose summary was refused. `fallback` is
    set when the deterministic recovery levels were used instead of a summary, `reason` then
    says why.
    """

    messages_before: int
    messages_after: int
    tokens_before: int
    tokens_after: int
    summarized: int = 0
    calls: int = 0
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    summary: str = ""
    pinned: tuple[str, ...] = ()
    fallback: TransformReport | None = None
    reason: str = ""

    @property
    def freed_tokens(self) -> int:
        return self.tokens_before - self.tokens_after

    @property
    def freed_pct(self) -> float:
        return 100.0 * self.freed_tokens / self.tokens_before if self.tokens_before else 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionResult:
    """The new working view and the report."""

    messages: tuple[Message, ...]
    report: CompactionReport


@dataclass(frozen=True, slots=True, kw_only=True)
class _Plan:
    """Everything a compaction needs besides the messages, resolved once."""

    focus: str | None
    config: CompactionConfig
    estimator: TokenEstimator
    summary_estimator: TokenEstimator  # the summariser's tokens (recalibrated on overflow)
    budget: int | None  # tokens the new view must fit in (None: unknown)
    summarizer_window: int | None
    summary_tokens: int
    fallback: bool
    recovery: RecoveryConfig
    numbering: Number | None = None  # the transcript's message numbers (None: not known)
    # The provider error that stated `summarizer_window`, chained to errors about that window.
    window_error: BaseException | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class _Split:
    """A conversation cut for compaction: kept system messages, the middle, the kept tail."""

    systems: tuple[Message, ...]
    middle: tuple[Message, ...]
    tail: tuple[Message, ...]


# ---------------------------------------------------------------------------- public entry


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
) -> CompactionResult:
    """Replace the middle of `messages` with a verified summary (see the module docstring).

    `window` defaults to the provider's declared `context_window`; `summarizer` (default:
    `provider`) writes the summary within `summarizer_window` (default: its declared window,
    else `window`). `sleep` waits before a retried summary call. `numbering`: the
    transcript's message numbers, which the summary's header names for the span it replaced
    (and the fallback levels' markers); None when `messages` are not from a transcript.
    Raises `CompactionError` when no valid view was produced.
    """
    plan = _plan(
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
    )
    return _drive(_compaction(tuple(messages), plan), summarizer or provider, sleep)


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
) -> CompactionResult:
    """The async twin of `compact` (`asleep` waits before a retried summary call)."""
    plan = _plan(
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
    )
    return await _adrive(_compaction(tuple(messages), plan), summarizer or provider, asleep)


def _plan(
    provider: Provider,
    summarizer: Provider | None,
    focus: str | None,
    config: CompactionConfig | None,
    estimator: TokenEstimator | None,
    window: int | None,
    output_reserve: int,
    summarizer_window: int | None,
    fallback: bool,
    recovery_config: RecoveryConfig | None,
    numbering: Number | None = None,
) -> _Plan:
    config = config or CompactionConfig()
    window = window if window is not None else _declared_window(provider)
    if summarizer_window is None:
        summarizer_window = _declared_window(summarizer) if summarizer is not None else None
        summarizer_window = summarizer_window if summarizer_window is not None else window
    estimator = estimator or TokenEstimator()
    return _Plan(
        focus=focus.strip() if focus and focus.strip() else None,
        config=config,
        estimator=estimator,
        summary_estimator=estimator,
        budget=None if window is None else max(window - output_reserve, 0),
        summarizer_window=summarizer_window,
        summary_tokens=_summary_tokens(config, summarizer_window),
        fallback=fallback,
        recovery=recovery_config or RecoveryConfig(),
        numbering=numbering,
    )


def _summary_tokens(config: CompactionConfig, summarizer_window: int | None) -> int:
    if summarizer_window is None:
        return config.summary_tokens
    return max(1, min(config.summary_tokens, summarizer_window // _SUMMARY_WINDOW_SHARE))


def _declared_window(provider: Provider) -> int | None:
    value = getattr(provider, "context_window", None)
    return value if isinstance(value, int) and not isinstance(value, bool) else None


# ---------------------------------------------------------------------------- drivers


def _drive(steps: Steps[T], provider: Provider, sleep: Sleep) -> T:
    """Run `steps` against `provider`: its exceptions are thrown into the steps, which decide."""
    try:
        call = next(steps)
        while True:
            if call.wait:
                sleep(call.wait)
            try:
                response = provider.complete(call.request)
            except Exception as exc:
                call = steps.throw(exc)
            else:
                call = steps.send(response)
    except StopIteration as stop:
        value: T = stop.value
        return value


async def _adrive(steps: Steps[T], provider: Provider, asleep: AsyncSleep) -> T:
    """The async twin of `_drive`."""
    try:
        call = next(steps)
        while True:
            if call.wait:
                await asleep(call.wait)
            try:
                response = await provider.acomplete(call.request)
            except Exception as exc:
                call = steps.throw(exc)
            else:
                call = steps.send(response)
    except StopIteration as stop:
        value: T = stop.value
        return value


# ---------------------------------------------------------------------------- the steps


def _compaction(messages: tuple[Message, ...], plan: _Plan) -> Steps[CompactionResult]:
    """Summarise, verify, validate; fall back to the recovery levels when allowed."""
    calls: list[Response | None] = []  # None: a call that raised (counted, maybe billed)
    try:
        repaired = _fitted(repair_tool_pairing(messages).messages, plan)
        split = _split(repaired, plan.config.keep_turns, _max_tail_chars(plan))
        blocks = _render(split.middle)
        try:
            summary = yield from _summarise(blocks, plan, calls, level=0)
        except _SummaryOverflow as overflow:
            # Once, with the window and token ratio the summariser's error states.
            plan = _replanned(plan, overflow)
            summary = yield from _summarise(blocks, plan, calls, level=0)
        return _accept(messages, split, summary, tuple(calls), plan)
    except CompactionError as exc:
        # Raised by this compaction, so no one else holds it: what it spent goes with it.
        exc.calls, exc.usage = len(calls), _usage_of(calls)
        if not plan.fallback:
            raise
        try:
            return _fall_back(messages, plan, reason=str(exc), calls=tuple(calls))
        except CompactionError as worse:
            worse.calls, worse.usage = exc.calls, exc.usage
            raise worse from exc


class _SummaryOverflow(CompactionError):
    """A summary call did not fit the summariser's real window."""

    def __init__(self, message: str, *, info: ErrorInfo, request: Request) -> None:
        super().__init__(message)
        self.info = info
        self.request = request


def _replanned(plan: _Plan, overflow: _SummaryOverflow) -> _Plan:
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
        summary_tokens=_summary_tokens(plan.config, window),
        window_error=overflow.__cause__,
    )


def _ask(request: Request, calls: list[Response | None]) -> Steps[str]:
    """One summary's text; an empty one is a CompactionError."""
    response = yield from _call(request, calls)
    text = response.message.text.strip()
    if not text:
        raise CompactionError("the summariser returned an empty summary")
    return text


def _call(request: Request, calls: list[Response | None]) -> Steps[Response]:
    """One summary call, sent again after a rate limit or a transient error (at most
    `MAX_SUMMARY_RETRIES` times); then a provider failure becomes CompactionError, chained."""
    retries = 0
    wait = 0.0
    while True:  # each pass returns, raises, or counts a retry (bounded above)
        try:
            response = yield _Call(request=request, wait=wait)
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
        return _SummaryOverflow(message, info=info, request=request)
    return CompactionError(message)


def _usage_of(calls: Sequence[Response | None]) -> Usage:
    """What the summary calls reported using (a call that raised reported nothing)."""
    return sum((c.usage for c in calls if c is not None), Usage())


def _describe(info: ErrorInfo, exc: Exception) -> str:
    message = info.message or type(exc).__name__
    return message if info.kind is ErrorKind.OTHER else f"{info.kind.value}: {message}"


def _summarise(
    blocks: tuple[str, ...], plan: _Plan, calls: list[Response | None], *, level: int
) -> Steps[str]:
    """One summary of `blocks`; chunks and merges when they do not fit the window."""
    capacity = _chunk_capacity(plan)
    chunks = _chunks(blocks, capacity)
    if len(chunks) == 1:
        return (yield from _ask(_request(chunks[0], plan, merging=level > 0), calls))
    if level >= MAX_MERGE_LEVELS:
        raise CompactionError(
            f"the conversation is too large for the summariser's window even after "
            f"{MAX_MERGE_LEVELS} levels of merging ({len(chunks)} parts left)"
        )
    partials = []
    for number, chunk in enumerate(chunks, start=1):
        part = _request(chunk, plan, merging=level > 0, part=(number, len(chunks)))
        partials.append((yield from _ask(part, calls)))
    merged = tuple(f"### Summary of part {n}\n{text}" for n, text in enumerate(partials, 1))
    return (yield from _summarise(merged, plan, calls, level=level + 1))


def _chunk_capacity(plan: _Plan) -> int | None:
    """Chars of conversation one summary call can carry, or None when the window is unknown."""
    if plan.summarizer_window is None:
        return None
    # The instructions, the request's own wrapper text (under 600 chars) and the focus.
    wrapper = len(_SYSTEM_PROMPT) + 600 + len(plan.focus or "")
    estimator = plan.summary_estimator
    prompt = estimator.count_chars(wrapper, 2)
    room = plan.summarizer_window - plan.summary_tokens - prompt
    capacity = int(room * estimator.chars_per_token * _CHUNK_SAFETY)
    if capacity < 2 * plan.summary_tokens * estimator.chars_per_token:
        raise CompactionError(
            f"the summariser's window ({plan.summarizer_window:,} tokens) is too small to "
            "summarise anything"
        ) from plan.window_error
    return capacity


def _chunks(blocks: tuple[str, ...], capacity: int | None) -> tuple[str, ...]:
    """Consecutive blocks packed greedily into texts of at most `capacity` chars."""
    if capacity is None:
        return ("\n\n".join(blocks),)
    chunks: list[str] = []
    current: list[str] = []
    size = 0
    for block in (cut_middle(b, capacity) for b in blocks):
        if current and size + 2 + len(block) > capacity:
            chunks.append("\n\n".join(current))
            current, size = [], 0
        current.append(block)
        size += len(block) + 2
    chunks.append("\n\n".join(current))
    return tuple(chunks)


def _request(
    body: str, plan: _Plan, *, merging: bool, part: tuple[int, int] | None = None
) -> Request:
    if merging:
        intro = (
            "Below are summaries of consecutive parts of one conversation, oldest first. "
            "Merge them into one summary with the same sections; when they disagree, the "
            "later part wins. Keep every quoted user instruction."
        )
    else:
        intro = "Summarise this conversation."
    if part is not None:
        intro += (
            f" This is part {part[0]} of {part[1]}; summarise only this part, with the same "
            "sections (the parts' summaries are merged afterwards)."
        )
    if plan.focus:
        intro += f"\nThe user asked the summary to focus on: {plan.focus}"
    text = f"{intro}\n\n<conversation>\n{body}\n</conversation>"
    messages = (Message.system(_SYSTEM_PROMPT), Message.user(text))
    return Request(messages=messages, max_tokens=plan.summary_tokens)


# ---------------------------------------------------------------------------- split + render

_MEDIA = re.compile(r"data:[\w.+-]+/[\w.+-]+;base64,[A-Za-z0-9+/=]+")
MEDIA_MARKER = "[media removed for compaction]"
# Over the budget, no assistant or tool message keeps more than this share of it.
_MESSAGE_SHARE = 4


def _fitted(messages: tuple[Message, ...], plan: _Plan) -> tuple[Message, ...]:
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


def _max_tail_chars(plan: _Plan) -> int | None:
    """The kept tail may fill at most half of the budget, so that the summary has room."""
    return None if plan.budget is None else int(plan.budget * plan.estimator.chars_per_token) // 2


def _split(messages: tuple[Message, ...], keep_turns: int, max_tail_chars: int | None) -> _Split:
    """Cut after the leading system messages and before the last `keep_turns` user turns.

    `messages` has repaired pairing (results right after their call), so any user or
    assistant message is a boundary that splits no tool call from its result. When the kept
    turns would hold more than half of the conversation (one long agent turn) or more than
    `max_tail_chars`, the cut moves to later boundaries inside them: the latest request is
    then summarised, and verification pins it verbatim if the summary lacks it.
    """
    others = [i for i, m in enumerate(messages) if m.role is not Role.SYSTEM]
    if not others:
        raise CompactionError("nothing to compact: the conversation has no messages yet")
    boundaries = [i for i in others[1:] if messages[i].role is not Role.TOOL]
    if not boundaries:
        raise CompactionError("nothing to compact: the conversation is a single exchange")
    users = [i for i in others if messages[i].role is Role.USER]
    preferred = users[-keep_turns] if len(users) >= keep_turns else others[0]
    limit = total_chars([messages[i] for i in others]) // 2
    if max_tail_chars is not None:
        limit = min(limit, max_tail_chars)
    suffix = list(accumulate((m.char_count for m in reversed(messages)), initial=0))[::-1]
    start = next((i for i in boundaries if i >= preferred and suffix[i] <= limit), boundaries[-1])
    before = messages[:start]
    return _Split(
        systems=tuple(m for m in before if m.role is Role.SYSTEM),
        middle=tuple(m for m in before if m.role is not Role.SYSTEM),
        tail=messages[start:],
    )


def _render(middle: tuple[Message, ...]) -> tuple[str, ...]:
    """One text block per message, as the summariser reads them."""
    names = {call.id: call.name for m in middle for call in m.tool_calls}
    return tuple(_render_one(m, names) for m in middle)


def _render_one(message: Message, names: dict[str, str]) -> str:
    result = message.tool_result
    if result is not None:
        error = ", error" if result.is_error else ""
        name = names.get(result.call_id, "tool")
        content = cut_middle(result.content, _RENDERED_RESULT_CHARS)
        return f"### Tool result ({name}, call {result.call_id}{error})\n{content}"
    lines = [f"### {message.role.value.capitalize()}", message.text]
    lines += [f"[calls {c.name} {c.arguments_json} (call {c.id})]" for c in message.tool_calls]
    return "\n".join(line for line in lines if line)


# ---------------------------------------------------------------------------- verification


_WORD = re.compile(r"[^\W\d_]{3,}")


def is_summary_message(message: Message) -> bool:
    """Whether `message` is a summary written by an earlier compaction."""
    return message.role is Role.USER and message.text.startswith(SUMMARY_HEADER)


def _required(middle: tuple[Message, ...], latest: Message | None) -> tuple[tuple[str, ...], str]:
    """(the instructions that must survive, the latest request text if it is summarised)."""
    instructions: dict[str, None] = {}
    for message in middle:
        if is_summary_message(message):
            items = _pinned_items(message.text)
        elif is_real_user_request(message):
            items = extract_instructions(message.text)
        else:
            continue
        instructions.update(dict.fromkeys(items))
    request = latest.text if latest is not None and any(m is latest for m in middle) else ""
    inside_request = set(extract_instructions(request))
    return tuple(i for i in instructions if i not in inside_request), request


def _pinned_items(summary_text: str) -> tuple[str, ...]:
    """The instructions an earlier summary pinned, so they survive the next compaction too."""
    _, found, rest = summary_text.partition(_PINNED_HEADER)
    if not found:
        return ()
    block = rest.split("\n\n", 1)[0]
    return tuple(line[2:] for line in block.splitlines() if line.startswith("- "))


def _normalised(text: str) -> str:
    return " " + " ".join(re.findall(r"\w+", text.lower().replace("’", "'"))) + " "


def _missing(summary: str, required: Sequence[str]) -> tuple[str, ...]:
    haystack = _normalised(summary)
    return tuple(item for item in required if _normalised(item) not in haystack)


def _is_nonsense(summary: str, source: str) -> bool:
    """Whether the summary's words mostly do not occur in the conversation or the prompt."""
    words = _WORD.findall(summary.lower())
    if len(words) < 3:
        return True
    known = set(_WORD.findall(source.lower())) | set(_WORD.findall(_SYSTEM_PROMPT.lower()))
    return sum(word in known for word in words) < _MIN_KNOWN_WORDS * len(words)


_HEADING_MARKS = re.compile(r"^[\s#*_>-]*(?:\d+[.)]\s*)?")


def _sections_in(summary: str) -> int:
    """How many of SUMMARY_SECTIONS the summary has as headings, in any usual Markdown style
    ("## Decisions made", "**Decisions made:** ...", "1. Decisions made", "Decisions made:")."""
    wanted = {_normalised(section) for section in SUMMARY_SECTIONS}
    titles = {
        _normalised(_HEADING_MARKS.sub("", line).partition(":")[0]) for line in summary.splitlines()
    }
    return len(wanted & titles)


def _latest_request(messages: Sequence[Message]) -> Message | None:
    return next(
        (m for m in reversed(messages) if is_real_user_request(m) and not is_summary_message(m)),
        None,
    )


# ---------------------------------------------------------------------------- acceptance


def _accept(
    messages: tuple[Message, ...],
    split: _Split,
    summary: str,
    calls: tuple[Response | None, ...],
    plan: _Plan,
) -> CompactionResult:
    """Verify and validate the summary; the new view, or CompactionError with nothing changed."""
    _check_summary(summary, "\n".join(_render(split.middle)) + (plan.focus or ""))
    instructions, request = _required(split.middle, _latest_request(split.middle + split.tail))
    # What the removed user messages said is carried; what is carried needs no pin.
    carried = _carried(messages, (*split.systems, *split.tail), plan)
    systems = carried[: len(carried) - len(split.tail)]
    pinned = _missing(summary + "\n" + "\n".join(m.text for m in systems), instructions)
    request = request if request and _missing(summary, (request,)) else ""
    text = _summary_text(summary, pinned, request, split.middle, plan.numbering)
    view = (*systems, Message.user(text), *split.tail)
    report = CompactionReport(
        messages_before=len(messages),
        messages_after=len(view),
        tokens_before=plan.estimator.count(messages),
        tokens_after=plan.estimator.count(view),
        summarized=len(split.middle),
        calls=len(calls),
        usage=_usage_of(calls),
        model=next((c.model for c in reversed(calls) if c is not None and c.model), None),
        summary=summary,
        pinned=pinned + ((request,) if request else ()),
    )
    _validate(view, report, plan)
    return CompactionResult(messages=view, report=report)


def _check_summary(summary: str, source: str) -> None:
    """Raise CompactionError unless `summary` reads like a handoff summary of `source`."""
    if _is_nonsense(summary, source):
        raise CompactionError(
            "the summary was rejected: it does not read like a summary of this conversation"
        )
    sections = _sections_in(summary)
    if sections < _MIN_SECTIONS:
        raise CompactionError(
            f"the summary was rejected: it has {sections} of the {len(SUMMARY_SECTIONS)} sections "
            f"(at least {_MIN_SECTIONS} are needed), so it is no handoff summary; it begins "
            f"{summary[:80]!r}"
        )


def _summary_text(
    summary: str,
    pinned: Sequence[str],
    request: str,
    middle: tuple[Message, ...],
    numbering: Number | None,
) -> str:
    span = _span(middle, numbering)
    parts = [
        f"{SUMMARY_HEADER}: the {len(middle):,} messages before this one{span} were replaced "
        "by this summary. The full transcript is kept (/history).]",
        summary,
    ]
    if pinned:
        parts.append(_PINNED_HEADER + "\n" + "\n".join(f"- {item}" for item in pinned))
    if request:
        parts.append(f"{_LATEST_HEADER}\n{request}")
    return "\n\n".join(parts)


# The span an earlier summary's header names ("(#3-#40)").
_SPAN = re.compile(r"\(#(\d+)-#(\d+)\)")


def _span(middle: tuple[Message, ...], numbering: Number | None) -> str:
    """ " (#a-#b)": the transcript numbers of the span `middle` stands for (an earlier summary
    in it, the span its header names), "" when none is known."""
    if numbering is None:
        return ""
    numbers: list[int] = []
    for message in middle:
        named = _SPAN.search(message.text[:200]) if is_summary_message(message) else None
        if named is not None:
            numbers += map(int, named.groups())
        elif (number := numbering(message)) is not None:
            numbers.append(number)
    return f" (#{min(numbers)}-#{max(numbers)})" if numbers else ""


def _validate(view: tuple[Message, ...], report: CompactionReport, plan: _Plan) -> None:
    if report.tokens_after >= report.tokens_before:
        raise CompactionError(
            f"the summary is not smaller than what it replaces "
            f"({report.tokens_after:,} >= {report.tokens_before:,} tokens)"
        )
    if plan.budget is not None and report.tokens_after > plan.budget:
        raise CompactionError(
            f"the compacted conversation still does not fit: about {report.tokens_after:,} "
            f"tokens > {plan.budget:,}"
        )
    if repair_tool_pairing(view).report.changed:
        raise CompactionError("the compacted conversation would split a tool call from its result")


def _fall_back(
    messages: tuple[Message, ...],
    plan: _Plan,
    *,
    reason: str,
    calls: tuple[Response | None, ...] = (),
) -> CompactionResult:
    """The lowest deterministic recovery level whose result fits (level 3 if none does).

    A result that is not smaller than `messages` is not applied: CompactionError (level 3
    adds its notice, so a view it cannot shorten grows). `calls` are the summary calls made
    before the failure (None: one that raised): they were paid for.
    """
    for level in (1, 2, 3):
        result = carrying(
            partial(apply_recovery_level, level=level, config=plan.recovery, number=plan.numbering),
            messages,
            budget=_carry_budget(messages, plan),
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
        usage=_usage_of(calls),
        fallback=result.report,
        reason=reason,
    )
    return CompactionResult(messages=result.messages, report=report)


def _carry_budget(messages: tuple[Message, ...], plan: _Plan) -> CarryBudget:
    """The carried block's share (`RecoveryConfig.carry_pct`) of the budget, or of the view
    before compaction when the window is unknown."""
    room = plan.budget if plan.budget is not None else plan.estimator.count(messages)
    return CarryBudget(tokens=room * plan.recovery.carry_pct // 100, count=plan.estimator.count)


def _carried(
    messages: tuple[Message, ...], view: tuple[Message, ...], plan: _Plan
) -> tuple[Message, ...]:
    """`view` with what the user messages it leaves out said carried (`chatcli.history.carry`)."""
    if not plan.recovery.carry_pct:
        return view
    budget = _carry_budget(messages, plan)
    return carry_instructions(messages, view, budget=budget, numbering=plan.numbering).messages


# ---------------------------------------------------------------------------- auto-compaction


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
    auto-compaction stops making model calls. `take_notice` says so exactly once.
    """

    max_strikes: int = 3
    min_freed_pct: int = 10
    strikes: int = 0
    last_reason: str = ""
    reported: bool = False

    @classmethod
    def from_config(cls, config: CompactionConfig) -> CompactionBreaker:
        return cls(max_strikes=config.max_failures, min_freed_pct=config.min_freed_pct)

    @property
    def is_open(self) -> bool:
        return self.strikes >= self.max_strikes

    def after_compaction(self, report: CompactionReport) -> CompactionBreaker:
        if report.fallback is not None:
            return self.after_failure(report.reason)
        if report.freed_pct < self.min_freed_pct:
            return self.after_failure(
                f"it freed only {report.freed_pct:.0f}% of the tokens "
                f"(less than {self.min_freed_pct}%)"
            )
        return replace(self, strikes=0, last_reason="")

    def after_failure(self, reason: str) -> CompactionBreaker:
        return replace(self, strikes=self.strikes + 1, last_reason=reason)

    def take_notice(self) -> tuple[CompactionBreaker, str | None]:
        """(the breaker, a message) the first time it is seen open; (itself, None) after."""
        if not self.is_open or self.reported:
            return self, None
        notice = (
            f"Auto-compaction is off for this session after {self.strikes} failed or "
            f"ineffective compactions in a row (last: {self.last_reason}). Use /compact to "
            "compact by hand; overflow recovery still applies."
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
) -> AutoCompaction:
    """Compact before a request when the estimate passes `auto_compact_pct` of the window.

    Never raises CompactionError: a failure is a strike on the breaker and the input is sent
    as it is (or, when it exceeds the effective window, the deterministic levels shrink it).
    A summary call that is retried (and then works) is no failure. `sleep` waits before it.
    """
    plan = _plan(
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
    )
    steps = _auto(tuple(messages), plan, breaker, budget=max(window - output_reserve, 0))
    return _drive(steps, summarizer or provider, sleep)


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
) -> AutoCompaction:
    """The async twin of `auto_compact`."""
    plan = _plan(
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
    )
    steps = _auto(tuple(messages), plan, breaker, budget=max(window - output_reserve, 0))
    return await _adrive(steps, summarizer or provider, asleep)


def _auto(
    messages: tuple[Message, ...], plan: _Plan, breaker: CompactionBreaker, *, budget: int
) -> Steps[AutoCompaction]:
    estimate = plan.estimator.count(messages)
    if not should_auto_compact(estimate, budget, 0, plan.config.auto_compact_pct):
        return AutoCompaction(messages=messages, breaker=breaker)
    over = estimate > budget
    if breaker.is_open:
        breaker, notice = breaker.take_notice()
        try:
            result = _fall_back(messages, plan, reason="auto-compaction is off") if over else None
        except CompactionError:
            result = None  # nothing shrinks it: the request's own recovery levels apply
        view = messages if result is None else result.messages
        return AutoCompaction(messages=view, breaker=breaker, result=result, notice=notice)
    try:
        result = yield from _compaction(messages, replace(plan, fallback=over))
    except CompactionError as exc:
        breaker, notice = breaker.after_failure(str(exc)).take_notice()
        return AutoCompaction(messages=messages, breaker=breaker, error=exc, notice=notice)
    breaker, notice = breaker.after_compaction(result.report).take_notice()
    return AutoCompaction(messages=result.messages, breaker=breaker, result=result, notice=notice)

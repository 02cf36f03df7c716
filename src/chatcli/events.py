"""Typed events: what the recovery engine did, as it happened.

`Client` delivers every event, in order, to its hooks (plain callables) and to stdlib
`logging` under the ``"chatcli"`` logger, and returns them all in `Reply.events`. Each event
is a frozen value with a one-line human `describe()` that the CLI prints as is, e.g.::

    context overflow (219,898 > 200,000 tokens)
    level 2 (emergency truncation): kept 10 of 84 messages, freed 731,402 chars, retrying
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import ClassVar

from chatcli.errors import ErrorInfo, ErrorKind
from chatcli.history.result import TransformReport

__all__ = [
    "CompactionPaused",
    "Continued",
    "Escalated",
    "Event",
    "Hook",
    "InstructionsCarried",
    "LevelApplied",
    "LevelSkipped",
    "MaxTokensFitted",
    "OutputCapLowered",
    "OverflowDetected",
    "PreflightRecovery",
    "RecoveryFailed",
    "Retried",
    "SilentTruncationDetected",
    "ToolCallsDropped",
    "logger",
]

logger = logging.getLogger("chatcli")
# A library leaves output to the application: without a handler of its own, an application
# that never configured logging would print chatcli's warnings through logging's last-resort
# handler (stderr). The standard library's advice for libraries.
logger.addHandler(logging.NullHandler())


@dataclass(frozen=True, slots=True, kw_only=True)
class Event:
    """Base of every event. `log_level` is the stdlib logging level it is logged at."""

    log_level: ClassVar[int] = logging.INFO

    def describe(self) -> str:
        """One line for a person; every event overrides it (this is the bare fallback)."""
        return type(self).__name__


# A hook receives every event as it happens; its return value is ignored.
Hook = Callable[[Event], None]


@dataclass(frozen=True, slots=True, kw_only=True)
class OverflowDetected(Event):
    """The provider said the prompt does not fit (an error), or the window filled up while
    the model was answering (`while_answering`: the context_window stop). `limit` is the
    window the provider stated, else the one known before (None: unknown); `max_tokens` the
    output the provider counted, when it says so. No number is shown that is not known."""

    info: ErrorInfo
    prompt_tokens: int | None
    limit: int | None
    max_tokens: int | None = None
    while_answering: bool = False

    def describe(self) -> str:
        prompt, output, limit = self.prompt_tokens, self.max_tokens, self.limit
        if self.while_answering:
            counted = f"{prompt:,} prompt" if prompt is not None else ""
            if output is not None:
                counted += f"{' + ' if counted else ''}{output:,} output"
            of = f"the {limit:,}-token window" if limit is not None else "a window of unknown size"
            used = f"{counted} tokens filled {of}" if counted else f"{of} filled up"
            return f"context overflow while answering ({used})"
        if prompt is None:
            return "context overflow" if limit is None else f"context overflow (over {limit:,})"
        asked = f"{prompt:,}" + ("" if output is None else f" + {output:,} output")
        if limit is None:
            return f"context overflow ({asked} tokens; the window size is not stated)"
        return f"context overflow ({asked} > {limit:,} tokens)"


@dataclass(frozen=True, slots=True, kw_only=True)
class PreflightRecovery(Event):
    """Before sending (the first request, or a continuation, which carries the partial
    answer), the estimate showed it cannot fit: recovering without a call."""

    estimate: int
    reserve: int
    window: int

    def describe(self) -> str:
        output = f" + {self.reserve:,} output" if self.reserve else ""
        return (
            f"pre-flight: estimated {self.estimate:,}{output} tokens > "
            f"{self.window:,}-token window, recovering before sending"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelApplied(Event):
    """A recovery level shaped the working view that is sent next. `report` is the level's
    own transform report; the rest compares the view with the transcript: `kept` of its
    `total` messages are in the view (a pinned request among them), `added` says what
    chatcli put in that the transcript does not hold (the compaction notice, results for
    interrupted tool calls), and `chars_freed` is the transcript's chars minus the view's —
    negative when, on a short history, what was added outweighs what was cut."""

    level: int
    name: str
    report: TransformReport
    kept: int
    total: int
    chars_freed: int
    added: tuple[str, ...] = ()
    preflight: bool = False  # applied before sending (nothing was rejected yet)

    def action(self) -> str:
        """What the level did (the line `ContextRecoveryError.attempts` records)."""
        done = f"level {self.level} ({self.name}): kept {self.kept:,} of {self.total:,} messages"
        if self.added:
            done += ", added " + " and ".join(self.added)
        if self.chars_freed < 0:
            return f"{done} ({-self.chars_freed:+,} chars)"
        return f"{done}, freed {self.chars_freed:,} chars"

    def describe(self) -> str:
        return f"{self.action()}, {'sending' if self.preflight else 'retrying'}"


@dataclass(frozen=True, slots=True, kw_only=True)
class InstructionsCarried(Event):
    """User messages left the view (`by` a recovery level or a compaction), and the
    instructions and facts they held were carried into it (`chatcli.history.carry`): the
    block holds `carried` of them, `new` of those from this transform, and says `left_out`
    were left out to fit its share of the room."""

    by: str
    carried: int
    new: int
    left_out: int = 0

    def describe(self) -> str:
        more = f", {self.left_out:,} left out to fit" if self.left_out else ""
        return (
            f"{self.by}: carried {self.new:,} instructions and facts of removed user messages "
            f"into the view ({self.carried:,} in all{more})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LevelSkipped(Event):
    """A recovery level was not sent: its view is predicted not to fit (`predicted_tokens`
    prompt tokens + `reserve` output > `limit`), or, `unchanged`, the level changes nothing
    in the view (it is the one just rejected or predicted not to fit): sending it again
    would waste a call."""

    level: int
    name: str
    predicted_tokens: int | None = None
    reserve: int = 0
    limit: int | None = None
    unchanged: bool = False

    def describe(self) -> str:
        skipped = f"level {self.level} ({self.name}) skipped"
        if self.unchanged:
            return f"{skipped}: it changes nothing in the view"
        if self.predicted_tokens is None or self.limit is None:
            return f"{skipped}: predicted not to fit"
        output = f" + {self.reserve:,} output" if self.reserve else ""
        return f"{skipped}: predicted {self.predicted_tokens:,}{output} > {self.limit:,} tokens"


@dataclass(frozen=True, slots=True, kw_only=True)
class OutputCapLowered(Event):
    """max_tokens was above what the model allows; it was lowered (history untouched)."""

    old: int | None
    new: int

    def describe(self) -> str:
        old = "the default" if self.old is None else f"{self.old:,}"
        return f"max_tokens lowered from {old} to the model's cap of {self.new:,}, retrying"


@dataclass(frozen=True, slots=True, kw_only=True)
class MaxTokensFitted(Event):
    """The prompt fits the window but not with the output asked for: max_tokens was lowered
    to the room the prompt leaves, and the same history is resent (nothing truncated)."""

    old: int | None
    new: int
    prompt_tokens: int
    limit: int
    estimated: bool = False  # pre-flight: the prompt size is chatcli's estimate

    def describe(self) -> str:
        old = "the default" if self.old is None else f"{self.old:,}"
        about, verb = ("~", "sending") if self.estimated else ("", "retrying")
        return (
            f"max_tokens lowered from {old} to {self.new:,} to fit the {about}"
            f"{self.prompt_tokens:,}-token prompt in the {self.limit:,}-token window; "
            f"history kept, {verb}"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Escalated(Event):
    """The answer stopped at max_tokens; the limit was raised for the continuation."""

    attempt: int
    old: int | None
    new: int

    def describe(self) -> str:
        old = "the default" if self.old is None else f"{self.old:,}"
        return (
            f"answer cut at max_tokens: limit raised from {old} to {self.new:,} "
            f"(escalation {self.attempt})"
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Continued(Event):
    """The partial answer was kept and the model asked to resume it."""

    attempt: int
    max_tokens: int | None

    def describe(self) -> str:
        limit = "no max_tokens" if self.max_tokens is None else f"max_tokens {self.max_tokens:,}"
        return f"continuing the cut answer (continuation {self.attempt}, {limit})"


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionPaused(Event):
    """The provider compacted the conversation and paused before answering, as asked
    (Anthropic's `pause_after_compaction`): the reply holds the compaction alone, stop reason
    `COMPACTION`. The caller appends it, adds what it wants, and sends again for the answer."""

    def describe(self) -> str:
        return "the provider compacted the conversation and paused before answering"


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallsDropped(Event):
    """Tool calls whose arguments were cut off (or do not parse) were removed from the
    answer: they are never executable."""

    names: tuple[str, ...]

    def describe(self) -> str:
        names = ", ".join(self.names)
        return f"dropped {len(self.names)} tool call(s) with incomplete arguments: {names}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Retried(Event):
    """A rate limit or transient failure: waiting, then sending the same request again."""

    kind: ErrorKind
    attempt: int
    delay: float

    def describe(self) -> str:
        return f"{self.kind.value.replace('_', ' ')}: retry {self.attempt} in {self.delay:.1f}s"


@dataclass(frozen=True, slots=True, kw_only=True)
class SilentTruncationDetected(Event):
    """The provider cut the prompt without saying so (Ollama does when the prompt exceeds
    num_ctx; llama-cpp-python's chat format drops messages): an adapter saw it from the
    usage, which reports fewer prompt tokens than were sent. Emitted before the recovery
    events of that overflow. `expected_tokens`: about what was sent; `reported_tokens`: what
    the provider says it read, when the adapter states it; `detail`: the adapter's words."""

    log_level: ClassVar[int] = logging.WARNING

    expected_tokens: int | None = None
    reported_tokens: int | None = None
    detail: str = ""

    def describe(self) -> str:
        said = "the provider silently truncated the prompt"
        if self.expected_tokens is not None and self.reported_tokens is not None:
            return (
                f"{said}: it read {self.reported_tokens:,} of about {self.expected_tokens:,} tokens"
            )
        return f"{said} ({self.detail})" if self.detail else said


@dataclass(frozen=True, slots=True, kw_only=True)
class RecoveryFailed(Event):
    """Every allowed recovery level was tried or skipped and the request still does not fit."""

    log_level: ClassVar[int] = logging.WARNING

    attempts: tuple[str, ...]
    info: ErrorInfo

    def describe(self) -> str:
        tried = "; ".join(self.attempts) if self.attempts else "recovery disabled"
        return f"context recovery failed ({tried}): {self.info.message or self.info.kind.value}"

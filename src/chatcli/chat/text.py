"""What a chat session says to the user: the note left by a cancelled answer, and the lines
that describe a compaction (also shown as an event of auto-compaction)."""

from __future__ import annotations

from dataclasses import dataclass

from chatcli.compaction import CompactionResult
from chatcli.events import Event
from chatcli.messages import CompactionPart, Usage

__all__ = [
    "CANCELLED_NOTE",
    "COMPACTING",
    "CompactionNote",
    "CompactionStarted",
    "NativeCompactionNote",
    "describe_compaction",
]

CANCELLED_NOTE = "[answer cancelled by the user]"
# What the chat shows while a compaction runs (its summary calls take as long as an answer).
COMPACTING = "compacting…"


def describe_compaction(result: CompactionResult) -> str:
    """One line: what a compaction did."""
    r = result.report
    if r.fallback is not None:
        added = "".join(f"; added the {line.split(' (')[0]}" for line in r.fallback.injected)
        return (
            f"compaction fell back to {r.fallback.name.split(' + ')[0]} ({r.reason}{added}): "
            f"{r.messages_before} -> {r.messages_after} messages, "
            f"~{r.tokens_before:,} -> ~{r.tokens_after:,} tokens"
        )
    pinned = f", {len(r.pinned)} instruction(s) pinned verbatim" if r.pinned else ""
    return (
        f"compacted {r.summarized} messages into a summary: {r.messages_before} -> "
        f"{r.messages_after} messages, ~{r.tokens_before:,} -> ~{r.tokens_after:,} tokens "
        f"({r.freed_pct:.0f}% freed{pinned})"
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionStarted(Event):
    """Auto-compaction started before a request: the model is writing a summary (a
    `CompactionNote` follows when it is done)."""

    def describe(self) -> str:
        return COMPACTING


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionNote(Event):
    """Auto-compaction ran before a request (`result`; `error`: why it changed nothing), or
    its breaker opened (shown like any event)."""

    result: CompactionResult | None
    notice: str | None
    error: str | None = None

    def describe(self) -> str:
        lines = []
        if self.result is not None:
            lines.append("auto-" + describe_compaction(self.result))
        if self.error is not None:
            lines.append(f"auto-compaction changed nothing: {self.error}")
        if self.notice:
            lines.append(self.notice)
        return "\n".join(lines)


@dataclass(frozen=True, slots=True, kw_only=True)
class NativeCompactionNote(Event):
    """The provider compacted the conversation on its own servers, during a request or on
    demand (shown like chatcli's own compaction); or chatcli stopped relying on it (`gave_up`:
    why); or a /compact is chatcli's own summary, not the provider's (`instead`: why)."""

    part: CompactionPart | None = None
    replaced: int = 0
    usage: Usage | None = None
    gave_up: str = ""
    instead: str = ""

    def describe(self) -> str:
        if self.instead:
            return f"not compacted by the provider ({self.instead}): chatcli's own summary runs"
        if self.part is None:
            return f"provider compaction off for this session ({self.gave_up}): chatcli compacts"
        summary = len(self.part.summary) if self.part.summary else None
        size = f"a {summary:,}-char summary" if summary is not None else "an encrypted summary"
        tokens = f", {self.usage.output_tokens:,} summary tokens" if self.usage else ""
        return (
            f"compacted by the provider: {self.replaced} messages replaced by {size} "
            f"({self.part.provider}, {self.part.model}{tokens})"
        )

"""What a chat session says to the user: the note left by a cancelled answer, and the lines
that describe a compaction (also shown as an event of auto-compaction)."""

from __future__ import annotations

from dataclasses import dataclass

from chatcli.compaction import CompactionResult
from chatcli.events import Event

__all__ = ["CANCELLED_NOTE", "CompactionNote", "describe_compaction"]

CANCELLED_NOTE = "[answer cancelled by the user]"


def describe_compaction(result: CompactionResult) -> str:
    """One line: what a compaction did."""
    r = result.report
    if r.fallback is not None:
        return (
            f"compaction fell back to the recovery levels ({r.reason}): "
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
class CompactionNote(Event):
    """Auto-compaction ran before a request, or its breaker opened (shown like any event)."""

    result: CompactionResult | None
    notice: str | None

    def describe(self) -> str:
        lines = []
        if self.result is not None:
            lines.append("auto-" + describe_compaction(self.result))
        if self.notice:
            lines.append(self.notice)
        return "\n".join(lines)

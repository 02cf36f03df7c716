"""What a compaction returns: the new working view, and a report of what it did and spent.

The report is what the chat shows and what the breaker judges a compaction by (how much it
freed, whether it fell back); the summariser's usage is its own line, so its cost is tracked
apart from the conversation's.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from chatcli.history.result import TransformReport
from chatcli.messages import Message, Usage
from chatcli.providers.base import Response

__all__ = ["CompactionReport", "CompactionResult", "usage_of"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CompactionReport:
    """What one compaction did. Token figures are estimates of the working view.

    `usage` is the summariser's own usage (track its cost as its own line); `calls` the number
    of summary calls, including those that failed or whose summary was refused. `fallback` is
    set when the deterministic recovery levels were used instead of a summary, `reason` then
    says why. `warm`: the summary was asked for after the conversation's previous request, on
    the provider's prompt cache (`chatcli.compaction.warm`), not of the rendered text.
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
    cannot_summarise: bool = False
    warm: bool = False

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


def usage_of(calls: Sequence[Response | None]) -> Usage:
    """What the summary calls reported using (a call that raised reported nothing)."""
    return sum((c.usage for c in calls if c is not None), Usage())

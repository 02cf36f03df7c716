"""What a chat session says to the user: the note left by a cancelled answer, the lines that
describe a compaction (also shown as an event of auto-compaction), and how much of a message
the user sent the model saw when the view held it cut (`MessageCut`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chatcli.compaction import CompactionResult
from chatcli.events import Event
from chatcli.history.retain import cut_message_number
from chatcli.history.text import kept_length
from chatcli.messages import CompactionPart, Message, Role, Usage

__all__ = [
    "CANCELLED_NOTE",
    "COMPACTING",
    "CompactionNote",
    "CompactionStarted",
    "MessageCut",
    "NativeCompactionNote",
    "cut_user_messages",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class MessageCut(Event):
    """The user's message `number` (in the transcript) was sent cut to fit the window: the
    model saw `seen` of its `total` characters."""

    number: int
    seen: int
    total: int

    def describe(self) -> str:
        share = f"{self.seen / self.total:.0%}" if self.total else "-"
        return (
            f"the model saw {self.seen:,} of the {self.total:,} characters of your message "
            f"#{self.number} ({share}): the rest was cut to fit the context window; the "
            "transcript keeps it whole (/history)"
        )


def cut_user_messages(
    transcript: Sequence[Message], view: Sequence[Message]
) -> tuple[MessageCut, ...]:
    """The user's messages `view` holds cut (their marker names their transcript number),
    with how much of each the model saw."""
    cuts = []
    for message in view:
        number = cut_message_number(message.text) if message.role is Role.USER else None
        if number is None or not 0 < number <= len(transcript):
            continue
        original = transcript[number - 1]
        if original.role is Role.USER:
            seen = kept_length(message.text)
            cuts.append(MessageCut(number=number, seen=seen, total=len(original.text)))
    return tuple(cuts)

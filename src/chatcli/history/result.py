"""The shared result of every history transform: new messages plus a report of what changed."""

from __future__ import annotations

from dataclasses import dataclass

from chatcli.messages import Message, total_chars

__all__ = ["TransformReport", "TransformResult", "unchanged"]


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformReport:
    """What one transform did: each tuple holds one human-readable line per action."""

    name: str
    messages_before: int
    messages_after: int
    chars_before: int
    chars_after: int
    dropped: tuple[str, ...] = ()
    cut: tuple[str, ...] = ()
    injected: tuple[str, ...] = ()

    @property
    def chars_freed(self) -> int:
        return self.chars_before - self.chars_after

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.cut or self.injected)

    def then(self, later: TransformReport) -> TransformReport:
        """Combine with a report of a transform applied after this one."""
        return TransformReport(
            name=f"{self.name} + {later.name}",
            messages_before=self.messages_before,
            messages_after=later.messages_after,
            chars_before=self.chars_before,
            chars_after=later.chars_after,
            dropped=self.dropped + later.dropped,
            cut=self.cut + later.cut,
            injected=self.injected + later.injected,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformResult:
    """New messages (a tuple; the input is never mutated) and the report."""

    messages: tuple[Message, ...]
    report: TransformReport


def unchanged(name: str, messages: tuple[Message, ...]) -> TransformResult:
    """The result of a transform that had nothing to do."""
    chars = total_chars(messages)
    count = len(messages)
    report = TransformReport(
        name=name,
        messages_before=count,
        messages_after=count,
        chars_before=chars,
        chars_after=chars,
    )
    return TransformResult(messages=messages, report=report)

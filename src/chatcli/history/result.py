"""The shared result of every history transform: new messages plus a report of what changed."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chatcli.messages import Message, total_chars

__all__ = ["TransformReport", "TransformResult", "build_result"]


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
    moved: tuple[str, ...] = ()

    @property
    def chars_freed(self) -> int:
        return self.chars_before - self.chars_after

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.cut or self.injected or self.moved)

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
            moved=self.moved + later.moved,
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class TransformResult:
    """New messages (a tuple; the input is never mutated) and the report."""

    messages: tuple[Message, ...]
    report: TransformReport


def build_result(
    name: str,
    before: tuple[Message, ...],
    after: tuple[Message, ...],
    *,
    dropped: Sequence[str] = (),
    cut: Sequence[str] = (),
    injected: Sequence[str] = (),
    moved: Sequence[str] = (),
    chars_freed: int | None = None,
    chars_before: int | None = None,
) -> TransformResult:
    """The result of a transform from `before` to `after`, with its report.

    When nothing changed, the input tuple itself is returned (cheap to compare). A transform
    that knows how many chars it freed passes `chars_freed`, which saves counting `after`
    (counting is the costliest step on long histories: it serializes every tool call); one
    that keeps a running count of its input passes `chars_before` too.
    """
    messages = before if after == before else after
    chars_before = total_chars(before) if chars_before is None else chars_before
    if messages is before:
        chars_after = chars_before
    elif chars_freed is not None:
        chars_after = chars_before - chars_freed
    else:
        chars_after = total_chars(messages)
    report = TransformReport(
        name=name,
        messages_before=len(before),
        messages_after=len(messages),
        chars_before=chars_before,
        chars_after=chars_after,
        dropped=tuple(dropped),
        cut=tuple(cut),
        injected=tuple(injected),
        moved=tuple(moved),
    )
    return TransformResult(messages=messages, report=report)

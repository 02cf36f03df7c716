"""Transforms computed by scanning a transcript in order: the scan's state after message p
depends only on messages up to p, so a turn's decision is final once the turn is read, and
the same transcript always gives the same result (no state survives a call)."""

from __future__ import annotations

from typing import Protocol, TypeVar

from chatcli.history.result import TransformResult, build_result
from chatcli.messages import Message

__all__ = ["TransformScan", "run_scan", "unchanged"]


class TransformScan(Protocol):
    """A transform's scan: it reads messages one by one, then gives its result."""

    def push(self, message: Message) -> None:
        """Read the next message."""

    def result(self, transcript: tuple[Message, ...]) -> TransformResult:
        """The transform's result for `transcript`, the messages read."""


T = TypeVar("T", bound=TransformScan)


def run_scan(scan: T, transcript: tuple[Message, ...]) -> TransformResult:
    """`scan`'s result for `transcript`, read whole by the fresh `scan`."""
    for message in transcript:
        scan.push(message)
    return scan.result(transcript)


def unchanged(name: str, messages: tuple[Message, ...], chars: int) -> TransformResult:
    """The result of a transform that changed nothing, its `chars` already counted."""
    return build_result(name, messages, messages, chars_before=chars)

"""Memoised scans of transcripts, so a transform's cost per request is what was appended.

Every request hands the transforms the whole transcript, which mostly extends the one of the
previous request. A transform that can be computed by scanning messages in order (its state
after message p depends only on messages up to p) keeps its scan here, keyed by its settings;
the next call takes the longest kept scan whose messages are a prefix of its transcript,
feeds it only the new messages, and keeps it again. A scan of a different or shorter
transcript is simply a new scan: the result is the same either way, only the time differs.

Thread-safe: a scan taken is out of the memo until kept again, so no two callers extend the
same one. Each kept scan holds references to its transcript's messages; `MEMO_SIZE` scans per
transform are kept (a few conversations served by one process each extend their own).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Hashable
from typing import Any, Generic, Protocol, TypeVar

from chatcli.history.result import TransformResult, build_result
from chatcli.messages import Message

__all__ = [
    "MEMOS",
    "MEMO_SIZE",
    "Scan",
    "ScanMemo",
    "TransformScan",
    "clear_memos",
    "unchanged",
]

MEMO_SIZE = 8
# Every memo, so tests can compare a memoised result with a fresh one (`clear_memos`).
MEMOS: list[ScanMemo[Any]] = []


def clear_memos() -> None:
    """Forget the scans of every transform."""
    for memo in MEMOS:
        memo.clear()


class Scan(Protocol):
    """A scan: its settings, the messages it has read, and the two steps."""

    key: Hashable
    messages: list[Message]

    def push(self, message: Message) -> None:
        """Read the next message."""

    def rewind(self, count: int) -> bool:
        """Forget all but the first `count` messages read; False when the scan cannot."""


class TransformScan(Scan, Protocol):
    """A transform's scan: its result for the messages read so far."""

    def result(self, transcript: tuple[Message, ...]) -> TransformResult:
        """The transform's result for `transcript`, the messages read so far."""


S = TypeVar("S", bound=Scan)
T = TypeVar("T", bound=TransformScan)


class ScanMemo(Generic[S]):
    """The latest scans of one transform; `run` runs one call through it."""

    def __init__(self, new: Callable[[Hashable], S], size: int = MEMO_SIZE) -> None:
        self.new, self.size = new, size
        self.scans: list[S] = []  # most recently kept first
        self.lock = threading.Lock()
        MEMOS.append(self)

    def run(self: ScanMemo[T], key: Hashable, transcript: tuple[Message, ...]) -> TransformResult:
        """The transform's result for `transcript`, from the longest kept scan of a prefix
        of it (a scan that raised half-way is not kept)."""
        scan = self.extend(key, transcript)
        result = scan.result(transcript)
        self.keep(scan)
        return result

    def extend(self, key: Hashable, transcript: tuple[Message, ...]) -> S:
        """The scan of `transcript`: the longest kept scan of a prefix of it, fed the rest.
        It is out of the memo until given back with `keep`."""
        scan = self.take(key, transcript)
        for message in transcript[len(scan.messages) :]:
            scan.push(message)
        return scan

    def take(self, key: Hashable, transcript: tuple[Message, ...]) -> S:
        """The kept scan sharing the longest prefix with `transcript`, rewound to it when it
        read more than that (a transform's input may change near its end: the output of an
        earlier transform); a new scan when none shares anything or cannot rewind."""
        with self.lock:
            same = [scan for scan in self.scans if scan.key == key]
            # Scans of the same message objects first: comparing them costs a pointer
            # comparison per message, and they are what one conversation's requests share.
            found = _shared(
                [s for s in same if s.messages and _ends_alike(s.messages, transcript)], transcript
            ) or _shared(same, transcript)
            if not found:
                return self.new(key)
            count, best = max(found, key=lambda pair: pair[0])
            self.scans.remove(best)
        if count == len(best.messages) or best.rewind(count):
            return best
        return self.new(key)

    def keep(self, scan: S) -> None:
        with self.lock:
            self.scans.insert(0, scan)
            del self.scans[self.size :]

    def clear(self) -> None:
        """Forget every scan (the next call of each transcript scans it whole)."""
        with self.lock:
            self.scans.clear()


def _shared(scans: list[S], transcript: tuple[Message, ...]) -> list[tuple[int, S]]:
    """The scans that share a prefix with `transcript`, with its length."""
    counts = [(_common_prefix(scan.messages, transcript), scan) for scan in scans]
    return [(count, scan) for count, scan in counts if count > 0]


def _ends_alike(read: list[Message], transcript: tuple[Message, ...]) -> bool:
    """Whether the last message read is the very object at its place in `transcript`."""
    return len(read) <= len(transcript) and read[-1] is transcript[len(read) - 1]


def _common_prefix(read: list[Message], transcript: tuple[Message, ...]) -> int:
    """How many first messages `read` and `transcript` share. List equality checks identity
    before value, so messages that are the same objects cost a pointer comparison each; a
    mismatch is found by bisection, comparing each message about twice."""
    count = min(len(read), len(transcript))
    if (read if count == len(read) else read[:count]) == list(transcript[:count]):
        return count
    low, high = 0, count  # read[:low] matches, read[:high] does not
    while high - low > 1:
        middle = (low + high) // 2
        if read[low:middle] == list(transcript[low:middle]):
            low = middle
        else:
            high = middle
    return low


def unchanged(name: str, messages: tuple[Message, ...], chars: int) -> TransformResult:
    """The result of a transform that changed nothing, its `chars` already counted."""
    return build_result(name, messages, messages, chars_before=chars)

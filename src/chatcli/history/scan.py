"""Transforms computed by scanning a transcript in order, and their memoised scans, so a
transform's cost per request is what was appended.

A scan's state after message p depends only on messages up to p, so a turn's decision is
final once the turn is read, and the same transcript always gives the same result. Without
memory (`run_scan(None, ...)`) a transcript is read whole. With an owner's `ScanMemos` (a
`Client`'s, the proxy app's: never module-global, bounded, dropped with its owner) every
request hands the transforms the whole transcript, which mostly extends the one of the
previous request. A transform that can be computed by scanning messages in order (its state
after message p depends only on messages up to p) keeps its scan here, keyed by its settings;
the next call takes the longest kept scan whose messages are a prefix of its transcript,
feeds it only the new messages, and keeps it again. A scan of a different or shorter
transcript is simply a new scan: the result is the same either way, only the time differs.

Thread-safe: a scan taken is out of the memo until kept again, so no two callers extend the
same one. Each kept scan holds references to its transcript's messages; per transform, the
latest `MEMO_SIZE` scans are kept, up to `MEMO_MESSAGES` messages read in all: one per
conversation for the many conversations a proxy serves in turn (with only a handful kept,
a proxy serving more conversations than that never found its own scan again, and each
request scanned its whole conversation).
A scan of the very message objects of the transcript's start (one conversation's requests:
the proxy hands out the same objects) is found by the identity of its last message read,
whatever the number kept; messages equal by value only (made anew) are compared with the
`MEMO_RECENT` latest scans. A scan whose result depends on which object is where, not only
on values (the transcript's numbers, found by identity), is taken only by a transcript that
starts with the very objects it read (`ScanMemo.take_same`).
"""

from __future__ import annotations

import operator
import threading
from collections.abc import Callable, Hashable, Iterable
from itertools import islice
from typing import Any, Generic, Protocol, TypeVar

from chatcli.history.result import TransformResult, build_result
from chatcli.messages import Message

__all__ = [
    "MEMO_MESSAGES",
    "MEMO_RECENT",
    "MEMO_SIZE",
    "Scan",
    "ScanMemo",
    "ScanMemos",
    "TransformScan",
    "run_scan",
    "unchanged",
]

MEMO_SIZE = 512
MEMO_MESSAGES = 100_000  # ~200 conversations of 500 messages
MEMO_RECENT = 8


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

    def __init__(
        self,
        new: Callable[[Hashable], S],
        size: int = MEMO_SIZE,
        messages: int = MEMO_MESSAGES,
    ) -> None:
        self.new, self.size, self.most = new, size, messages
        self.scans: dict[int, S] = {}  # by id, the least recently kept first
        self.ends: dict[int, list[S]] = {}  # the kept scans by the id of their last message
        self.held = 0  # the messages the kept scans read, in all
        self.lock = threading.Lock()

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
        earlier transform); a new scan when none shares anything, or cannot rewind, or
        would keep less than half of what it read (a rewound scan is lost to the
        conversation it read: another conversation's, sharing a system prompt, say)."""
        with self.lock:
            found = self.own(key, transcript)
            if found is None:
                latest = islice(reversed(self.scans.values()), MEMO_RECENT)
                recent = [scan for scan in latest if scan.key == key]
                shared = _shared(recent, transcript)
                if not shared:
                    return self.new(key)
                found = max(shared, key=lambda pair: pair[0])
            count, best = found
            if count * 2 < len(best.messages):
                return self.new(key)
            self.drop(best)
        if count == len(best.messages) or best.rewind(count):
            return best
        return self.new(key)

    def take_same(self, key: Hashable, transcript: tuple[Message, ...]) -> S:
        """The kept scan of `key` that read the very objects `transcript` starts with, every
        one of them, out of the memo; a new scan when there is none. For a scan whose result
        depends on which object is where (numbers found by identity), not only on values."""
        with self.lock:
            found = self.own(key, transcript, same_objects=True)
            if found is None:
                return self.new(key)
            self.drop(found[1])
            return found[1]

    def own(
        self, key: Hashable, transcript: tuple[Message, ...], *, same_objects: bool = False
    ) -> tuple[int, S] | None:
        """The kept scan of `key` that read the very objects of the longest start of
        `transcript` (its last message read is the object at its place, the others equal,
        or, with `same_objects`, the same objects too), with its length: looked up by
        identity from the transcript's end, a dict look-up per message not read (one
        conversation's requests: each extends the last one's). With fewer scans kept than
        messages, only the places where a kept scan ends are looked at: a transcript whose
        scan's last message changed (an earlier transform's output) costs a look at each
        scan, not a look-up per message."""
        ends = self.ends
        for index in self.ending_places(key, transcript):
            for scan in ends.get(id(transcript[index]), ()):
                read = scan.messages
                if scan.key != key or len(read) != index + 1:
                    continue
                if same_objects and not any(map(operator.is_not, read, transcript)):
                    return len(read), scan
                if not same_objects and _common_prefix(read, transcript) == len(read):
                    return len(read), scan
        return None

    def ending_places(self, key: Hashable, transcript: tuple[Message, ...]) -> Iterable[int]:
        """The places of `transcript`, from its end, where a kept scan of `key` may end: every
        place, or, with fewer scans kept than messages, those where one ends."""
        if len(self.scans) >= len(transcript):
            return range(len(transcript) - 1, -1, -1)
        places = {
            len(scan.messages) - 1
            for scan in self.scans.values()
            if scan.key == key
            and 0 < len(scan.messages) <= len(transcript)
            and transcript[len(scan.messages) - 1] is scan.messages[-1]
        }
        return sorted(places, reverse=True)

    def keep(self, scan: S) -> None:
        with self.lock:
            self.scans[id(scan)] = scan
            if scan.messages:
                self.ends.setdefault(id(scan.messages[-1]), []).append(scan)
            self.held += len(scan.messages)
            while len(self.scans) > self.size or (self.held > self.most and len(self.scans) > 1):
                self.drop(next(iter(self.scans.values())))

    def drop(self, scan: S) -> None:
        """`scan` out of the memo (the lock held)."""
        del self.scans[id(scan)]
        self.held -= len(scan.messages)
        if scan.messages:
            last = id(scan.messages[-1])
            same_end = self.ends[last]
            same_end.remove(scan)
            if not same_end:
                del self.ends[last]

    def clear(self) -> None:
        """Forget every scan (the next call of each transcript scans it whole)."""
        with self.lock:
            self.scans.clear()
            self.ends.clear()
            self.held = 0


def _shared(scans: list[S], transcript: tuple[Message, ...]) -> list[tuple[int, S]]:
    """The scans that share a prefix with `transcript`, with its length."""
    counts = [(_common_prefix(scan.messages, transcript), scan) for scan in scans]
    return [(count, scan) for count, scan in counts if count > 0]


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


class ScanMemos:
    """One owner's memoised scans (a `Client`'s, the proxy app's), one `ScanMemo` per kind
    of scan, each bounded by `size` scans and `messages` messages read; dropped with it."""

    def __init__(self, size: int = MEMO_SIZE, messages: int = MEMO_MESSAGES) -> None:
        self.size, self.messages = size, messages
        self.memos: dict[Callable[[Hashable], Any], ScanMemo[Any]] = {}
        self.lock = threading.Lock()

    def of(self, new: Callable[[Hashable], S]) -> ScanMemo[S]:
        """The memo of the scans `new` makes."""
        with self.lock:
            memo = self.memos.get(new)
            if memo is None:
                memo = self.memos[new] = ScanMemo(new, self.size, self.messages)
            return memo

    def clear(self) -> None:
        """Forget every scan."""
        with self.lock:
            memos = list(self.memos.values())
        for memo in memos:
            memo.clear()


def run_scan(
    memos: ScanMemos | None,
    new: Callable[[Hashable], T],
    key: Hashable,
    transcript: tuple[Message, ...],
) -> TransformResult:
    """The result of the scan `new(key)` makes of `transcript`: from `memos` (the longest
    kept scan of a prefix of it, fed the rest), or read whole when there are none."""
    if memos is not None:
        return memos.of(new).run(key, transcript)
    scan = new(key)
    for message in transcript:
        scan.push(message)
    return scan.result(transcript)


def unchanged(name: str, messages: tuple[Message, ...], chars: int) -> TransformResult:
    """The result of a transform that changed nothing, its `chars` already counted."""
    return build_result(name, messages, messages, chars_before=chars)

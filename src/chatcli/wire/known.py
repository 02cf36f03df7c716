"""The conversations a server parsed lately, found again by their content, so that the next
request of a conversation costs what is new in it.

A client resends its whole conversation with every request, and the proxy builds a new
`Client` for each one: nothing that keeps its work by the identity of the message objects
(the transforms' memoised scans, `chatcli.history.scan`, and what they feed) would find the
previous request's work if the messages were parsed anew. `KnownConversations` keeps the
wire messages of the latest requests (the JSON as the body gave it) with the neutral
messages each one gave. A request whose first wire messages are equal, by value, to a kept
request's gets those same neutral message objects back for them; only the rest is checked
and parsed. A wire message equal to one a request already sent parses to the same neutral
messages and passes the same checks: the dialect's parse of a message depends on that
message alone.

A conversation is found by its start: a digest of its first two wire messages (the system
prompt and the first request, in most clients), then the longest run of equal first
messages among the latest few requests kept under it (`CANDIDATES`: conversations that
start alike). Comparing wire messages by value is C code (dict and string equality), a
fraction of what parsing them costs. Bounded: at most `size` requests and `messages` wire
messages kept in all, the least recently used going first; a request that extends a kept
one replaces it. Owned by a server (the proxy app), never module-global.
"""

from __future__ import annotations

import hashlib
import json
import threading
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

from chatcli.messages import Message

__all__ = ["CANDIDATES", "KNOWN_MESSAGES", "KNOWN_SIZE", "Known", "KnownConversations"]

KNOWN_SIZE = 1000  # requests kept: one per conversation a proxy serves in turn
KNOWN_MESSAGES = 100_000  # wire messages kept in all (as many as the scans keep)
CANDIDATES = 4  # requests kept per conversation start (conversations that start alike)
_START = 2  # wire messages in a conversation's start


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)  # one request: by identity
class _Entry:
    """One kept request: its wire messages and the neutral messages each gave."""

    start: bytes
    raws: tuple[Any, ...]
    parsed: tuple[tuple[Message, ...], ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Known:
    """What a request shares with a kept one: its first `count` wire messages, and the
    neutral messages they gave (`parsed[i]`: those of wire message i)."""

    count: int = 0
    parsed: tuple[tuple[Message, ...], ...] = ()
    start: bytes = b""
    entry: _Entry | None = field(default=None, repr=False)


class KnownConversations:
    """The latest requests' wire and neutral messages, found by content (module docstring)."""

    def __init__(self, size: int = KNOWN_SIZE, messages: int = KNOWN_MESSAGES) -> None:
        self.size, self.most = size, messages
        self._starts: OrderedDict[bytes, list[_Entry]] = OrderedDict()
        self._entries = 0
        self._held = 0  # wire messages kept in all
        self._lock = threading.Lock()

    def find(self, raws: Sequence[Any]) -> Known:
        """The longest run of first wire messages of `raws` that a kept request had."""
        start = _start_of(raws)
        best = Known(start=start)
        with self._lock:
            for entry in self._starts.get(start, ()):
                count = shared_start(entry.raws, raws)
                if count > best.count:
                    best = Known(count=count, parsed=entry.parsed[:count], start=start, entry=entry)
        return best

    def keep(
        self, known: Known, raws: Sequence[Any], parsed: Sequence[tuple[Message, ...]]
    ) -> None:
        """Keep a request's wire messages `raws` and what each gave (`parsed`), found before
        as `known`; the kept request it extends, if any, is replaced. The wire messages it
        shares with the kept one stay the kept ones: their strings are the neutral
        messages' own, kept once."""
        shared = known.entry.raws[: known.count] if known.entry is not None else ()
        kept = (*shared, *raws[known.count :])
        entry = _Entry(start=known.start, raws=kept, parsed=tuple(parsed))
        with self._lock:
            entries = self._starts.pop(known.start, [])
            extended = known.entry
            if extended is not None and known.count == len(extended.raws) and extended in entries:
                self._drop(entries, extended)  # (entries are compared by identity)
            entries.append(entry)
            self._entries += 1
            self._held += len(entry.raws)
            while len(entries) > CANDIDATES:
                self._drop(entries, entries[0])
            self._starts[known.start] = entries  # the most recently used last
            self._bound()

    def _bound(self) -> None:
        """Drop the least recently used requests beyond the bounds (the lock held)."""
        while self._starts and (self._entries > self.size or self._held > self.most):
            start, entries = next(iter(self._starts.items()))
            self._drop(entries, entries[0])
            if not entries:
                del self._starts[start]

    def _drop(self, entries: list[_Entry], entry: _Entry) -> None:
        entries.remove(entry)
        self._entries -= 1
        self._held -= len(entry.raws)


def shared_start(kept: Sequence[Any], raws: Sequence[Any]) -> int:
    """How many first items `kept` and `raws` share, by value."""
    count = min(len(kept), len(raws))
    if list(kept[:count]) == list(raws[:count]):
        return count
    return next(i for i, (a, b) in enumerate(zip(kept, raws, strict=False)) if a != b)


def _start_of(raws: Sequence[Any]) -> bytes:
    """A digest of a conversation's first wire messages."""
    dumped = json.dumps(list(raws[:_START]), default=repr).encode()
    return hashlib.blake2b(dumped, digest_size=16).digest()

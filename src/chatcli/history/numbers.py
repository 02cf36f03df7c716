"""A transcript's message numbers, kept with its owner's memoised scans: what microcompaction's
markers and stubs, the recovery levels' markers and carried instructions cite.

A message's number is its place in the transcript, from 1: the last place of the very object,
else the last message with its role and text (a cut copy of a message is not found), as
`chatcli.history.carry.Numbering` gives them. Building those tables for each request reads the
whole transcript again; `transcript_numbers` keeps them in a scan (`chatcli.history.scan`), so
the numbers of a transcript cost what was appended since the last request that was numbered.
The tables are read (and the scan taken) at the first number asked: most requests ask none.

A number found by identity depends on which object is where, so a kept scan numbers only a
transcript of the very objects it read (`ScanMemo.take_same`: a pointer comparison per
message); one equal by value only (a proxy's, parsed anew for each request) is read by a new
scan. A scan only grows (it cannot forget the places a later message overwrote), so the
places it gave a transcript stay right after it is kept and extended by a longer one; a place
past the transcript's end is looked up in the transcript instead.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Sequence

from chatcli.history.scan import ScanMemos
from chatcli.history.truncate import Number
from chatcli.messages import Message, Role

__all__ = ["transcript_numbers"]


def transcript_numbers(transcript: Sequence[Message], memos: ScanMemos | None = None) -> Number:
    """The numbers of `transcript`'s messages (see the module docstring), from `memos` (its
    owner's memoised scans) when given, else read whole at the first number asked."""
    return _Numbers(tuple(transcript), memos)


class _Numbers:
    """`transcript`'s message numbers: call it with a message (None when it is not found)."""

    def __init__(self, transcript: tuple[Message, ...], memos: ScanMemos | None) -> None:
        self.transcript, self.memos = transcript, memos
        self.scan: _Places | None = None

    def __call__(self, message: Message) -> int | None:
        places = self.scan if self.scan is not None else self.read()
        transcript, end = self.transcript, len(self.transcript)
        found = places.ids.get(id(message))
        if found is not None and found > end:  # a later place, of a longer transcript's
            found = _last(transcript, lambda m: m is message)
        if found is not None:
            return found
        found = places.texts.get((message.role, message.text))
        if found is None or found <= end:
            return found
        role, text = message.role, message.text
        return _last(transcript, lambda m: m.role is role and m.text == text)

    def read(self) -> _Places:
        """The scan of the transcript: a kept one of its very objects, fed what it lacks."""
        transcript = self.transcript
        memo = self.memos.of(_Places) if self.memos is not None else None
        scan = memo.take_same(None, transcript) if memo is not None else _Places(None)
        for message in transcript[len(scan.messages) :]:
            scan.push(message)
        if memo is not None:
            memo.keep(scan)
        self.scan = scan
        return scan


class _Places:
    """The last place (from 1) of each message object and of each role and text, in the
    messages read (mutable, private; a memo hands it to one caller at a time)."""

    __slots__ = ("ids", "key", "messages", "texts")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.messages: list[Message] = []  # holds the objects, so their ids stay theirs
        self.ids: dict[int, int] = {}
        self.texts: dict[tuple[Role, str], int] = {}

    def push(self, message: Message) -> None:
        self.messages.append(message)
        place = len(self.messages)
        self.ids[id(message)] = place
        self.texts[(message.role, message.text)] = place

    def rewind(self, count: int) -> bool:
        return False  # the places a later message overwrote are gone: read anew


def _last(transcript: tuple[Message, ...], matches: Callable[[Message], bool]) -> int | None:
    """The last place (from 1) of a message of `transcript` that `matches`."""
    for index in range(len(transcript) - 1, -1, -1):
        if matches(transcript[index]):
            return index + 1
    return None

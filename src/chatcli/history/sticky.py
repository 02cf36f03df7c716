"""Sticky views: a cut of the working view that the following requests of a conversation keep.

A recovery level (or a compaction) cuts the view: it drops the oldest turns, cuts big
messages, adds a notice. Recomputed on the next request from the grown transcript, the cut
would slide: another first kept message, other cut texts, so no request shares a prefix with
the one before it, and a provider's prompt cache (which reuses an exact prefix only) is
written again at every turn. A `StickyView` keeps the cut instead: the next request of the
same conversation is the cut view plus the messages that came after it, byte for byte the
same prefix, until the window requires a new cut (which is then the sticky one).

It is a value: `chatcli.Client` keeps one for a history that extends the one it last cut
(`Client.sticky_view`) and takes one back (`Client(..., sticky_view=...)`), so an
application can persist it next to its conversation; the chat stores it with the session.
`digest` ties it to the history it was made for: a view is never applied to another one.
With its owner's memoised scans (`chatcli.history.scan`) the digest of a history costs what
was appended since the last one digested: a SHA-256 state per kept scan, fed each new message.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Hashable, Sequence
from dataclasses import dataclass

from chatcli.history.scan import ScanMemos
from chatcli.messages import Message
from chatcli.serialize import message_to_dict

__all__ = ["StickyView", "history_digest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class StickyView:
    """The working view sent for the first `upto` messages of a history (`view`), kept for
    the requests that extend that history. `digest` is `history_digest` of those messages."""

    upto: int
    view: tuple[Message, ...]
    digest: str

    def __post_init__(self) -> None:
        if not isinstance(self.upto, int) or self.upto < 1:
            raise ValueError(f"StickyView upto={self.upto!r} must be a positive integer")

    @classmethod
    def of(
        cls, history: Sequence[Message], view: Sequence[Message], memos: ScanMemos | None = None
    ) -> StickyView:
        """The cut `view` made for the whole of `history` (`memos`: see `history_digest`)."""
        digest = history_digest(history, memos)
        return cls(upto=len(history), view=tuple(view), digest=digest)

    def applies_to(self, history: Sequence[Message], memos: ScanMemos | None = None) -> bool:
        """`history` extends the one this view was made for (the same first `upto` messages)."""
        if len(history) < self.upto:
            return False
        return history_digest(history[: self.upto], memos) == self.digest

    def working(self, history: Sequence[Message]) -> tuple[Message, ...]:
        """What a request for `history` starts from: the kept view, then what came after it.
        The caller checked `applies_to`."""
        return self.view + tuple(history[self.upto :])


def history_digest(messages: Sequence[Message], memos: ScanMemos | None = None) -> str:
    """A fingerprint of `messages` (their lossless JSON form), the same for equal messages in
    any process: what ties a persisted view to its history. `memos`: its owner's memoised
    scans, from which a digest of a history that extends one digested before costs what was
    appended (None: every message is read)."""
    transcript = tuple(messages)
    if memos is None:
        scan = _Digest(None)
        for message in transcript:
            scan.push(message)
        return scan.digest.hexdigest()
    memo = memos.of(_Digest)
    scan = memo.extend(None, transcript)
    digest = scan.digest.hexdigest()
    memo.keep(scan)
    return digest


class _Digest:
    """The digest of the messages read (mutable, private: a memo hands it to one caller at a
    time, see `chatcli.history.scan`)."""

    __slots__ = ("digest", "key", "messages")

    def __init__(self, key: Hashable) -> None:
        self.key = key
        self.messages: list[Message] = []
        self.digest = hashlib.sha256()

    def push(self, message: Message) -> None:
        self.messages.append(message)
        self.digest.update(json.dumps(message_to_dict(message), sort_keys=True).encode())
        self.digest.update(b"\n")

    def rewind(self, count: int) -> bool:
        return False  # a hash cannot forget: read anew

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
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Sequence
from dataclasses import dataclass

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
    def of(cls, history: Sequence[Message], view: Sequence[Message]) -> StickyView:
        """The cut `view` made for the whole of `history`."""
        return cls(upto=len(history), view=tuple(view), digest=history_digest(history))

    def applies_to(self, history: Sequence[Message]) -> bool:
        """`history` extends the one this view was made for (the same first `upto` messages)."""
        return len(history) >= self.upto and history_digest(history[: self.upto]) == self.digest

    def working(self, history: Sequence[Message]) -> tuple[Message, ...]:
        """What a request for `history` starts from: the kept view, then what came after it.
        The caller checked `applies_to`."""
        return self.view + tuple(history[self.upto :])


def history_digest(messages: Sequence[Message]) -> str:
    """A fingerprint of `messages` (their lossless JSON form), the same for equal messages in
    any process: what ties a persisted view to its history."""
    digest = hashlib.sha256()
    for message in messages:
        digest.update(json.dumps(message_to_dict(message), sort_keys=True).encode())
        digest.update(b"\n")
    return digest.hexdigest()

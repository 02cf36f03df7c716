"""What a conversation sent last, for a compaction whose summary call continues it.

A provider's prompt cache holds the prefix of the conversation's last request. A compaction
that repeats that request's messages and asks for the summary after them
(`chatcli.compaction.warm`) reads that prefix from the cache. `PreviousRequest` is what it
needs: that request exactly as it was sent (messages, tools, settings) and the messages the
conversation added after it. `SentRequest` is what a sender keeps of its last send
(`Client.last_sent`), from which the previous request of a conversation that extends it is
known (`previous_for`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from chatcli.messages import Message
from chatcli.providers.base import Request

__all__ = ["PreviousRequest", "SentRequest"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PreviousRequest:
    """The conversation's last request as it was sent, and `since`: the messages the
    conversation added after it (its answer, the turns after that), in order."""

    request: Request
    since: tuple[Message, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)  # one send: by identity
class SentRequest:
    """A send's last answered request and the conversation it was made from (the messages
    the caller gave, before any transform)."""

    conversation: tuple[Message, ...]
    request: Request

    def previous_for(self, messages: Sequence[Message]) -> PreviousRequest | None:
        """The previous request of `messages` when they extend the conversation this request
        was made from (each message the same, or equal: a client that resends its
        conversation parses it anew); None when they do not (another conversation, or an
        edited one)."""
        kept = self.conversation
        if len(messages) < len(kept):
            return None
        if not all(a is b or a == b for a, b in zip(kept, messages, strict=False)):
            return None
        return PreviousRequest(request=self.request, since=tuple(messages[len(kept) :]))

"""Prompt caches as the chat sees them: the share of a request's prompt the provider read from
its cache, and the request that broke the cache, with the reason the engine knows.

A provider's cache reuses the exact prefix of the previous request. A chat request breaks it
when an earlier message of its view differs from the previous chat request's view, and
chatcli knows why, from what it did: a recovery level cut the view (a `LevelApplied` event of
the turn), the user compacted or cleared the view since, or microcompaction moved a batch of
old tool results to a stub or cut (the first changed message is microcompaction's text, the
previous one was not). Anything else is said as it is: an earlier message changed.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from chatcli.events import Event, LevelApplied
from chatcli.history.stubs import is_microcompacted
from chatcli.messages import Message, Usage

__all__ = [
    "BATCH",
    "CACHE_BREAK",
    "CLEAR",
    "COMPACTION",
    "OTHER",
    "RECOVERY",
    "CacheBreak",
    "cache_break",
    "cached_share",
]

# The stored event kind of a cache break (`chatcli.chat.session`), and the reasons it gives.
CACHE_BREAK = "cache-break"
RECOVERY = "a recovery cut"
COMPACTION = "a compaction"
CLEAR = "a /clear"
BATCH = "a batch of stubs (microcompaction)"
OTHER = "an earlier message changed"


@dataclass(frozen=True, slots=True, kw_only=True)
class CacheBreak:
    """A request that reused only the first `reused` of the previous request's `previous`
    messages, and why."""

    reused: int
    previous: int
    reason: str

    def describe(self) -> str:
        return (
            f"prompt cache broken by {self.reason}: "
            f"{self.reused} of the previous request's {self.previous} messages reused"
        )

    def data(self) -> dict[str, Any]:
        return {"reused": self.reused, "previous": self.previous, "reason": self.reason}


def cache_break(
    previous: Sequence[Message] | None,
    view: Sequence[Message],
    events: Sequence[Event],
    *,
    reset: str | None = None,
) -> CacheBreak | None:
    """Whether `view` breaks the cache of the `previous` request's view (None: unknown, e.g.
    the first request after a reopen), and why. `reset`: the reason the view was rebuilt
    since (`COMPACTION`, `CLEAR`), None when it was not."""
    if previous is None or not previous:
        return None
    reused = _shared(previous, view)
    if reused == len(previous):
        return None
    return CacheBreak(
        reused=reused, previous=len(previous), reason=_reason(previous, view, reused, events, reset)
    )


def _reason(
    previous: Sequence[Message],
    view: Sequence[Message],
    at: int,
    events: Sequence[Event],
    reset: str | None,
) -> str:
    if any(isinstance(event, LevelApplied) for event in events):
        return RECOVERY
    if reset is not None:
        return reset
    # The first changed message is microcompaction's stub or cut of a tool result (its
    # previous text, different, was whole or at an earlier stage): a batch moved it.
    changed = view[at] if at < len(view) else None
    if (
        changed is not None
        and changed.tool_result is not None
        and is_microcompacted(changed.text, 1)
    ):
        return BATCH
    return OTHER


def _shared(previous: Sequence[Message], view: Sequence[Message]) -> int:
    """How many leading messages the two views share (the same objects compare at once)."""
    for index, (old, new) in enumerate(zip(previous, view, strict=False)):
        if old is not new and old != new:
            return index
    return min(len(previous), len(view))


def cached_share(usage: Usage) -> float | None:
    """The share of the prompt the provider reported reading from its cache; None when it
    reported no prompt tokens."""
    prompt = usage.prompt_tokens
    return usage.cache_read_tokens / prompt if prompt else None

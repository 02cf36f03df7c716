"""A chat session's bookkeeping in the store: events as stored rows, the working view a
reopened session starts from, its cost, and the windows it learned.

The working view is `base + transcript[upto:]`. The base is what the latest of these left:
a recovery level's sticky cut (stored by reference to its request), a compaction (its view
stored with its request) or a /clear (its view, empty, in the event). `stored_base` rebuilds
it from the store, so a reopened session sends what the running one would have sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import fields
from typing import Any

from chatcli.chat.cache import CACHE_BREAK
from chatcli.chat.cost import ESTIMATED_USAGE, CostSummary
from chatcli.compaction import CompactionReport
from chatcli.events import Event, LevelApplied
from chatcli.messages import Message
from chatcli.serialize import message_from_dict
from chatcli.store import SessionStore, StoredEvent

__all__ = [
    "VIEW_EVENTS",
    "compaction_made_by",
    "event_view",
    "learn_windows",
    "sticky_made_by",
    "stored_base",
    "stored_cost",
    "stored_event",
]

# Event kinds that reset the working view; their data holds the transcript length it covers
# ("upto"), and the view itself (a clear) or their request stores it (a compaction).
VIEW_EVENTS = ("compaction", "clear")

Base = tuple[tuple[Message, ...] | None, int, str]


def stored_base(store: SessionStore, session_id: str) -> Base:
    """(the base, the transcript length it covers, what made it) of a stored session: the
    sticky cut when one was made after the last compaction or clear (they drop it), else the
    last compaction's or clear's view, else none (None, 0, "")."""
    sticky = store.sticky_view(session_id)
    events = store.events(session_id)
    if sticky is not None:
        levels = [
            int(e.data["level"])
            for e in events
            if e.request_id == sticky.request_id and e.kind == LevelApplied.__name__
        ]
        view = store.view(session_id, sticky.request_id)
        return view, sticky.upto, sticky_made_by(max(levels, default=0))
    for event in reversed(events):
        if event.kind in VIEW_EVENTS:
            made_by = "/clear" if event.kind == "clear" else event.kind
            made_by = str(event.data.get("made_by", made_by))
            return event_view(store, session_id, event), int(event.data["upto"]), made_by
    return None, 0, ""


def event_view(store: SessionStore, session_id: str, event: StoredEvent) -> tuple[Message, ...]:
    """The view a compaction or clear made: in its data (a clear, an old compaction) or
    stored, by reference, with the compaction's request."""
    if "view" in event.data:
        return tuple(message_from_dict(m) for m in event.data["view"])
    if event.request_id is None:
        raise ValueError(f"stored {event.kind} event {event.id} holds no view")
    return store.view(session_id, event.request_id)


def sticky_made_by(level: int) -> str:
    """What made a sticky cut's view: the recovery level whose cut is kept."""
    return f"level {level}, kept from an earlier request" if level else "an earlier request"


def compaction_made_by(report: CompactionReport) -> str:
    """What made a compaction's view: the summary, or the recovery level it fell back to."""
    if report.fallback is None:
        return "compaction"
    return f"compaction's fallback to {report.fallback.name.split(' + ')[0]}"


def stored_event(event: Event) -> tuple[str, str, dict[str, Any]]:
    """(kind, text, data) for the store: the event's plain fields as JSON data."""
    data: dict[str, Any] = {}
    for f in fields(event):
        value = getattr(event, f.name)
        if isinstance(value, (int, float, str, bool)) or value is None:
            data[f.name] = value
        elif isinstance(value, tuple) and all(isinstance(v, str) for v in value):
            data[f.name] = list(value)
    return type(event).__name__, event.describe(), data


def stored_cost(store: SessionStore, session_id: str) -> CostSummary:
    """A session's cost from its stored requests, with the cache breaks and the estimated
    usages its events name."""
    breaks: dict[int, str] = {}
    estimated: set[int] = set()
    for event in store.events(session_id):
        if event.request_id is None:
            continue
        if event.kind == CACHE_BREAK:
            breaks[event.request_id] = str(event.data["reason"])
        elif event.kind == ESTIMATED_USAGE:
            estimated.add(event.request_id)
    return CostSummary(
        requests=store.requests(session_id), cache_breaks=breaks, estimated=frozenset(estimated)
    )


def learn_windows(
    store: SessionStore, scope: str, known: dict[str, int], learned: Mapping[str, int]
) -> None:
    """Add the windows a Client `learned` to the session's `known` ones, and store the new
    ones for the others on this upstream (`scope`)."""
    for model, window in learned.items():
        if known.get(model) != window:
            known[model] = window
            store.learn_window(scope, model, window)

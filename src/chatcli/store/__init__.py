"""The session store (SQLite): the full transcript, working views, events, usage and cost."""

from chatcli.store.sqlite import (
    SessionInfo,
    SessionNotFound,
    SessionStore,
    StoredEvent,
    StoredRequest,
    StoredStickyView,
    default_db_path,
)

__all__ = [
    "SessionInfo",
    "SessionNotFound",
    "SessionStore",
    "StoredEvent",
    "StoredRequest",
    "StoredStickyView",
    "default_db_path",
]

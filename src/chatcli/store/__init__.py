"""The session store (SQLite, or PostgreSQL with `CHATCLI_DATABASE_URL`): the full transcript,
working views, events, usage and cost, and the model windows overflows stated."""

from chatcli.store.sqlite import (
    SessionInfo,
    SessionNotFound,
    SessionStore,
    StoredEvent,
    StoredRequest,
    StoredStickyView,
    default_db_path,
    open_store,
    window_scope,
)

__all__ = [
    "SessionInfo",
    "SessionNotFound",
    "SessionStore",
    "StoredEvent",
    "StoredRequest",
    "StoredStickyView",
    "default_db_path",
    "open_store",
    "window_scope",
]

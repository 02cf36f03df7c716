"""The session store: the full transcript (append-only), requests, views and events, on
SQLite (a file: the default) or PostgreSQL (`CHATCLI_DATABASE_URL`; `chatcli.store.postgres`).

Nothing recovery or compaction does to the working view ever touches the transcript: every
message and every tool result is kept in full. Each append is its own committed transaction,
so a message is durable once the call returns ("acknowledged"). On SQLite, WAL mode and a busy
timeout let two chatcli processes share one file safely; on PostgreSQL any number of processes
share one database. `open_store` is the one place an entry point opens the store.
"""

from __future__ import annotations

import json
import os
import uuid
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from chatcli.errors import ConfigError
from chatcli.messages import Message, Usage
from chatcli.redact import redact_url
from chatcli.serialize import message_from_dict, message_to_dict, usage_from_dict, usage_to_dict
from chatcli.store.db import Database, SqliteDatabase
from chatcli.store.migrations import migrate, transaction
from chatcli.store.postgres import PostgresDatabase, is_postgres_url
from chatcli.store.private import private_directory, private_file
from chatcli.store.views import ViewIndex, dump_json

__all__ = [
    "SessionInfo",
    "SessionNotFound",
    "SessionStore",
    "StoredEvent",
    "StoredRequest",
    "StoredStickyView",
    "default_db_path",
    "open_store",
]

DATABASE_URL_ENV = "CHATCLI_DATABASE_URL"

BUSY_TIMEOUT_SECONDS = 10.0
FREE_PAGES_TO_VACUUM = 256  # 1 MiB of 4 KiB pages: below that, not worth a rewrite
# Pages of a new database file. With SQLite's default 4 KiB, a message row of 2-4k chars (a
# pasted passage, an answer) takes a page of its own, partly empty. With 1 KiB pages a long
# row goes to overflow pages that SQLite fills to the byte (it sizes the part kept in the leaf
# so), and each table and index costs 1 KiB, not 4, so the file stays close to the
# transcript's own size (`benchmarks/store.py`). An existing file keeps its page size.
PAGE_SIZE = 1024


class SessionNotFound(LookupError):
    """No session has that id (or id prefix)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SessionInfo:
    """A session and the provider settings it runs with (`base_url`, `context_window`,
    `max_tokens`: None when not set; never an API key, and `base_url` is stored and shown
    with its credentials redacted: `chatcli.redact`)."""

    id: str
    created_at: str
    title: str | None = None
    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    message_count: int = 0

    def __post_init__(self) -> None:
        # Here, so that no SessionInfo, stored or not, ever holds a credential.
        object.__setattr__(self, "base_url", redact_url(self.base_url))

    @classmethod
    def new(cls, **settings: Any) -> SessionInfo:
        """A new session's info, with a fresh id (nothing is stored yet)."""
        return cls(id=uuid.uuid4().hex[:12], created_at=_now(), **settings)


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredStickyView:
    """A session's sticky view: the view stored with request `request_id`, covering the
    first `upto` messages of the transcript (see `chatcli.history.sticky`). `digest`: the
    `history_digest` of those messages, when the writer knew it (the proxy: so a replica
    tells whether a request extends the cut history without reading the transcript)."""

    request_id: int
    upto: int
    digest: str | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredRequest:
    id: int
    created_at: str
    tag: str
    model: str | None
    usage: Usage
    cost_usd: float | None
    recovery_cost_usd: float | None


@dataclass(frozen=True, slots=True, kw_only=True)
class StoredEvent:
    id: int
    request_id: int | None
    created_at: str
    kind: str
    text: str
    data: Mapping[str, Any]


def default_db_path(environ: Mapping[str, str] | None = None) -> Path:
    """$CHATCLI_HOME/sessions.db, else the user's data directory (XDG on Linux)."""
    env = os.environ if environ is None else environ
    if env.get("CHATCLI_HOME"):
        return Path(env["CHATCLI_HOME"]).expanduser() / "sessions.db"
    data = env.get("XDG_DATA_HOME") or str(Path(env.get("HOME", "~")) / ".local" / "share")
    return Path(data).expanduser() / "chatcli" / "sessions.db"


def open_store(environ: Mapping[str, str] | None = None) -> SessionStore:
    """The store every entry point uses: PostgreSQL when `CHATCLI_DATABASE_URL` names it,
    else the SQLite file at `default_db_path` (ConfigError: a URL of another kind)."""
    env = os.environ if environ is None else environ
    url = env.get(DATABASE_URL_ENV, "").strip()
    if not url:
        return SessionStore(default_db_path(env), data_directory=True)
    if not is_postgres_url(url):
        raise ConfigError(
            f"{DATABASE_URL_ENV}={redact_url(url)!r}: not a postgresql:// URL"
            " (leave it unset for the SQLite file)"
        )
    return SessionStore(url)


class SessionStore:
    """One open database. Use as a context manager or call `close()`."""

    def __init__(self, path: str | Path, *, data_directory: bool = False) -> None:
        """Open (or create) the database at `path`: a file (SQLite), or a postgresql:// URL.
        Directories it creates are 0700; an SQLite database and its -wal/-shm files are
        0600, tightened when they exist. An existing directory is tightened to 0700 only
        when it is chatcli's own (`data_directory`): another is the caller's to set."""
        self.path: Path | None = None
        self._conn: Database
        if isinstance(path, str) and is_postgres_url(path):
            self._conn = PostgresDatabase(path)
        else:
            self.path = Path(path)
            self._conn = _open_sqlite(self.path, data_directory=data_directory)
        self.dialect = self._conn.dialect
        try:
            self.schema_version = migrate(self._conn)
        except BaseException:
            self._conn.close()
            raise
        if isinstance(self._conn, SqliteDatabase):
            self._give_back_free_space()
        self._views = ViewIndex(self._conn)

    def _give_back_free_space(self) -> None:
        """A file mostly free pages (m004 turned copies of views into references) is
        rewritten smaller: once, after the migration, since nothing else frees pages."""
        (free,) = self._conn.execute("PRAGMA freelist_count").fetchone()
        (pages,) = self._conn.execute("PRAGMA page_count").fetchone()
        if free > FREE_PAGES_TO_VACUUM and free * 2 > pages:
            self._conn.execute("VACUUM")

    def close(self) -> None:
        self._conn.close()

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """The store's calls inside commit together (one commit: one fsync), or not at all;
        if not, what this store remembers of the database (`ViewIndex`) is dropped with
        them. Nested: one transaction."""
        try:
            with transaction(self._conn):
                yield
        except BaseException:
            self._views = ViewIndex(self._conn)
            raise

    def lock(self, name: str) -> None:
        """Inside `transaction()`: wait for, then hold until it ends, the lock `name` (any
        process on this database waits for it)."""
        self._conn.lock(name)

    def __enter__(self) -> SessionStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # sessions ---------------------------------------------------------------------------

    def create_session(self, **settings: Any) -> SessionInfo:
        """A new session, stored now (`settings`: SessionInfo's fields but the id)."""
        info = SessionInfo.new(**settings)
        self.save_session(info)
        return info

    def save_session(self, info: SessionInfo) -> None:
        """Store a session made with `SessionInfo.new` (the chat stores it at its first
        message, so that opening the chat and leaving leaves nothing behind)."""
        with transaction(self._conn):
            self._conn.execute(
                "INSERT INTO sessions(id, created_at, title, provider, model, base_url,"
                " context_window, max_tokens) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
                (info.id, info.created_at, info.title, *_settings(info)),
            )
            self._touch(info.id)

    def update_settings(self, info: SessionInfo) -> None:
        """Store `info`'s provider settings (after /model or /max-tokens)."""
        self._conn.execute(
            "UPDATE sessions SET provider = ?, model = ?, base_url = ?, context_window = ?,"
            " max_tokens = ? WHERE id = ?",
            (*_settings(info), info.id),
        )

    def get_session(self, session_id: str) -> SessionInfo:
        """By full id, else a unique prefix of it."""
        rows = self.find_sessions(session_id)
        rows = tuple(r for r in rows if r.id == session_id) or rows
        if len(rows) != 1:
            found = "no session" if not rows else f"{len(rows)} sessions"
            raise SessionNotFound(f"{found} matching {session_id!r}")
        return rows[0]

    def list_sessions(self) -> tuple[SessionInfo, ...]:
        """Most recently active first."""
        return self._session_rows("", ())

    def latest_session(self) -> SessionInfo | None:
        """The most recently active session that holds a message (an empty one has nothing
        to continue)."""
        rows = self._session_rows(
            "WHERE EXISTS (SELECT 1 FROM messages m WHERE m.session_id = s.id)", ()
        )
        return rows[0] if rows else None

    def delete_session(self, session_id: str) -> None:
        """The only way anything is ever deleted: an explicit user command."""
        info = self.get_session(session_id)
        self._conn.execute("DELETE FROM sessions WHERE id = ?", (info.id,))
        self._views.forget(info.id)

    def find_sessions(self, prefix: str) -> tuple[SessionInfo, ...]:
        """The sessions whose id starts with `prefix`, most recently active first."""
        return self._session_rows("WHERE s.id LIKE ? ESCAPE '\\'", (_like_prefix(prefix),))

    # transcript -------------------------------------------------------------------------

    def append_messages(self, session_id: str, messages: Sequence[Message]) -> tuple[int, ...]:
        """Append to the transcript in one transaction; returns the new sequence numbers.
        Appends to one session take turns, whichever process makes them."""
        bodies = [dump_json(message_to_dict(m)) for m in messages]
        now = _now()
        with transaction(self._conn):
            self._conn.lock(f"chatcli.chat.session:{session_id}")
            (last,) = self._conn.execute(
                "SELECT COALESCE(MAX(seq), 0) FROM messages WHERE session_id = ?", (session_id,)
            ).fetchone()
            seqs = tuple(range(last + 1, last + 1 + len(messages)))
            self._conn.executemany(
                "INSERT INTO messages(session_id, seq, created_at, role, body)"
                " VALUES (?, ?, ?, ?, ?)",
                [
                    (session_id, seq, now, m.role.value, body)
                    for seq, m, body in zip(seqs, messages, bodies, strict=True)
                ],
            )
            self._touch(session_id)
        self._views.appended(session_id, seqs, bodies)
        return seqs

    def _touch(self, session_id: str) -> None:
        self._conn.execute(
            "UPDATE sessions SET last_active = (SELECT MAX(last_active) + 1 FROM sessions)"
            " WHERE id = ?",
            (session_id,),
        )

    def transcript(self, session_id: str, *, after: int = 0) -> tuple[Message, ...]:
        """The session's messages (those after sequence number `after`), in order."""
        rows = self._conn.execute(
            "SELECT body FROM messages WHERE session_id = ? AND seq > ? ORDER BY seq",
            (session_id, after),
        )
        return tuple(message_from_dict(json.loads(body)) for (body,) in rows)

    # requests, views, events ------------------------------------------------------------

    def record_request(
        self,
        session_id: str,
        *,
        tag: str,
        model: str | None,
        usage: Usage,
        cost_usd: float | None = None,
        recovery_cost_usd: float | None = None,
        view: Sequence[Message] | None = None,
        events: Sequence[tuple[str, str, Mapping[str, Any]]] = (),
    ) -> int:
        """One request (tag: "chat", "compaction", ...) with its events (kind, text, data)
        and the working view it sent, stored by reference (`chatcli.store.views`)."""
        bodies = None if view is None else [dump_json(message_to_dict(m)) for m in view]
        try:
            with transaction(self._conn):
                record = None if bodies is None else self._views.record(session_id, bodies)
                (request_id,) = self._conn.execute(
                    "INSERT INTO requests(session_id, created_at, tag, model, usage, cost_usd,"
                    " recovery_cost_usd, view) VALUES (?, ?, ?, ?, ?, ?, ?, ?) RETURNING id",
                    (
                        session_id,
                        _now(),
                        tag,
                        model,
                        dump_json(usage_to_dict(usage)),
                        cost_usd,
                        recovery_cost_usd,
                        None if record is None else record.to_json(),
                    ),
                ).fetchone()
                self._conn.executemany(
                    "INSERT INTO events(session_id, request_id, created_at, kind, text, data)"
                    " VALUES (?, ?, ?, ?, ?, ?)",
                    [(session_id, request_id, _now(), k, t, dump_json(d)) for k, t, d in events],
                )
        except BaseException:
            self._views.forget(session_id)  # the view parts it noted were rolled back
            raise
        if record is not None:
            self._views.stored(session_id, request_id, record)
        return int(request_id)

    def record_event(self, session_id: str, kind: str, text: str, data: Mapping[str, Any]) -> None:
        """An event that belongs to no request (a /clear)."""
        self._conn.execute(
            "INSERT INTO events(session_id, request_id, created_at, kind, text, data)"
            " VALUES (?, NULL, ?, ?, ?, ?)",
            (session_id, _now(), kind, text, dump_json(data)),
        )

    def requests(self, session_id: str) -> tuple[StoredRequest, ...]:
        rows = self._conn.execute(
            "SELECT id, created_at, tag, model, usage, cost_usd, recovery_cost_usd FROM requests"
            " WHERE session_id = ? ORDER BY id",
            (session_id,),
        )
        return tuple(
            StoredRequest(
                id=r[0],
                created_at=r[1],
                tag=r[2],
                model=r[3],
                usage=usage_from_dict(json.loads(r[4])),
                cost_usd=r[5],
                recovery_cost_usd=r[6],
            )
            for r in rows
        )

    def latest_view(self, session_id: str) -> tuple[Message, ...] | None:
        """The working view most recently sent in this session, if any was stored."""
        row = self._conn.execute(
            "SELECT id FROM requests WHERE session_id = ? AND view IS NOT NULL"
            " ORDER BY id DESC LIMIT 1",
            (session_id,),
        ).fetchone()
        return None if row is None else self.view(session_id, row[0])

    def view(self, session_id: str, request_id: int) -> tuple[Message, ...]:
        """The working view stored with request `request_id` of the session (KeyError: it
        stored none)."""
        bodies = self._views.bodies(session_id, self._views.refs(request_id))
        return tuple(message_from_dict(json.loads(body)) for body in bodies)

    def sticky_view(self, session_id: str) -> StoredStickyView | None:
        """The session's sticky view, None when it has none."""
        row = self._conn.execute(
            "SELECT sticky_view FROM sessions WHERE id = ?", (session_id,)
        ).fetchone()
        if row is None or row[0] is None:
            return None
        return _sticky_from_json(row[0])

    def save_sticky_view(self, session_id: str, sticky: StoredStickyView | None) -> None:
        """Keep `sticky` as the session's sticky view (None: it has none any more)."""
        value = None
        if sticky is not None:
            data: dict[str, Any] = {"request_id": sticky.request_id, "upto": sticky.upto}
            value = dump_json(data if sticky.digest is None else {**data, "digest": sticky.digest})
        self._conn.execute("UPDATE sessions SET sticky_view = ? WHERE id = ?", (value, session_id))

    def cut_conversation(
        self, conversation: str, session_id: str, sticky: StoredStickyView
    ) -> None:
        """Keep `sticky` as session `session_id`'s sticky view and as the latest cut of
        `conversation` (a proxied conversation's key: its sessions are KEY and KEY~N)."""
        with transaction(self._conn):
            self.save_sticky_view(session_id, sticky)
            self._conn.execute(
                "INSERT INTO conversation_cuts(conversation, session_id) VALUES (?, ?)"
                " ON CONFLICT (conversation) DO UPDATE SET session_id = excluded.session_id",
                (conversation, session_id),
            )

    def conversation_cut(self, conversation: str) -> tuple[str, StoredStickyView] | None:
        """The latest cut of `conversation` (`cut_conversation`) and the session holding it;
        None: it has none (never cut, or a compaction or clear of that session dropped it)."""
        row = self._conn.execute(
            "SELECT s.id, s.sticky_view FROM conversation_cuts c JOIN sessions s"
            " ON s.id = c.session_id WHERE c.conversation = ?",
            (conversation,),
        ).fetchone()
        if row is None or row[1] is None:
            return None
        return row[0], _sticky_from_json(row[1])

    def events(self, session_id: str) -> tuple[StoredEvent, ...]:
        rows = self._conn.execute(
            "SELECT id, request_id, created_at, kind, text, data FROM events"
            " WHERE session_id = ? ORDER BY id",
            (session_id,),
        )
        return tuple(
            StoredEvent(
                id=r[0],
                request_id=r[1],
                created_at=r[2],
                kind=r[3],
                text=r[4],
                data=json.loads(r[5]),
            )
            for r in rows
        )

    # what was learned about models ------------------------------------------------------

    def learn_window(self, upstream: str, model: str, context_window: int) -> None:
        """An overflow stated `model`'s window at `upstream` (a provider and its redacted
        URL): every process sharing this store pre-flights against it from now on."""
        self._conn.execute(
            "INSERT INTO model_windows(upstream, model, context_window, learned_at)"
            " VALUES (?, ?, ?, ?) ON CONFLICT (upstream, model) DO UPDATE SET"
            " context_window = excluded.context_window, learned_at = excluded.learned_at",
            (upstream, model, context_window, _now()),
        )

    def proxy_key(self, name: str, new: bytes) -> bytes:
        """The secret named `name` the proxy replicas share: the stored one, else `new`, stored
        now (the first replica to ask makes it; every other one reads it)."""
        self._conn.execute(
            "INSERT INTO proxy_keys(name, secret, created_at) VALUES (?, ?, ?)"
            " ON CONFLICT (name) DO NOTHING",
            (name, new.hex(), _now()),
        )
        row = self._conn.execute("SELECT secret FROM proxy_keys WHERE name = ?", (name,))
        return bytes.fromhex(row.fetchone()[0])

    def proxy_keys(self, prefix: str) -> dict[str, bytes]:
        """The secrets the proxy replicas share whose names begin with `prefix`, by name."""
        rows = self._conn.execute(
            "SELECT name, secret FROM proxy_keys WHERE substr(name, 1, ?) = ?",
            (len(prefix), prefix),
        )
        return {name: bytes.fromhex(secret) for name, secret in rows}

    def learned_windows(self, upstream: str) -> dict[str, int]:
        """The windows learned at `upstream`, by model."""
        rows = self._conn.execute(
            "SELECT model, context_window FROM model_windows WHERE upstream = ?", (upstream,)
        )
        return {model: int(window) for model, window in rows}

    def _session_rows(self, where: str, args: tuple[Any, ...]) -> tuple[SessionInfo, ...]:
        rows = self._conn.execute(
            "SELECT s.id, s.created_at, s.title, s.provider, s.model, s.base_url,"
            " s.context_window, s.max_tokens,"
            # MAX(seq), not COUNT(*): the same (seqs run 1..n), read from the key's index.
            " COALESCE((SELECT MAX(seq) FROM messages m WHERE m.session_id = s.id), 0)"
            f" FROM sessions s {where} ORDER BY s.last_active DESC",
            args,
        )
        return tuple(
            SessionInfo(
                id=r[0],
                created_at=r[1],
                title=r[2],
                provider=r[3],
                model=r[4],
                base_url=r[5],
                context_window=r[6],
                max_tokens=r[7],
                message_count=r[8],
            )
            for r in rows
        )


def _open_sqlite(path: Path, *, data_directory: bool) -> SqliteDatabase:
    if data_directory or not path.parent.exists():
        private_directory(path.parent)
    private_file(path)
    for suffix in ("-wal", "-shm"):
        private_file(Path(f"{path}{suffix}"), create=False)
    db = SqliteDatabase.connect(path, timeout=BUSY_TIMEOUT_SECONDS)
    # Before anything is written: it applies to a new file only (see PAGE_SIZE).
    db.execute(f"PRAGMA page_size={PAGE_SIZE}")
    db.execute("PRAGMA journal_mode=WAL")
    db.execute("PRAGMA foreign_keys=ON")
    # FULL: a committed append survives power loss too, not only a killed process.
    db.execute("PRAGMA synchronous=FULL")
    return db


def _sticky_from_json(text: str) -> StoredStickyView:
    data = json.loads(text)
    return StoredStickyView(
        request_id=int(data["request_id"]), upto=int(data["upto"]), digest=data.get("digest")
    )


def window_scope(provider: str | None, base_url: str | None) -> str:
    """The `upstream` that `learn_window` and `learned_windows` key windows by: the provider
    and its base URL, redacted (a URL's credentials are never stored). The one definition,
    so the chat and every proxy replica on one upstream share what each learns."""
    return f"{provider or ''} {redact_url(base_url) or ''}".strip()


def _settings(info: SessionInfo) -> tuple[Any, ...]:
    return (info.provider, info.model, info.base_url, info.context_window, info.max_tokens)


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="milliseconds")


def _like_prefix(prefix: str) -> str:
    escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
    return escaped + "%"

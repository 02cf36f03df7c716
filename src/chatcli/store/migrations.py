"""Schema migrations of the session store: named functions, applied in order, recorded.

Add a migration by appending a function to `MIGRATIONS`; never edit one that has shipped.
They run on SQLite and PostgreSQL alike: write them in SQLite's spelling (`?` placeholders,
`INTEGER PRIMARY KEY AUTOINCREMENT`, `REAL`), which `chatcli.store.db` translates, and ask
`conn.columns(table)` instead of a PRAGMA.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from contextlib import AbstractContextManager
from datetime import UTC, datetime

from chatcli.redact import redact_url
from chatcli.store.db import Database
from chatcli.store.views import ViewIndex, dump_json

__all__ = ["MIGRATIONS", "migrate", "transaction"]


def m001_initial(conn: Database) -> None:
    _run_script(
        conn,
        """
        CREATE TABLE sessions (
            id TEXT PRIMARY KEY,
            created_at TEXT NOT NULL,
            title TEXT,
            provider TEXT,
            model TEXT,
            -- A counter, not a clock: orders sessions by activity even within one millisecond.
            last_active INTEGER NOT NULL DEFAULT 0
        );
        -- The full transcript: append-only, one row per message, every tool result in full.
        CREATE TABLE messages (
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            seq INTEGER NOT NULL,
            created_at TEXT NOT NULL,
            role TEXT NOT NULL,
            body TEXT NOT NULL,
            PRIMARY KEY (session_id, seq)
        );
        -- One row per model request (or compaction): usage, cost, and the view that was sent.
        CREATE TABLE requests (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL,
            tag TEXT NOT NULL,
            model TEXT,
            usage TEXT NOT NULL,
            cost_usd REAL,
            recovery_cost_usd REAL,
            view TEXT
        );
        -- Every recovery/compaction event, in order, tied to its request.
        CREATE TABLE events (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            request_id INTEGER REFERENCES requests(id) ON DELETE CASCADE,
            created_at TEXT NOT NULL,
            kind TEXT NOT NULL,
            text TEXT NOT NULL,
            data TEXT NOT NULL
        );
        CREATE INDEX events_by_session ON events(session_id, id);
        CREATE INDEX requests_by_session ON requests(session_id, id);
        """,
    )


def m002_session_settings(conn: Database) -> None:
    """The provider settings a session runs with (never a key), so a reopened session runs
    on the same window and output limit: a local model's n_ctx is not in any catalog."""
    _run_script(
        conn,
        """
        ALTER TABLE sessions ADD COLUMN base_url TEXT;
        ALTER TABLE sessions ADD COLUMN context_window INTEGER;
        ALTER TABLE sessions ADD COLUMN max_tokens INTEGER;
        """,
    )


def m003_clear_is_an_event(conn: Database) -> None:
    """A /clear is an event of the session, not a request: it made no call, and as a request
    it showed in the cost table and counted as one."""
    _run_script(
        conn,
        """
        UPDATE events SET request_id = NULL
            WHERE request_id IN (SELECT id FROM requests WHERE tag = 'clear');
        DELETE FROM requests WHERE tag = 'clear';
        """,
    )


def m004_views_by_reference(conn: Database) -> None:
    """Views are stored by reference (`chatcli.store.views`): a full JSON copy of the view per
    request grew the database with the square of the conversation. Converts every stored
    view, and drops the copy of the view that compaction events held when it is the one their
    request stores."""
    _run_script(
        conn,
        """
        -- The messages of stored views that are not transcript messages as they are (cut
        -- results, stubs, summaries, notices): each stored once per session.
        CREATE TABLE view_parts (
            id INTEGER PRIMARY KEY AUTOINCREMENT,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE,
            digest TEXT NOT NULL,
            body TEXT NOT NULL,
            source_seq INTEGER,  -- see m006_view_parts_by_source
            head INTEGER,
            tail INTEGER,
            quotes TEXT,  -- see m011_view_parts_quoting
            UNIQUE (session_id, digest)
        );
        """,
    )
    _drop_event_view_copies(conn)
    index, seen = ViewIndex(conn), set()
    rows = conn.execute(
        "SELECT id, session_id, view FROM requests WHERE view IS NOT NULL ORDER BY id"
    )
    for request_id, session_id, view in rows.fetchall():
        if session_id not in seen:
            index.starts_empty(session_id)
            seen.add(session_id)
        record = index.record(session_id, [dump_json(m) for m in json.loads(view)])
        conn.execute("UPDATE requests SET view = ? WHERE id = ?", (record.to_json(), request_id))
        index.stored(session_id, request_id, record)


def _drop_event_view_copies(conn: Database) -> None:
    """A compaction event's "view" is dropped where its request stores the same view (the
    session reads it from there); any other is kept."""
    events = conn.execute(
        "SELECT e.id, e.data, r.view FROM events e JOIN requests r ON r.id = e.request_id"
        " WHERE e.kind = 'compaction' AND r.view IS NOT NULL"
    )
    for event_id, data, view in events.fetchall():
        fields = json.loads(data)
        if "view" in fields and fields["view"] == json.loads(view):
            del fields["view"]
            conn.execute("UPDATE events SET data = ? WHERE id = ?", (dump_json(fields), event_id))


def m005_redact_base_urls(conn: Database) -> None:
    """Sessions stored a `base_url` as given, credentials and all (`https://user:token@host`,
    `?api-key=...`): store it redacted, as new sessions are."""
    rows = conn.execute("SELECT id, base_url FROM sessions WHERE base_url IS NOT NULL")
    for session_id, base_url in rows.fetchall():
        redacted = redact_url(base_url)
        if redacted != base_url:
            conn.execute("UPDATE sessions SET base_url = ? WHERE id = ?", (redacted, session_id))


def m006_view_parts_by_source(conn: Database) -> None:
    """A view part made from a transcript message (a cut tool result) can be stored as a
    reference to it plus its middle (see `chatcli.store.views`); parts stored before stay
    whole (NULL source). m004 creates the table with these columns now (its conversion
    writes such parts); a table an older chatcli made gets them here."""
    present = conn.columns("view_parts")
    for column in ("source_seq", "head", "tail"):
        if column not in present:
            conn.execute(f"ALTER TABLE view_parts ADD COLUMN {column} INTEGER")


def m007_model_windows(conn: Database) -> None:
    """The context windows overflows stated, by upstream and model: one process (a proxy
    replica, a chat) learns a window from a rejected call, and every other one pre-flights
    its requests against it instead of paying for the same rejection."""
    _run_script(
        conn,
        """
        CREATE TABLE model_windows (
            upstream TEXT NOT NULL,  -- the provider and its base URL (redacted)
            model TEXT NOT NULL,
            context_window INTEGER NOT NULL,
            learned_at TEXT NOT NULL,
            PRIMARY KEY (upstream, model)
        );
        """,
    )


def m008_sticky_views(conn: Database) -> None:
    """The cut a recovery level made, kept for the session's next requests (a sticky view,
    `chatcli.history.sticky`): which stored request's view it is and how many transcript
    messages it covers, as JSON. NULL: no cut; the view follows the last compaction or clear."""
    _run_script(conn, "ALTER TABLE sessions ADD COLUMN sticky_view TEXT")


def m009_conversation_cuts(conn: Database) -> None:
    """Which session holds a proxied conversation's latest sticky cut, by conversation key
    (`chatcli.proxy.sessions`): one indexed read per request finds the cut whichever branch
    session (KEY, KEY~N) it was made in. The cut itself stays in `sessions.sticky_view`."""
    _run_script(
        conn,
        """
        CREATE TABLE conversation_cuts (
            conversation TEXT PRIMARY KEY,
            session_id TEXT NOT NULL REFERENCES sessions(id) ON DELETE CASCADE
        );
        """,
    )


def m010_proxy_keys(conn: Database) -> None:
    """Secrets the proxy replicas share, by name: the key that seals the compaction tokens
    the proxy hands out (`chatcli.proxy.compaction`), so that any replica, and a restarted
    one, opens them."""
    _run_script(
        conn,
        """
        CREATE TABLE proxy_keys (
            name TEXT PRIMARY KEY,
            secret TEXT NOT NULL,  -- hex
            created_at TEXT NOT NULL
        );
        """,
    )


def m011_view_parts_quoting(conn: Database) -> None:
    """A view part that quotes transcript messages (the carried-instructions block) can be
    stored as the slices it quotes plus the rest (see `chatcli.store.views`); parts stored
    before stay whole (NULL quotes). m004 creates the table with the column now (its
    conversion writes such parts); a table an older chatcli made gets it here."""
    if "quotes" not in conn.columns("view_parts"):
        conn.execute("ALTER TABLE view_parts ADD COLUMN quotes TEXT")


Migration = Callable[[Database], None]
MIGRATIONS: tuple[Migration, ...] = (
    m001_initial,
    m002_session_settings,
    m003_clear_is_an_event,
    m004_views_by_reference,
    m005_redact_base_urls,
    m006_view_parts_by_source,
    m007_model_windows,
    m008_sticky_views,
    m009_conversation_cuts,
    m010_proxy_keys,
    m011_view_parts_quoting,
)


def migrate(conn: Database) -> int:
    """Apply every pending migration, each in its own transaction. Returns the schema version.
    Processes opening one database at once migrate one at a time (`Database.lock`)."""
    with transaction(conn):
        conn.lock("chatcli.migrate")
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations ("
            " version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
    for version, migration in enumerate(MIGRATIONS, start=1):
        with transaction(conn):
            conn.lock("chatcli.migrate")
            done = conn.execute(
                "SELECT 1 FROM schema_migrations WHERE version = ?", (version,)
            ).fetchone()
            if not done:
                migration(conn)
                conn.execute(
                    "INSERT INTO schema_migrations(version, name, applied_at) VALUES (?, ?, ?)",
                    (version, migration.__name__, datetime.now(UTC).isoformat()),
                )
    return len(MIGRATIONS)


def transaction(conn: Database) -> AbstractContextManager[None]:
    """The database's transaction: committed at the end, rolled back on any exception."""
    return conn.transaction()


def _run_script(conn: Database, script: str) -> None:
    # Not executescript(): it COMMITs first, which would break the migration's transaction.
    lines = [ln for ln in script.splitlines() if not ln.strip().startswith("--")]
    for statement in "\n".join(lines).split(";"):
        if statement.strip():
            conn.execute(statement)

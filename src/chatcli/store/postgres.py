"""The store on PostgreSQL (`CHATCLI_DATABASE_URL=postgresql://...`): psycopg 3 over a
`psycopg_pool` pool, for many chat processes and proxy replicas on many machines.

Statements are the store's own, written once in SQLite's spelling and translated by
`chatcli.store.db.postgres_sql`. A statement outside a transaction runs on any pooled
connection in autocommit mode; `transaction()` holds one connection for the calling thread
until it commits, so the store's multi-statement writes are atomic as on SQLite. Where SQLite
serialises every writer (BEGIN IMMEDIATE), PostgreSQL lets writers run side by side:
`lock(name)` is the transaction-scoped advisory lock the store takes where two replicas
must take turns (migrations, appends to one session).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any

from chatcli.errors import ConfigError
from chatcli.redact import redact_url
from chatcli.store.db import postgres_sql

__all__ = ["POSTGRES_EXTRA_MISSING", "PostgresDatabase", "is_postgres_url"]

POSTGRES_EXTRA_MISSING = (
    "CHATCLI_DATABASE_URL names PostgreSQL, which needs psycopg and psycopg_pool: "
    "pip install 'chatcli-recovery[postgres]'"
)
CONNECT_TIMEOUT_S = 10.0
POOL_MAX_SIZE = 8  # connections per process: the proxy's writer, readers and the chat


def is_postgres_url(url: str) -> bool:
    return url.startswith(("postgresql://", "postgres://"))


class _Rows:
    """A statement's rows, fetched before its connection went back to the pool."""

    def __init__(self, rows: list[Any]) -> None:
        self._rows = rows

    def fetchone(self) -> Any:
        return self._rows[0] if self._rows else None

    def fetchall(self) -> list[Any]:
        return list(self._rows)

    def __iter__(self) -> Iterator[Any]:
        return iter(self._rows)


class PostgresDatabase:
    """A pool of connections to one PostgreSQL database (see the module docstring)."""

    dialect = "postgresql"

    def __init__(self, url: str, *, max_size: int = POOL_MAX_SIZE) -> None:
        try:
            import psycopg
            from psycopg_pool import ConnectionPool, PoolTimeout
        except ImportError as exc:
            raise ImportError(POSTGRES_EXTRA_MISSING) from exc
        self._errors: tuple[type[BaseException], ...] = (psycopg.OperationalError, PoolTimeout)
        self.pool = ConnectionPool(
            url,
            min_size=1,
            max_size=max_size,
            kwargs={"autocommit": True},
            open=False,
            timeout=CONNECT_TIMEOUT_S,
        )
        self._local = threading.local()
        try:
            self.pool.open(wait=True, timeout=CONNECT_TIMEOUT_S)
        except self._errors as exc:
            self.pool.close()
            raise ConfigError(
                f"CHATCLI_DATABASE_URL={redact_url(url)!r}: cannot connect to PostgreSQL: {exc}"
            ) from exc

    def execute(self, sql: str, params: Sequence[Any] = ()) -> _Rows:
        with self._connection() as conn:
            # Always a tuple, never None: psycopg then reads `%%` as the `%` postgres_sql doubled.
            cur = conn.execute(postgres_sql(sql), tuple(params))
            return _Rows(cur.fetchall() if cur.description is not None else [])

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        with self._connection() as conn, conn.cursor() as cur:
            cur.executemany(postgres_sql(sql), [tuple(r) for r in rows])

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """One connection for this thread until COMMIT (ROLLBACK on any exception). Nested:
        one transaction (the outermost commits)."""
        if getattr(self._local, "conn", None) is not None:
            yield
            return
        with self.pool.connection() as conn, conn.transaction():
            self._local.conn = conn
            try:
                yield
            finally:
                self._local.conn = None

    def lock(self, name: str) -> None:
        """Wait for, then hold until this transaction ends, the advisory lock `name`."""
        self.execute("SELECT pg_advisory_xact_lock(hashtextextended(?, 0))", (name,))

    def columns(self, table: str) -> set[str]:
        rows = self.execute(
            "SELECT column_name FROM information_schema.columns"
            " WHERE table_schema = current_schema() AND table_name = ?",
            (table,),
        )
        return {row[0] for row in rows}

    def close(self) -> None:
        self.pool.close()

    @contextmanager
    def _connection(self) -> Iterator[Any]:
        conn = getattr(self._local, "conn", None)
        if conn is not None:
            yield conn
            return
        with self.pool.connection() as pooled:
            yield pooled

"""A real PostgreSQL server for the store's tests, started once per test session.

Fixtures (load them with `pytest_plugins = ("tests.postgres",)`):

- `postgres_server`: Debian's postgresql-15 binaries (`initdb`, `pg_ctl`; another directory
  with $CHATCLI_PG_BIN) run a throwaway cluster on a free loopback port, in a temp directory
  owned by the `postgres` user (PostgreSQL refuses to run as root: as root, the binaries run
  through `runuser -u postgres --`). It is stopped and its directory removed at the end.
  Yields its admin URL.
- `postgres_url`: a new, empty database on that server for one test; its URL.
- `location`: parametrized over both backends, where a test opens its store: a new SQLite
  file, or `postgres_url` (the PostgreSQL server is started only for that case).

Without the binaries the tests are skipped with a message saying how to install them; with
CHATCLI_REQUIRE_SERVERS=1 (CI, after installing them) they fail instead.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import tempfile
import uuid
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import pytest

__all__ = [
    "create_database",
    "location",
    "pg_bin",
    "postgres_server",
    "postgres_url",
    "running_postgres",
]

DEFAULT_PG_BIN = "/usr/lib/postgresql/15/bin"
START_TIMEOUT_S = 60


def free_port() -> int:
    """A free loopback port (here, not from tests/proxy_harness.py: scripts/check-installs.sh
    starts the server where neither uvicorn nor the proxy is installed)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def pg_bin() -> Path:
    return Path(os.environ.get("CHATCLI_PG_BIN", DEFAULT_PG_BIN))


def _unavailable(why: str) -> None:
    message = f"{why}; install Debian's postgresql-15 (apt-get install -y postgresql-15)"
    if os.environ.get("CHATCLI_REQUIRE_SERVERS") == "1":
        pytest.fail(f"CHATCLI_REQUIRE_SERVERS=1: {message}")
    pytest.skip(message)


def _as_postgres(command: Sequence[str]) -> list[str]:
    """`command` as the `postgres` user when we are root (PostgreSQL will not run as root)."""
    if os.geteuid() != 0:
        return list(command)
    return ["runuser", "-u", "postgres", "--", *command]


class ServerFailed(RuntimeError):
    """initdb or pg_ctl failed (the message holds their output)."""


def _run(command: Sequence[str], log: Path) -> None:
    with log.open("ab") as out:
        done = subprocess.run(
            _as_postgres(command), stdout=out, stderr=subprocess.STDOUT, timeout=START_TIMEOUT_S
        )
    if done.returncode != 0:
        raise ServerFailed(
            f"{command[0]} exited with {done.returncode}:\n{log.read_text()[-3000:]}"
        )


@contextmanager
def running_postgres() -> Iterator[str]:
    """A throwaway PostgreSQL cluster on a free loopback port while the block runs; its admin
    URL (also for benchmarks/proxy_store.py). FileNotFoundError: no binaries."""
    initdb, pg_ctl = pg_bin() / "initdb", pg_bin() / "pg_ctl"
    if not os.access(initdb, os.X_OK):
        raise FileNotFoundError(f"PostgreSQL's initdb not found at {initdb}")
    # Not pytest's tmp_path: its parents are root's, 0700, where `postgres` cannot enter.
    root = Path(tempfile.mkdtemp(prefix="chatcli-pg-"))
    if os.geteuid() == 0:
        shutil.chown(root, "postgres", "postgres")
    data, log, port = root / "data", root / "setup.log", free_port()
    try:
        _run([str(initdb), "-D", str(data), "-U", "postgres", "-A", "trust", "-E", "UTF8"], log)
        # fsync off: this cluster lives for one run; the tests kill clients, never it.
        options = f"-p {port} -k {root} -c listen_addresses=127.0.0.1 -c fsync=off"
        server_log = root / "server.log"  # written by the server, as `postgres`
        _run(
            [str(pg_ctl), "-D", str(data), "-l", str(server_log), "-o", options, "-w", "start"], log
        )
        yield f"postgresql://postgres@127.0.0.1:{port}"
    finally:
        subprocess.run(
            _as_postgres([str(pg_ctl), "-D", str(data), "-m", "immediate", "-w", "stop"]),
            capture_output=True,
            timeout=START_TIMEOUT_S,
        )
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[str]:
    pytest.importorskip(
        "psycopg", reason="psycopg is not installed: pip install 'chatcli-recovery[postgres]'"
    )
    try:
        with running_postgres() as url:
            yield url
    except FileNotFoundError as exc:
        _unavailable(str(exc))
    except ServerFailed as exc:
        pytest.fail(str(exc))


def create_database(server: str) -> str:
    """A new, empty database on `server`; its URL."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:12]}"
    with psycopg.connect(f"{server}/postgres", autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    return f"{server}/{name}"


@pytest.fixture
def postgres_url(postgres_server: str) -> str:
    return create_database(postgres_server)


@pytest.fixture(params=["sqlite", "postgresql"])
def location(request: pytest.FixtureRequest, tmp_path: Path) -> str | Path:
    if request.param == "sqlite":
        return tmp_path / "db"
    url: str = request.getfixturevalue("postgres_url")
    return url

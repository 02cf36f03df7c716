"""Privacy of what chatcli stores: file permissions (directory 0700, files 0600, existing
ones tightened) and credentials redacted from a base_url wherever it is stored or shown."""

from __future__ import annotations

import io
import json
import logging
import sqlite3
import stat
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from chatcli.chat.settings import load_settings
from chatcli.cli.context import reopened_settings
from chatcli.cli.ui import Ui
from chatcli.errors import ConfigError
from chatcli.messages import Message
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.counting import LlamaServerTokens
from chatcli.providers.discovery import discover_window
from chatcli.providers.gemini import Gemini
from chatcli.providers.openai import OpenAI
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.redact import redact_url
from chatcli.store import SessionStore
from tests.test_cli_inprocess import TEST_PROVIDER, run, stored
from tests.test_store import migrate_to

SECRET = "s3cr3t-t0ken"


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"https://user:{SECRET}@host/v1", "https://***@host/v1"),
        (f"https://{SECRET}@host:8443/v1", "https://***@host:8443/v1"),
        (
            f"https://x.openai.azure.com/v1?api-version=2025-01&api-key={SECRET}",
            "https://x.openai.azure.com/v1?api-version=2025-01&api-key=***",
        ),
        (f"https://host/v1beta?key={SECRET}#top", "https://host/v1beta?key=***#top"),
        (f"https://host/v1?access_token={SECRET}&x=1", "https://host/v1?access_token=***&x=1"),
        ("http://127.0.0.1:8080/v1", "http://127.0.0.1:8080/v1"),
        ("http://[::1", "***"),  # unreadable: nothing of it is shown
        (None, None),
    ],
)
def test_redact_url(url: str | None, shown: str | None) -> None:
    assert redact_url(url) == shown
    assert redact_url(shown) == shown  # redacting twice changes nothing


def test_the_store_and_its_directory_are_the_users_only(tmp_path: Path) -> None:
    home = tmp_path / "new" / "home"
    with SessionStore(home / "sessions.db") as store:
        sid = store.create_session().id
        store.append_messages(sid, [Message.user("a pasted secret")])
        for name in ("sessions.db", "sessions.db-wal", "sessions.db-shm"):
            assert mode(home / name) == 0o600, name
    assert mode(home) == 0o700


def test_existing_files_are_tightened_on_open(tmp_path: Path) -> None:
    data = tmp_path / "data"
    data.mkdir(mode=0o755)
    data.chmod(0o755)
    with SessionStore(data / "sessions.db") as store:  # open: its -wal stays
        store.create_session()
        for path in (data / "sessions.db", data / "sessions.db-wal"):
            path.chmod(0o644)
        with SessionStore(data / "sessions.db"):
            assert mode(data / "sessions.db") == 0o600
            assert mode(data / "sessions.db-wal") == 0o600
    assert mode(data) == 0o755  # another directory is the caller's to set
    SessionStore(data / "sessions.db", data_directory=True).close()
    assert mode(data) == 0o700


def test_the_prompt_history_file_is_the_users_only(tmp_path: Path) -> None:
    ui = Ui(console=Console(file=io.StringIO()))
    ui.start_prompt(tmp_path / "new" / "history")
    assert mode(tmp_path / "new" / "history") == 0o600
    assert mode(tmp_path / "new") == 0o700
    (tmp_path / "old").write_text("+typed\n")
    (tmp_path / "old").chmod(0o644)
    ui.start_prompt(tmp_path / "old")
    assert mode(tmp_path / "old") == 0o600


def test_the_chat_makes_its_data_directory_private(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    home.chmod(0o755)
    run(home, ["hello"])
    assert mode(home) == 0o700
    assert mode(home / "sessions.db") == 0o600 and mode(home / "history") == 0o600


def test_a_base_url_with_credentials_is_never_stored_nor_listed(tmp_path: Path) -> None:
    url = f"https://user:{SECRET}@127.0.0.1:9/v1?api-key={SECRET}"
    code, _ = run(tmp_path, ["hello"], ("--provider", TEST_PROVIDER, "--base-url", url))
    assert code == 0
    code, listing = run(tmp_path, [], ("sessions", "list", "--json"))
    (listed,) = json.loads(listing)
    assert listed["base_url"] == "https://***@127.0.0.1:9/v1?api-key=***"
    with stored(tmp_path) as store:
        assert SECRET not in repr(store.list_sessions())
    for name in ("sessions.db", "sessions.db-wal"):
        path = tmp_path / name
        assert not path.exists() or SECRET.encode() not in path.read_bytes(), name


def test_a_reopened_session_takes_its_credentials_from_the_configured_url(
    tmp_path: Path,
) -> None:
    url = f"https://user:{SECRET}@127.0.0.1:9/v1"
    run(tmp_path, ["hello"], ("--provider", TEST_PROVIDER, "--base-url", url))
    with stored(tmp_path) as store:
        info = store.latest_session()
    assert info is not None and info.base_url == "https://***@127.0.0.1:9/v1"
    same = load_settings(None, {"CHATCLI_BASE_URL": url, "HOME": str(tmp_path)})
    assert reopened_settings(same, info, {}).base_url == url
    other = load_settings(None, {"CHATCLI_BASE_URL": "http://elsewhere/v1"})
    with pytest.raises(ConfigError, match=r"https://\*\*\*@127.0.0.1:9/v1.*--base-url"):
        reopened_settings(other, info, {})
    assert reopened_settings(other, info, {"base_url": "http://x/v1"}).base_url is not None
    code, screen = run(tmp_path, [], ("--continue",))
    assert code == 2 and "credentials are not stored" in screen


def test_migration_5_redacts_stored_base_urls(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db", isolation_level=None)
    migrate_to(conn, 4)
    for sid, url in (("s1", f"https://u:{SECRET}@h/v1"), ("s2", "http://127.0.0.1:8080/v1")):
        conn.execute(
            "INSERT INTO sessions(id, created_at, base_url) VALUES (?, 'then', ?)", (sid, url)
        )
    conn.close()
    SessionStore(tmp_path / "db").close()
    conn = sqlite3.connect(tmp_path / "db")
    rows = conn.execute("SELECT id, base_url FROM sessions ORDER BY id").fetchall()
    conn.close()
    assert rows == [("s1", "https://***@h/v1"), ("s2", "http://127.0.0.1:8080/v1")]


CREDENTIALED = f"https://user:{SECRET}@127.0.0.1:9/v1?api-key={SECRET}"


@pytest.mark.parametrize(
    "make",
    [
        lambda: Anthropic(model="m", api_key="k", base_url=CREDENTIALED),
        lambda: Gemini(model="m", api_key="k", base_url=CREDENTIALED),
        lambda: OpenAI(model="m", api_key="k", base_url=CREDENTIALED),
        lambda: OpenAICompatible(CREDENTIALED, "m"),
    ],
    ids=["anthropic", "gemini", "openai", "openai_compat"],
)
def test_a_providers_repr_shows_its_base_url_without_credentials(make: Any) -> None:
    provider = make()
    shown = repr(provider)
    assert SECRET not in shown and SECRET not in repr(LlamaServerTokens(provider))
    assert "base_url='https://***@127.0.0.1:9/v1?api-key=***'" in shown


def test_window_discovery_logs_no_credentials(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="chatcli"):
        assert discover_window(CREDENTIALED, "m", timeout=0.5) is None
    assert "127.0.0.1:9" in caplog.text and SECRET not in caplog.text

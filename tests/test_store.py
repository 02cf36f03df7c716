"""The session store: migrations, round trips, crash safety, two processes at once; the
backend-neutral tests run on SQLite and on a real PostgreSQL server (tests/postgres.py)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from dataclasses import replace
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from chatcli.errors import ConfigError
from chatcli.history.carry import carry_instructions, is_carry_block
from chatcli.messages import Message, ToolCall, Usage
from chatcli.serialize import message_to_dict
from chatcli.store import SessionNotFound, SessionStore, default_db_path, open_store, views
from chatcli.store.db import SqliteDatabase, postgres_sql
from chatcli.store.migrations import MIGRATIONS, transaction
from chatcli.store.views import ViewRecord, from_runs, plan_record, to_runs
from tests.proxy_harness import free_port

# The PostgreSQL server fixture; a plugin, not imported by name before pytest loads it.
# `location`: each backend-neutral test runs on a new SQLite file and a new PostgreSQL database.
pytest_plugins = ("tests.postgres",)

WRITER = """
import sys
from chatcli.messages import Message
from chatcli.store import SessionStore
store = SessionStore(sys.argv[1])
session = sys.argv[2]
for i in range(int(sys.argv[3])):
    store.append_messages(session, [Message.user(f"{sys.argv[4]}-{i} " + "x" * 2000)])
    print(i, flush=True)  # acknowledged: the append has returned
"""


def rows(store: SessionStore, sql: str) -> list[tuple[object, ...]]:
    return [tuple(r) for r in store._conn.execute(sql)]


def conversation() -> list[Message]:
    call = ToolCall(id="c1", name="read_file", arguments={"path": "a.py", "n": [1, 2]})
    return [
        Message.system("be brief"),
        Message.user("héllo 👋"),
        Message.assistant("reading", tool_calls=(call,)),
        Message.tool("c1", "x" * 50_000, is_error=True),
        Message.assistant("done"),
    ]


def test_migrates_an_empty_file_and_records_versions(tmp_path: Path) -> None:
    with SessionStore(tmp_path / "db.sqlite") as store:
        assert store.schema_version == len(MIGRATIONS)
    conn = sqlite3.connect(tmp_path / "db.sqlite")
    rows = conn.execute("SELECT version, name FROM schema_migrations").fetchall()
    assert rows == [(n, m.__name__) for n, m in enumerate(MIGRATIONS, 1)]
    assert rows[:2] == [(1, "m001_initial"), (2, "m002_session_settings")]
    assert conn.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    # Re-opening applies nothing twice.
    SessionStore(tmp_path / "db.sqlite").close()
    assert conn.execute("SELECT COUNT(*) FROM schema_migrations").fetchone() == (len(MIGRATIONS),)


def migrate_to(raw: sqlite3.Connection, version: int) -> None:
    """The database as a chatcli with only the first `version` migrations left it."""
    conn = SqliteDatabase(raw)
    conn.execute(
        "CREATE TABLE schema_migrations (version INTEGER PRIMARY KEY, name TEXT"
        " NOT NULL, applied_at TEXT NOT NULL DEFAULT 'then')"
    )
    for number, migration in enumerate(MIGRATIONS[:version], 1):
        with transaction(conn):
            migration(conn)
        conn.execute(
            "INSERT INTO schema_migrations(version, name) VALUES (?, ?)",
            (number, migration.__name__),
        )


def test_a_version_1_database_is_migrated_and_keeps_its_sessions(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db", isolation_level=None)
    migrate_to(conn, 1)
    conn.execute(
        "INSERT INTO sessions(id, created_at, provider, model) VALUES"
        " ('old1', 'then', 'openai', 'gpt-4o')"
    )
    conn.close()
    with SessionStore(tmp_path / "db") as store:
        info = store.get_session("old1")
        assert (info.provider, info.model, info.context_window, info.max_tokens) == (
            "openai",
            "gpt-4o",
            None,
            None,
        )
        new = store.create_session(
            provider="llama-cpp", model="/m/x.gguf", context_window=1024, max_tokens=16
        )
        assert store.get_session(new.id) == new


def test_migration_3_turns_stored_clear_requests_into_events(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db", isolation_level=None)
    migrate_to(conn, 2)
    conn.execute("INSERT INTO sessions(id, created_at) VALUES ('s1', 'then')")
    for rid, tag in ((1, "chat"), (2, "clear")):
        conn.execute(
            "INSERT INTO requests(id, session_id, created_at, tag, usage) VALUES (?, 's1', 't',"
            " ?, '{}')",
            (rid, tag),
        )
        conn.execute(
            "INSERT INTO events(session_id, request_id, created_at, kind, text, data) VALUES"
            " ('s1', ?, 't', ?, 'x', '{}')",
            (rid, tag),
        )
    conn.close()
    with SessionStore(tmp_path / "db") as store:
        assert [r.tag for r in store.requests("s1")] == ["chat"]
        assert [(e.kind, e.request_id) for e in store.events("s1")] == [
            ("chat", 1),
            ("clear", None),
        ]


def test_session_settings_are_stored_and_updated(location: str | Path) -> None:
    with SessionStore(location) as store:
        info = store.create_session(
            provider="openai-compatible",
            model="qwen",
            base_url="http://127.0.0.1:8080/v1",
            max_tokens=512,
        )
        store.update_settings(replace(info, model="llama", max_tokens=1024))
        again = store.get_session(info.id)
    assert (again.model, again.base_url, again.max_tokens) == (
        "llama",
        "http://127.0.0.1:8080/v1",
        1024,
    )


def test_transcript_round_trips_every_message_in_full(location: str | Path) -> None:
    with SessionStore(location) as store:
        session = store.create_session(provider="openai", model="gpt-4o")
        assert store.append_messages(session.id, conversation()) == (1, 2, 3, 4, 5)
        assert store.append_messages(session.id, [Message.user("more")]) == (6,)
        assert store.transcript(session.id) == (*conversation(), Message.user("more"))
        assert store.get_session(session.id[:5]).message_count == 6


def test_requests_views_and_events_are_stored_beside_the_transcript(location: str | Path) -> None:
    with SessionStore(location) as store:
        sid = store.create_session().id
        store.append_messages(sid, conversation())
        view = (Message.system("be brief"), Message.user("héllo 👋"))
        rid = store.record_request(
            sid,
            tag="chat",
            model="m",
            usage=Usage(10, 5, 2, 1),
            cost_usd=None,
            view=view,
            events=[("LevelApplied", "level 2: kept 2 of 5", {"level": 2})],
        )
        (req,) = store.requests(sid)
        assert (req.id, req.usage, req.cost_usd) == (rid, Usage(10, 5, 2, 1), None)
        assert store.latest_view(sid) == view
        (event,) = store.events(sid)
        assert (event.request_id, event.kind, event.data) == (rid, "LevelApplied", {"level": 2})
        assert len(store.transcript(sid)) == 5  # the view never replaces the transcript


def test_messages_of_a_few_thousand_chars_do_not_take_a_page_each(tmp_path: Path) -> None:
    # With 4 KiB pages a 2.8k-char row took a page of its own: the file was 1.55x the rows.
    passage = " ".join(f"word{i % 97}" for i in range(400))  # ~2,800 chars
    with SessionStore(tmp_path / "db") as store:
        session = store.create_session()
        for i in range(200):  # one row per append, as a chat stores them
            store.append_messages(session.id, [Message.user(f"{i} {passage}")])
    with sqlite3.connect(tmp_path / "db") as conn:
        (rows,) = conn.execute("SELECT sum(length(body)) FROM messages").fetchone()
        (page_size,) = conn.execute("PRAGMA page_size").fetchone()
    assert (tmp_path / "db").stat().st_size < 1.25 * rows
    assert page_size == 1024


def test_an_existing_database_keeps_its_page_size(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "db") as conn:
        conn.execute("PRAGMA page_size=4096")
        conn.execute("CREATE TABLE t (x)")
    with SessionStore(tmp_path / "db") as store:
        store.create_session()
    with sqlite3.connect(tmp_path / "db") as conn:
        assert conn.execute("PRAGMA page_size").fetchone() == (4096,)


def test_sessions_list_latest_and_delete(location: str | Path) -> None:
    with SessionStore(location) as store:
        first = store.create_session(title="a")
        second = store.create_session(title="b")
        store.append_messages(first.id, [Message.user("latest activity")])
        assert store.latest_session() is not None
        assert store.latest_session().id == first.id  # type: ignore[union-attr]
        assert {s.id for s in store.list_sessions()} == {first.id, second.id}
        empty = store.create_session(title="c")  # the latest, but nothing to continue
        assert store.latest_session().id == first.id  # type: ignore[union-attr]
        assert empty.id == store.list_sessions()[0].id
        store.delete_session(second.id)
        with pytest.raises(SessionNotFound):
            store.get_session(second.id)
        with pytest.raises(SessionNotFound, match="no session"):
            store.get_session("zzz")


def test_default_path_honours_chatcli_home(tmp_path: Path) -> None:
    assert default_db_path({"CHATCLI_HOME": str(tmp_path)}) == tmp_path / "sessions.db"
    assert default_db_path({"HOME": "/h"}) == Path("/h/.local/share/chatcli/sessions.db")


def _writer(db: str | Path, session: str, count: int, tag: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-c", WRITER, str(db), session, str(count), tag],
        stdout=subprocess.PIPE,
        text=True,
    )


@pytest.mark.parametrize("kill_after", [1, 37, 150])
def test_sigkill_mid_write_keeps_every_acknowledged_message(
    location: str | Path, kill_after: int
) -> None:
    db = location
    with SessionStore(db) as store:
        sid = store.create_session().id
    proc = _writer(db, sid, 100_000, "w")
    assert proc.stdout is not None
    acked = -1
    while acked < kill_after:
        acked = int(proc.stdout.readline())
    os.kill(proc.pid, signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    with SessionStore(db) as store:
        if store.dialect == "sqlite":
            assert store._conn.execute("PRAGMA integrity_check").fetchone() == ("ok",)
        texts = [m.text.split()[0] for m in store.transcript(sid)]
    assert len(texts) >= acked + 1
    assert texts[: acked + 1] == [f"w-{i}" for i in range(acked + 1)]


def test_two_processes_on_one_database_do_not_corrupt_it(location: str | Path) -> None:
    db = location
    with SessionStore(db) as store:
        sid = store.create_session().id
    procs = [_writer(db, sid, 150, tag) for tag in ("a", "b")]
    started = time.monotonic()
    for p in procs:
        out, _ = p.communicate(timeout=120)
        assert p.returncode == 0
        assert out.split()[-1] == "149"
    with SessionStore(db) as store:
        rows = store._conn.execute(
            "SELECT seq FROM messages WHERE session_id = ? ORDER BY seq", (sid,)
        ).fetchall()
        texts = [m.text.split()[0] for m in store.transcript(sid)]
    assert [r[0] for r in rows] == list(range(1, 301))
    for tag in ("a", "b"):  # each writer's messages are all there, in its own order
        assert [t for t in texts if t.startswith(tag)] == [f"{tag}-{i}" for i in range(150)]
    assert time.monotonic() - started < 120


def test_corrupt_row_is_a_clear_error(location: str | Path) -> None:
    with SessionStore(location) as store:
        sid = store.create_session().id
        store._conn.execute(
            "INSERT INTO messages VALUES (?, 1, 'now', 'user', ?)", (sid, json.dumps({"x": 1}))
        )
        with pytest.raises(ValueError, match="not a chatcli message"):
            store.transcript(sid)


def _view_bytes(store: SessionStore) -> int:
    views = store._conn.execute("SELECT SUM(LENGTH(view)) FROM requests").fetchone()[0] or 0
    parts = store._conn.execute(
        "SELECT SUM(LENGTH(body) + COALESCE(LENGTH(quotes), 0)) FROM view_parts"
    ).fetchone()[0]
    return int(views) + int(parts or 0)


def test_views_are_stored_by_reference_not_copied_per_request(location: str | Path) -> None:
    """200 requests whose views hold the whole growing transcript (~1 MB) plus a cut copy of
    its first message: stored as full JSON copies they took ~100 MB."""
    db = location
    with SessionStore(db) as store:
        sid = store.create_session().id
        first = Message.user("q0 " + "x" * 2_500)
        cut = Message.user("q0 [cut]")
        transcript = [first]
        store.append_messages(sid, [first])
        for i in range(200):
            new = [Message.assistant(f"a{i} " + "y" * 2_500), Message.user(f"q{i + 1} ")]
            store.append_messages(sid, new)
            transcript += new
            view = (Message.system("be brief"), cut, *transcript[1:])
            store.record_request(sid, tag="chat", model="m", usage=Usage(), view=view)
        assert store.latest_view(sid) == view
        rid = store.requests(sid)[10].id
        assert store.view(sid, rid) == (Message.system("be brief"), cut, *transcript[1:23])
        assert _view_bytes(store) < 20_000


def test_the_view_index_keeps_the_latest_sessions_and_reads_a_dropped_one_again(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store serving many sessions (a proxy's) keeps the indexes of the latest few only;
    views of a session whose index was dropped are stored and read back the same."""
    monkeypatch.setattr(views, "KNOWN_SESSIONS", 2)
    with SessionStore(tmp_path / "db") as store:
        sessions = [store.create_session().id for _ in range(5)]
        stored: dict[str, list[tuple[Message, ...]]] = {sid: [] for sid in sessions}
        for turn in range(3):
            for sid in sessions:  # each turn of each session drops another's index
                store.append_messages(sid, [Message.user(f"{sid} q{turn} " + "x" * 300)])
                view = (Message.system("s"), *store.transcript(sid))
                store.record_request(sid, tag="chat", model="m", usage=Usage(), view=view)
                stored[sid].append(view)
        for sid in sessions:
            assert [store.view(sid, r.id) for r in store.requests(sid)] == stored[sid]
        assert len(store._views._sessions) == 2


def test_a_view_delta_reads_back_and_appends_of_another_process_are_found(
    location: str | Path,
) -> None:
    db = location
    results = [Message.tool(f"c{i}", f"result {i} " + "z" * 400) for i in range(60)]
    stubs = [Message.tool(f"c{i}", f"[stub {i}]") for i in range(60)]
    with SessionStore(db) as store, SessionStore(db) as other:
        sid = store.create_session().id
        views = []
        for i in range(60):
            other.append_messages(sid, [results[i]])  # not through `store`
            # Every other old result is stubbed: a view of many runs, sharing its prefix.
            view = tuple(stubs[j] if j % 2 and j < i else results[j] for j in range(i + 1))
            store.record_request(sid, tag="chat", model="m", usage=Usage(), view=view)
            views.append(view)
        stored = rows(store, "SELECT view FROM requests ORDER BY id")
        assert any('"base"' in str(r[0]) for r in stored)  # some are deltas
        assert [store.view(sid, r.id) for r in store.requests(sid)] == views
    with SessionStore(db) as reopened:  # a new process bases its deltas on what is stored
        reopened.record_request(sid, tag="chat", model="m", usage=Usage(), view=views[-1])
        assert reopened.latest_view(sid) == views[-1]


def test_a_cut_result_is_stored_as_a_reference_to_its_transcript_message(
    location: str | Path,
) -> None:
    """A tool result cut to head and tail in the view shares nearly all its text with the
    transcript's result: only the marker is stored again, in this process or another."""
    db = location
    lines = [f"line {i}: " + "w" * 40 for i in range(600)]  # ~30,000 chars, all distinct
    result = Message.tool("c1", "\n".join(lines))
    cut = Message.tool("c1", "\n".join([*lines[:200], "[... 20,000 chars cut ...]", *lines[-200:]]))
    stub = Message.tool("c1", "[old result removed]")
    call = Message.assistant(tool_calls=(ToolCall(id="c1", name="read", arguments={}),))
    with SessionStore(db) as store, SessionStore(db) as other:
        sid = store.create_session().id
        store.append_messages(sid, [Message.user("read it"), call, result])
        for view in ((call, cut), (call, stub)):
            store.record_request(sid, tag="chat", model="m", usage=Usage(), view=view)
        assert [store.view(sid, r.id) for r in store.requests(sid)] == [(call, cut), (call, stub)]
        assert other.latest_view(sid) == (call, stub)
        assert other.view(sid, store.requests(sid)[0].id) == (call, cut)
        parts = rows(store, "SELECT body, source_seq FROM view_parts ORDER BY id")
    (marker, source), (whole, no_source) = parts
    assert source == 3 and marker == "[... 20,000 chars cut ...]"  # what is between the ends
    assert no_source is None and "[old result removed]" in whole  # too short to refer


def test_a_carried_instructions_block_is_stored_as_the_sentences_it_quotes(
    location: str | Path,
) -> None:
    """The block quotes user sentences verbatim (with quotes, a backslash and non-ASCII
    text among them): each view, the block changing as messages leave it, reads back as it
    was sent, items and all, and the block costs a few bytes per sentence (a slice, and its
    item as data: number, kind, where the text shows it), not a copy of them."""
    names = ["".join("bcdfghjklm"[int(d)] + "ou" for d in f"{i:02d}") for i in range(40)]
    said = [
        f'Never deploy "{name}" from C:\\{name}ra\\{name}ti before 18:00 on {name}su, café. '
        f"The {name}ke budget for {name}ri is {i * 100 + 5_000} EUR, billed per {name}to. "
        + "Some chatter that carries nothing at all. "
        * 3
        for i, name in enumerate(names)
    ]
    transcript: list[Message] = []
    views = []
    with SessionStore(location) as store:
        sid = store.create_session().id
        for i, text in enumerate(said):
            new = [Message.user(text), Message.assistant(f"Noted {i}. " + "ok " * 50)]
            store.append_messages(sid, new)
            transcript += new
            # A level keeps the last four messages: the block carries what the others said.
            view = carry_instructions(transcript, transcript[-4:]).messages
            store.record_request(sid, tag="chat", model="m", usage=Usage(), view=view)
            views.append(view)
        block = next(m for m in views[-1] if is_carry_block(m))
        assert block.text.count("\n#") >= 70 and '"' in block.text
        assert [store.view(sid, r.id) for r in store.requests(sid)] == views
        blocks = sum(len(v[0].text) for v in views if is_carry_block(v[0]))
        # Stored whole, text and items, they took twice `blocks`.
        assert _view_bytes(store) < blocks * 3 / 4
    with SessionStore(location) as reopened:
        assert reopened.latest_view(sid) == views[-1]


def test_migrations_6_and_11_add_part_sources_and_old_parts_read_whole(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db", isolation_level=None)
    migrate_to(conn, 5)
    for column in ("source_seq", "head", "tail", "quotes"):  # the table as chatcli 5 made it
        conn.execute(f"ALTER TABLE view_parts DROP COLUMN {column}")
    conn.close()
    old_part = Message.user("a notice only in the view")
    with SessionStore(tmp_path / "db") as store:
        sid = store.create_session().id
        store.record_request(sid, tag="chat", model="m", usage=Usage(), view=(old_part,))
    conn = sqlite3.connect(tmp_path / "db")
    columns = [row[1] for row in conn.execute("PRAGMA table_info(view_parts)")]
    conn.close()
    assert columns[-4:] == ["source_seq", "head", "tail", "quotes"]
    with SessionStore(tmp_path / "db") as store:
        assert store.latest_view(sid) == (old_part,)


def test_a_failed_request_leaves_no_view_part_behind(location: str | Path) -> None:
    with SessionStore(location) as store:
        sid = store.create_session().id
        view = (Message.user("only in the view"),)
        with pytest.raises(Exception, match=r"(?i)not.null"):  # an event that cannot be stored
            store.record_request(
                sid, tag="chat", model="m", usage=Usage(), view=view, events=[("k", None, {})]
            )  # type: ignore[list-item]
        store.record_request(sid, tag="chat", model="m", usage=Usage(), view=view)
        assert store.latest_view(sid) == view


def test_migration_4_converts_stored_view_copies_to_references(tmp_path: Path) -> None:
    conn = sqlite3.connect(tmp_path / "db", isolation_level=None)
    migrate_to(conn, 3)
    conn.execute("INSERT INTO sessions(id, created_at) VALUES ('s1', 'then')")
    messages = conversation()
    for seq, m in enumerate(messages, 1):
        conn.execute(
            "INSERT INTO messages VALUES ('s1', ?, 't', ?, ?)",
            (
                seq,
                m.role.value,
                json.dumps(message_to_dict(m), ensure_ascii=False, separators=(",", ":")),
            ),
        )
    summary = Message.user("[summary of the conversation]")
    old_views = [messages[:2], [summary, *messages[3:]], messages]
    for rid, view in enumerate(old_views, 1):
        conn.execute(
            "INSERT INTO requests(id, session_id, created_at, tag, usage, view) VALUES"
            " (?, 's1', 't', 'chat', '{}', ?)",
            (rid, json.dumps([message_to_dict(m) for m in view])),
        )
    compaction = {"view": [message_to_dict(m) for m in old_views[1]], "upto": 5}
    conn.execute(
        "INSERT INTO events(session_id, request_id, created_at, kind, text, data) VALUES"
        " ('s1', 2, 't', 'compaction', 'x', ?)",
        (json.dumps(compaction),),
    )
    conn.close()
    with SessionStore(tmp_path / "db") as store:
        assert [store.view("s1", rid) for rid in (1, 2, 3)] == [tuple(v) for v in old_views]
        assert store.latest_view("s1") == tuple(messages)
        (event,) = store.events("s1")
        assert event.data == {"upto": 5}  # its view is the request's
        raw = [r[0] for r in store._conn.execute("SELECT view FROM requests ORDER BY id")]
    assert raw[0] == '{"add":[[1,2]]}' and raw[2] == '{"add":[[1,5]]}'


def test_a_database_of_view_copies_shrinks_when_migrated(tmp_path: Path) -> None:
    db = tmp_path / "db"
    conn = sqlite3.connect(db, isolation_level=None)
    migrate_to(conn, 3)
    conn.execute("INSERT INTO sessions(id, created_at) VALUES ('s1', 'then')")
    body = json.dumps(message_to_dict(Message.user("q" * 20_000)), separators=(",", ":"))
    conn.execute("INSERT INTO messages VALUES ('s1', 1, 't', 'user', ?)", (body,))
    for rid in range(1, 201):  # 200 copies of a 20k-char view: ~4 MB
        conn.execute(
            "INSERT INTO requests(id, session_id, created_at, tag, usage, view) VALUES"
            " (?, 's1', 't', 'chat', '{}', ?)",
            (rid, f"[{body}]"),
        )
    conn.close()
    before = db.stat().st_size
    with SessionStore(db) as store:
        assert store.view("s1", 200) == (Message.user("q" * 20_000),)
    assert before > 4_000_000 and db.stat().st_size < 200_000


refs_strategy = st.lists(st.integers(-30, 60).filter(lambda r: r != 0), max_size=40)


@given(refs=refs_strategy, base_refs=refs_strategy)
def test_view_records_round_trip_and_resolve_to_the_view(
    refs: list[int], base_refs: list[int]
) -> None:
    assert from_runs(to_runs(refs)) == tuple(refs)
    record = plan_record(tuple(refs), (7, tuple(base_refs)))
    again = ViewRecord.from_json(record.to_json())
    assert again == record
    resolved = (tuple(base_refs)[: again.keep] if again.base == 7 else ()) + again.add
    assert resolved == tuple(refs)


def test_every_migration_is_applied_once_on_either_backend(location: str | Path) -> None:
    with SessionStore(location) as store:
        assert store.schema_version == len(MIGRATIONS)
    with SessionStore(location) as again:  # re-opening applies nothing twice
        applied = rows(again, "SELECT version, name FROM schema_migrations ORDER BY version")
    assert applied == [(n, m.__name__) for n, m in enumerate(MIGRATIONS, 1)]
    assert applied[6] == (7, "m007_model_windows")


def test_a_learned_window_is_seen_by_every_store_on_the_database(location: str | Path) -> None:
    upstream = "openai-compatible http://127.0.0.1:8080/v1"
    with SessionStore(location) as one, SessionStore(location) as other:
        assert other.learned_windows(upstream) == {}
        one.learn_window(upstream, "qwen", 32_768)
        one.learn_window(upstream, "qwen", 16_384)  # a later overflow states a smaller one
        one.learn_window("anthropic", "qwen", 200_000)
        assert other.learned_windows(upstream) == {"qwen": 16_384}
        assert other.learned_windows("anthropic") == {"qwen": 200_000}


def test_a_proxy_key_is_made_once_and_read_by_every_store(location: str | Path) -> None:
    """The first store to ask makes the key (m010); every other one, and a later one, reads
    it, whatever key it offered."""
    with SessionStore(location) as one, SessionStore(location) as other:
        with one.transaction():
            made = one.proxy_key("responses-compaction", b"\x01" * 32)
        with other.transaction():
            assert other.proxy_key("responses-compaction", b"\x02" * 32) == made
        with other.transaction():
            assert other.proxy_key("another", b"\x03" * 32) == b"\x03" * 32
    assert made == b"\x01" * 32
    with SessionStore(location) as later, later.transaction():
        assert later.proxy_key("responses-compaction", b"\x04" * 32) == made


def test_an_exact_id_wins_over_longer_ids_it_prefixes(location: str | Path) -> None:
    with SessionStore(location) as store:
        for sid in ("conv", "conv~1", "conv~2"):
            store.save_session(replace(store.create_session(), id=sid))
        assert store.get_session("conv").id == "conv"
        assert [s.id for s in store.find_sessions("conv~")] == ["conv~2", "conv~1"]
        with pytest.raises(SessionNotFound, match="2 sessions"):
            store.get_session("conv~")


def test_open_store_is_sqlite_unless_the_url_names_postgresql(tmp_path: Path) -> None:
    with open_store({"CHATCLI_HOME": str(tmp_path)}) as store:
        assert store.dialect == "sqlite" and store.path == tmp_path / "sessions.db"
    expected = r"CHATCLI_DATABASE_URL='mysql://\*\*\*@h/db': not a postgresql"
    with pytest.raises(ConfigError, match=expected):
        open_store({"CHATCLI_HOME": str(tmp_path), "CHATCLI_DATABASE_URL": "mysql://u:pw@h/db"})


def test_open_store_opens_the_postgresql_database_the_url_names(postgres_url: str) -> None:
    with open_store({"CHATCLI_DATABASE_URL": postgres_url}) as store:
        assert store.dialect == "postgresql" and store.path is None
        sid = store.create_session(title="on postgres").id
    with SessionStore(postgres_url) as again:
        assert again.get_session(sid).title == "on postgres"


def test_an_unreachable_postgresql_is_a_clear_error_without_the_password(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Refused at once, on every retry: waiting the whole connect timeout would only idle.
    monkeypatch.setattr("chatcli.store.postgres.CONNECT_TIMEOUT_S", 0.2)
    url = f"postgresql://chatcli:s3cret@127.0.0.1:{free_port()}/nothing"
    with pytest.raises(ConfigError, match="cannot connect to PostgreSQL") as error:
        SessionStore(url)
    assert "s3cret" not in str(error.value)


def test_sqlite_spelling_becomes_postgresql_spelling() -> None:
    ddl = "CREATE TABLE t (id INTEGER PRIMARY KEY AUTOINCREMENT, n INTEGER, c REAL)"
    assert postgres_sql(ddl) == (
        "CREATE TABLE t (id BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, n BIGINT,"
        " c DOUBLE PRECISION)"
    )
    assert postgres_sql("SELECT 'integer' FROM t WHERE a LIKE ? AND b = '%'") == (
        "SELECT 'integer' FROM t WHERE a LIKE %s AND b = '%%'"
    )


@pytest.mark.parametrize(("require", "outcome"), [(None, "1 skipped"), ("1", "1 error")])
def test_without_postgresql_a_test_skips_unless_servers_are_required(
    require: str | None, outcome: str
) -> None:
    """CI (CHATCLI_REQUIRE_SERVERS=1) cannot pass by skipping the PostgreSQL tests."""
    env = {k: v for k, v in os.environ.items() if k != "CHATCLI_REQUIRE_SERVERS"}
    env["CHATCLI_PG_BIN"] = "/nonexistent/postgresql/bin"
    if require is not None:
        env["CHATCLI_REQUIRE_SERVERS"] = require
    node = "tests/test_store.py::test_open_store_opens_the_postgresql_database_the_url_names"
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", node],
        cwd=Path(__file__).resolve().parent.parent,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert outcome in done.stdout, done.stdout[-2000:]
    assert "initdb not found at /nonexistent/postgresql/bin/initdb" in done.stdout

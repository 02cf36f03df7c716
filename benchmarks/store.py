"""Benchmark of the session store's size: `python benchmarks/store.py` prints Markdown.

The store keeps the full transcript, and for every request the working view that was sent,
its events and its cost. The view must not cost a copy of the conversation per request: this
measures the database file against the transcript's own size, per number of turns (chat:
60, 100 and 1,000; agent: the same; `--chat 100,1000 --agent 60` chooses others).

Two sessions, each in a fresh database:

- chat, through the CLI: each turn is one `chatcli --continue -p TEXT` (in-process, so a new
  store, a new session object and a reloaded transcript per turn, as from a shell loop),
  against the scripted windowed test provider (`tests/cli_provider.py`: a 100,000-token
  window, with its real overflow error and recovery levels once the conversation outgrows it).
  Questions are ~2,600-char passages of real English prose (the Python reference manual as
  shipped in the standard library, `pydoc_data.topics`), and each answer quotes its question.
- agent, through `ChatSession`: each turn runs a tool (a call, then its result: a real
  standard-library source file, 1,500-30,000 chars) and asks the model to go on; the session
  uses the chat's defaults (microcompaction, tool-result budget, recovery levels), so its
  views hold cut and stubbed results as well as transcript messages. The model's window is
  1,000,000 tokens, so the views hold the whole conversation (no recovery level cuts it):
  the case where a copy per request costs most.

Printed per run: the transcript's own size (the session exported as JSON by `chatcli
sessions export --format json`, and the stored message rows alone), the database file
(after the last connection closed: the WAL is checkpointed into it), their ratio (goal: under
1.5x), the bytes stored for views, and the wall time. Every figure is measured in this run.
"""

from __future__ import annotations

import argparse
import io
import sqlite3
import sys
import sysconfig
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

# The test provider lives with the tests (one copy); the repository root makes it importable
# when this file is run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import pydoc_data.topics

from rich.console import Console
from tests.cli_provider import StreamingWindowed, answer_for

from chatcli.__main__ import main
from chatcli.chat.export import export_transcript
from chatcli.chat.session import ChatSession
from chatcli.cli.ui import Ui
from chatcli.messages import Message, ToolCall
from chatcli.store import SessionStore

CHAT_TURNS = (60, 100, 1_000)
AGENT_TURNS = (60, 100, 1_000)  # 1,000 agent turns take ~1.5 min (memoised microcompaction)
QUESTION_CHARS = 2_600
CHAT_WINDOW = 100_000
# A 1M-token window (Gemini's, Claude's largest): the agent's views hold the whole
# conversation, as they do until the window is reached, which is when copies cost most.
AGENT_WINDOW = 1_000_000
TEST_PROVIDER = "python:tests.cli_provider:windowed"


def prose() -> Iterator[str]:
    """Endless ~2,600-char passages of the Python reference manual (real prose)."""
    text = " ".join(pydoc_data.topics.topics[key] for key in sorted(pydoc_data.topics.topics))
    turn = 0
    while True:
        for start in range(0, len(text) - QUESTION_CHARS, QUESTION_CHARS):
            turn += 1
            yield f"Question {turn}: {text[start : start + QUESTION_CHARS]}"


def sources() -> Iterator[str]:
    """Endless real tool outputs: standard-library source files of 1,500-30,000 chars."""
    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    texts = [t for f in files if 1_500 <= len(t := f.read_text(errors="replace")) <= 30_000]
    while True:
        yield from texts


def chat_through_the_cli(home: Path, turns: int) -> None:
    questions = prose()
    environ = {
        "CHATCLI_HOME": str(home),
        "HOME": str(home),
        "CHATCLI_TEST_WINDOW": str(CHAT_WINDOW),
    }
    for turn in range(turns):
        ui = Ui(console=Console(file=io.StringIO(), width=100), interactive=False)
        ui.stdin = io.StringIO("")
        argv = ["--provider", TEST_PROVIDER, "-p", next(questions)]
        code = main([*argv, "--continue"] if turn else argv, ui=ui, environ=environ)
        if code != 0:
            raise SystemExit(f"turn {turn}: chatcli exited with {code}")


def agent_through_the_session(home: Path, turns: int) -> None:
    outputs = sources()
    provider = StreamingWindowed(window=AGENT_WINDOW, answer=answer_for)
    with SessionStore(home / "sessions.db") as store:
        session = ChatSession.open(store, provider, provider_name="test", model="test-model")
        session.send("Task: review the standard library, one module per step.")
        for turn in range(turns):
            call = ToolCall(id=f"call_{turn}", name="read", arguments={"step": turn})
            session.append(
                (
                    Message.assistant(f"Reading module {turn}.", tool_calls=(call,)),
                    Message.tool(call.id, next(outputs)),
                )
            )
            session.send(None)


@dataclass(frozen=True, slots=True, kw_only=True)
class Sizes:
    export: int
    rows: int
    database: int
    views: int


def measure(db: Path) -> Sizes:
    with SessionStore(db) as store:
        (info,) = store.list_sessions()
        export = len(export_transcript(info, store.transcript(info.id), "json").encode())
    conn = sqlite3.connect(db)
    try:
        rows = _bytes(conn, "SELECT SUM(LENGTH(CAST(body AS BLOB))) FROM messages")
        views = _bytes(conn, "SELECT SUM(LENGTH(CAST(view AS BLOB))) FROM requests")
        tables = {r[0] for r in conn.execute("SELECT name FROM sqlite_master")}
        if "view_parts" in tables:
            views += _bytes(
                conn,
                "SELECT SUM(LENGTH(CAST(body AS BLOB)) + COALESCE(LENGTH(CAST(quotes AS BLOB)), 0))"
                " FROM view_parts",
            )
    finally:
        conn.close()
    return Sizes(export=export, rows=rows, database=db.stat().st_size, views=views)


def _bytes(conn: sqlite3.Connection, query: str) -> int:
    return int(conn.execute(query).fetchone()[0] or 0)


def mb(size: int) -> str:
    return f"{size / 1e6:,.2f} MB"


def row(kind: str, turns: int, run: Callable[[Path, int], None]) -> str:
    with tempfile.TemporaryDirectory() as tmp:
        home = Path(tmp)
        started = time.monotonic()
        run(home, turns)
        elapsed = time.monotonic() - started
        sizes = measure(home / "sessions.db")
    ratio = sizes.database / sizes.export
    return (
        f"| {kind} | {turns:,} | {mb(sizes.export)} | {mb(sizes.rows)} | {mb(sizes.database)} "
        f"| {ratio:.2f}x | {mb(sizes.views)} | {elapsed:.0f} s |"
    )


def main_table(chat_turns: tuple[int, ...], agent_turns: tuple[int, ...]) -> list[str]:
    lines = [
        "| session | turns | transcript (JSON export) | message rows | database file "
        "| database / transcript | views stored | wall time |",
        "|---|---:|---:|---:|---:|---:|---:|---:|",
    ]
    runs = [("chat (CLI, --continue -p)", chat_through_the_cli, n) for n in chat_turns]
    runs += [("agent (ChatSession)", agent_through_the_session, n) for n in agent_turns]
    for kind, run, turns in runs:
        lines.append(row(kind, turns, run))
        print(lines[-1], file=sys.stderr, flush=True)  # progress: a long run shows rows
    return lines


def _counts(text: str) -> tuple[int, ...]:
    return tuple(int(n) for n in text.split(",") if n)


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--chat", type=_counts, default=CHAT_TURNS, help="turn counts")
    parser.add_argument("--agent", type=_counts, default=AGENT_TURNS, help="turn counts")
    args = parser.parse_args()
    print("\n".join(main_table(args.chat, args.agent)))

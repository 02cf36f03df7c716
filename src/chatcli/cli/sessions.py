"""`chatcli sessions list|show ID|export ID|delete ID`: saved sessions, for people and scripts.

`export` writes plain Markdown or JSON (no terminal styling) to stdout or `-o PATH`; `list
--json` writes the sessions as JSON.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable, Mapping
from dataclasses import asdict
from pathlib import Path

from chatcli.chat.export import export_transcript
from chatcli.chat.settings import load_settings
from chatcli.cli.render import sessions_table, transcript_view
from chatcli.cli.ui import Ui
from chatcli.store import SessionNotFound, SessionStore, open_store

__all__ = ["run_sessions"]


def _list(store: SessionStore, args: argparse.Namespace, ui: Ui) -> int:
    sessions = store.list_sessions()
    if args.json:  # for scripts: every field of every session, an empty list when none
        ui.console.file.write(json.dumps([asdict(info) for info in sessions], indent=2) + "\n")
    elif not sessions:
        ui.note("no sessions yet")
    else:
        ui.console.print(sessions_table(sessions))
    return 0


def _show(store: SessionStore, args: argparse.Namespace, ui: Ui) -> int:
    info = store.get_session(args.id)
    ui.note(f"session {info.id} · {info.provider or ''} · {info.model or ''}")
    ui.console.print(transcript_view(store.transcript(info.id)))
    return 0


def _export(store: SessionStore, args: argparse.Namespace, ui: Ui) -> int:
    info = store.get_session(args.id)
    text = export_transcript(info, store.transcript(info.id), args.format)
    if args.output:
        Path(args.output).expanduser().write_text(text, encoding="utf-8")
        ui.note(f"wrote {args.output}")
    else:
        ui.console.file.write(text)
    return 0


def _delete(store: SessionStore, args: argparse.Namespace, ui: Ui) -> int:
    info = store.get_session(args.id)
    store.delete_session(info.id)
    ui.note(f"deleted session {info.id}")
    return 0


_ACTIONS: dict[str, Callable[[SessionStore, argparse.Namespace, Ui], int]] = {
    "list": _list,
    "show": _show,
    "export": _export,
    "delete": _delete,
}


def run_sessions(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> int:
    load_settings(None, environ)  # a bad config file or variable is reported as for the chat
    with open_store(environ) as store:
        try:
            return _ACTIONS[args.action](store, args, ui)
        except (SessionNotFound, OSError) as exc:  # OSError: -o names an unwritable file
            ui.error(str(exc))
            return 1

"""`chatcli demo`: renders the scripted offline session of `chatcli.chat.demo`, step by step."""

from __future__ import annotations

import argparse
import importlib
from collections.abc import Mapping
from pathlib import Path

from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

from chatcli.chat.context import ContextReport, Status
from chatcli.chat.demo import (
    DEMO_MAX_TOKENS,
    NONSENSE_NOTICE,
    SCRIPT,
    Step,
    StepOutcome,
    demo_model_path,
    open_demo_session,
    run_step,
    view_fill,
)
from chatcli.chat.session import ChatSession
from chatcli.chat.settings import load_settings
from chatcli.chat.text import describe_compaction
from chatcli.cli.render import context_view, cost_table, event_line, turn_footer
from chatcli.cli.ui import Ui
from chatcli.store import open_store

__all__ = ["run_demo"]

_ANSWER_PREVIEW = 160


def run_demo(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> int:
    missing = _missing_packages(("llama_cpp",) if args.model else ("llama_cpp", "gguf"))
    if missing:
        ui.error(
            f"chatcli demo runs llama.cpp in process: {' and '.join(missing)} "
            "is not installed; install it with: pip install 'chatcli[local]'"
        )
        return 2
    settings = load_settings(None, environ)
    model = _model_path(args, ui, settings.cache_dir)
    if model is None:
        return 2
    with open_store(environ) as store:
        with ui.console.status(f"loading {model.name} into llama.cpp (n_ctx={args.n_ctx})…"):
            session = open_demo_session(store, model, args.n_ctx)
        ui.note(f"session {session.info.id} · database {settings.db_path}")
        for step in SCRIPT:
            _play(ui, session, step)
        _finish(ui, session, model, args.n_ctx)
    return 0


def _missing_packages(names: tuple[str, ...]) -> list[str]:
    missing = []
    for name in names:
        try:
            importlib.import_module(name)  # the demo loads it anyway
        except ImportError:
            missing.append(name)
    return missing


def _model_path(args: argparse.Namespace, ui: Ui, cache_dir: Path) -> Path | None:
    if args.model:
        path = Path(args.model).expanduser()
        if not path.is_file():
            ui.error(f"no model file at {path}")
            return None
        return path
    ui.console.print(Panel(NONSENSE_NOTICE, title="chatcli demo", border_style="yellow"))
    with ui.console.status("writing the tiny test model…"):
        return demo_model_path(cache_dir)


def _play(ui: Ui, session: ChatSession, step: Step) -> None:
    ui.console.print(Rule(step.title, align="left"))
    ui.note(step.explain)
    if step.user and not step.compact:
        ui.console.print(Text(f"user: {step.user[:_ANSWER_PREVIEW]}", style="bold blue"))
    for call, result in step.tools:
        ui.console.print(
            Text(
                f"tool call {call.name}({call.arguments_json}) -> {len(result):,} chars",
                style="yellow",
            )
        )
    with ui.console.status("the model is answering…"):
        outcome = run_step(session, step, lambda event: ui.console.print(event_line(event)))
    _outcome(ui, outcome)
    window = session.context_window
    fill = (
        None
        if outcome.turn is None or not window
        else view_fill(outcome.turn, window, DEMO_MAX_TOKENS)
    )
    if fill is not None:
        ui.console.print(Text(fill, style="cyan"))


def _outcome(ui: Ui, outcome: StepOutcome) -> None:
    if outcome.error is not None:
        ui.console.print(Text(f"✗ {outcome.error}", style="bold red"))
    if outcome.compaction is not None:
        ui.note(describe_compaction(outcome.compaction), "yellow")
    if outcome.turn is not None:
        text = " ".join(outcome.turn.reply.message.text.split())[:_ANSWER_PREVIEW]
        ui.console.print(Text(f"assistant: {text}…", style="green"))
        ui.console.print(turn_footer(outcome.turn))
    ui.console.print(_context_line(outcome.context))


def _context_line(report: ContextReport) -> Text:
    counts: dict[str, int] = {}
    for row in report.rows:
        counts[row.status] = counts.get(row.status, 0) + 1
    order = (Status.VERBATIM, Status.CUT, Status.CLEARED, Status.ADDED, Status.ONLY_IN_TRANSCRIPT)
    parts = ", ".join(f"{counts[s]} {s}" for s in order if s in counts)
    return Text(f"transcript: {parts}", style="dim")


def _finish(ui: Ui, session: ChatSession, model: Path, n_ctx: int) -> None:
    ui.console.print(Rule("7. What the next request would send (/context)", align="left"))
    ui.console.print(context_view(session.context_report()))
    ui.console.print(Rule("8. Cost (/cost)", align="left"))
    ui.note(
        "A local model costs nothing per token; the tokens are the engine's own counts. "
        "Recovery is the cost of failed and continuation calls."
    )
    ui.console.print(cost_table(session.cost_summary()))
    ui.console.print(Rule("Everything is saved", align="left"))
    count = len(session.transcript)
    ui.console.print(
        f"The transcript holds all {count} messages in full. Read it again with:\n"
        f"  chatcli sessions show {session.info.id}\n"
        f"or continue the conversation on the same model with:\n"
        f"  chatcli --continue",
        highlight=False,
    )

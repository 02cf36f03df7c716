"""The chat command: set up provider and session, then answer once (-p, piped stdin) or run
the interactive loop. One turn streams the answer as Markdown in a rich Live, with a spinner
until the first words arrive and one line per recovery event."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from types import TracebackType
from typing import Any

from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner

from chatcli.chat.settings import default_config_path, load_settings
from chatcli.chat.tap import CallRecord
from chatcli.chat.text import CompactionNote, CompactionStarted
from chatcli.cli.context import ChatContext, open_chat, reopened_settings
from chatcli.cli.demo import fetch_smollm2
from chatcli.cli.render import event_line, turn_footer
from chatcli.cli.slash import dispatch
from chatcli.cli.ui import Ui
from chatcli.errors import ChatcliError, ConfigError
from chatcli.events import Continued, Event
from chatcli.providers.llama_engine import require_engine
from chatcli.providers.registry import detect_provider, setup_help
from chatcli.store import SessionNotFound, open_store

__all__ = ["LOCAL_N_CTX", "StreamView", "answer", "local_flags", "run_chat"]

# `--local`'s window: half of SmolLM2's 8,192. A CPU reads a prompt that fills it for a minute
# or more (docs/configuration.md): the whole window would double that wait.
LOCAL_N_CTX = 4096


def run_chat(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> int:
    flags = {
        "provider": args.provider,
        "model": args.model,
        "base_url": args.base_url,
        "context_window": args.context_window,
        "max_tokens": args.max_tokens,
    }
    if args.local:
        flags.update(local_flags(args, ui, environ))
    settings = load_settings(flags, environ)
    with open_store(environ) as store:
        try:
            reopened = store.get_session(args.resume) if args.resume else None
        except SessionNotFound as exc:
            ui.error(str(exc))
            return 2
        if args.continue_:
            reopened = store.latest_session()
        settings = reopened_settings(settings, reopened, flags)
        name = settings.provider or detect_provider(environ)
        if name is None:
            # written for 80 columns: rich must not re-wrap it (a long path stays whole)
            help_text = setup_help(default_config_path(environ))
            ui.console.print(help_text, markup=False, highlight=False, soft_wrap=True)
            return 2
        prompt = _one_shot_text(args, ui)
        if prompt == "":
            ui.error("nothing to answer: give -p TEXT or pipe text on stdin")
            return 2
        resume = reopened.id if reopened is not None else None
        ctx = open_chat(ui, store, settings, name, environ, resume, flags)
        if prompt is not None:
            return 0 if answer(ctx, prompt) else 1
        return repl(ctx)


def local_flags(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> dict[str, Any]:
    """`--local`: the embedded engine (`--provider llama-cpp`) on the --model file, else on
    SmolLM2-135M-Instruct (fetched once into the cache), with a `LOCAL_N_CTX` window unless
    --context-window says otherwise."""
    if args.provider not in (None, "llama-cpp") or args.base_url:
        raise ConfigError("--local runs the model in this process: drop --provider/--base-url")
    require_engine()  # before anything is fetched: says so where the engine cannot run
    model = args.model or str(fetch_smollm2(ui, load_settings(None, environ).cache_dir))
    window = args.context_window or LOCAL_N_CTX
    return {"provider": "llama-cpp", "model": model, "context_window": window}


def _one_shot_text(args: argparse.Namespace, ui: Ui) -> str | None:
    """None for the interactive chat; else the question: -p text, then piped stdin."""
    prompt: str | None = args.prompt
    if ui.interactive:
        return prompt
    piped = ui.stdin.read().strip()
    return "\n\n".join(part for part in (prompt, piped) if part)


def repl(ctx: ChatContext) -> int:
    ui, session = ctx.ui, ctx.session
    ui.start_prompt(ctx.settings.history_path)
    which = f"session {session.info.id}" if session.saved else "new session"
    resumed = f", {len(session.transcript)} messages so far" if session.transcript else ""
    ui.note(
        f"chatcli · {ctx.provider_name} · {session.model} · {which}"
        f"{resumed}. /help for commands, Ctrl-C cancels an answer, Ctrl-D quits."
    )
    while True:
        try:
            line = ui.read_line("> ").strip()
        except KeyboardInterrupt:
            continue
        except EOFError:
            break
        if line.startswith("/"):
            if not dispatch(ctx, line):
                break
        elif line:
            answer(ctx, line)
    if ctx.session.transcript:
        ui.note(
            f"session {ctx.session.info.id} saved; reopen it with: chatcli --resume "
            f"{ctx.session.info.id}"
        )
    return 0


def answer(ctx: ChatContext, text: str | None) -> bool:
    """One turn: budget check, the streamed answer, its footer. False when it failed."""
    if not budget_allows(ctx, text):
        return False
    ui, session = ctx.ui, ctx.session
    view = StreamView(ui)
    try:
        with view:
            turn = session.send(
                text, on_event=view.event, on_delta=view.delta, on_discard=view.discard
            )
    except KeyboardInterrupt:
        if view.text:  # the live display is gone: what arrived stays on the screen
            view.show(view.text)
        cancelled = session.record_cancelled(view.text)
        ui.note(
            f"answer cancelled (Ctrl-C){_processed(cancelled)}; what arrived is kept in "
            "the transcript",
            "yellow",
        )
        return False
    except ChatcliError as exc:
        ui.error(str(exc))
        return False
    view.show(turn.reply.message.text)
    ui.console.print(turn_footer(turn))
    return True


def _processed(call: CallRecord | None) -> str:
    """What a cancelled call processed, as the cancel note says it ("": nothing known)."""
    if call is None or not (call.usage.prompt_tokens or call.usage.output_tokens):
        return ""
    about = "about " if call.estimated else ""
    usage = call.usage
    return (
        f": {about}{usage.prompt_tokens:,} prompt and {usage.output_tokens:,} output tokens "
        "were processed"
    )


def budget_allows(ctx: ChatContext, text: str | None) -> bool:
    """CHATCLI_SESSION_BUDGET_USD: warn at 80% (once), ask before going past it."""
    check = ctx.session.budget_check(text)
    if check is None or check.status == "ok":
        return True
    if check.status in ("warn", "unknown"):
        if check.status not in ctx.budget_shown:
            ctx.budget_shown.add(check.status)
            ctx.ui.note(f"budget: {check.message}", "yellow")
        return True
    ctx.ui.note(f"budget: {check.message}", "bold yellow")
    if ctx.ui.confirm("Go past the session budget?"):
        ctx.session.budget_approved = True
        return True
    ctx.ui.error("not sent: the session budget would be exceeded (CHATCLI_SESSION_BUDGET_USD)")
    return False


# What the spinner says until the answer's first words arrive.
WAITING = "waiting for the model…"


class StreamView:
    """The answer as it streams: a spinner until text arrives, then live Markdown; event lines
    print above it. Text from a failed call is dropped; a continuation's text is appended.
    While auto-compaction runs, the spinner says so (`status`)."""

    def __init__(self, ui: Ui) -> None:
        self.ui = ui
        self.text = self._kept = ""
        self._spinner = Spinner("dots", text=WAITING, style="cyan")
        self._live: Live | None = None
        if ui.console.is_terminal:
            self._live = Live(
                self._spinner, console=ui.console, transient=True, refresh_per_second=10
            )

    def __enter__(self) -> StreamView:
        if self._live is not None:
            self._live.__enter__()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._live is not None:
            self._live.__exit__(kind, exc, tb)

    @property
    def status(self) -> str:
        """What the spinner says: what the chat is waiting for."""
        return str(self._spinner.text)

    def event(self, event: Event) -> None:
        if isinstance(event, CompactionStarted):
            self._say(event.describe())  # no line: the note follows
            return
        if isinstance(event, CompactionNote):
            self._say(WAITING)
        if isinstance(event, Continued):
            self._kept = self.text
        # The line says what happened; the spinner, below it, only that the model is working
        # (repeating the line there showed every event twice).
        self.ui.console.print(event_line(event))

    def _say(self, status: str) -> None:
        self._spinner.update(text=status)
        if self._live is not None:
            self._live.refresh()

    def delta(self, text: str) -> None:
        self.text += text
        if self._live is not None:
            self._live.update(Markdown(self.text))

    def discard(self) -> None:
        self.text = self._kept
        if self._live is not None:
            self._live.update(Markdown(self.text) if self.text else self._spinner)

    def show(self, final: str) -> None:
        """The whole answer (continuations stitched), once the stream is over."""
        if self.ui.console.is_terminal:
            self.ui.console.print(Markdown(final))
        else:
            self.ui.console.print(final, markup=False, highlight=False, soft_wrap=True)

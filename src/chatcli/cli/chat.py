"""The chat command: set up provider and session, then answer once (-p, piped stdin) or run
the interactive loop. One turn streams the answer as Markdown in a rich Live, with a spinner
until the first words arrive and one line per recovery event."""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from types import TracebackType
from typing import Any

from rich.live import Live
from rich.markdown import Markdown
from rich.spinner import Spinner

from chatcli.cli.render import event_line, turn_footer
from chatcli.cli.ui import Ui
from chatcli.config import CompactionConfig, MicrocompactConfig, RecoveryConfig
from chatcli.errors import ChatcliError
from chatcli.events import Continued, Event
from chatcli.providers.base import Provider
from chatcli.providers.registry import (
    PROVIDERS,
    create_provider,
    detect_provider,
    model_info,
    setup_help,
)
from chatcli.session import ChatSession
from chatcli.settings import Settings, default_config_path, load_settings
from chatcli.store import SessionInfo, SessionNotFound, SessionStore

__all__ = [
    "ChatContext",
    "StreamView",
    "answer",
    "open_chat",
    "reopened_settings",
    "run_chat",
    "session_options",
]


@dataclass(kw_only=True)
class ChatContext:
    """What the loop and the slash commands share."""

    ui: Ui
    store: SessionStore
    session: ChatSession
    settings: Settings
    provider_name: str
    environ: Mapping[str, str]
    budget_shown: set[str] = field(default_factory=set)

    def new_provider(self, model: str) -> Provider:
        return create_provider(
            self.provider_name,
            model=model,
            base_url=self.settings.base_url,
            context_window=self.settings.context_window,
            environ=self.environ,
        )


def run_chat(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> int:
    flags = {
        "provider": args.provider,
        "model": args.model,
        "base_url": args.base_url,
        "context_window": args.context_window,
        "max_tokens": args.max_tokens,
    }
    settings = load_settings(flags, environ)
    with SessionStore(settings.db_path) as store:
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
        ctx = open_chat(ui, store, settings, name, environ, resume)
        if prompt is not None:
            return 0 if answer(ctx, prompt) else 1
        return repl(ctx)


def reopened_settings(
    settings: Settings, info: SessionInfo | None, flags: Mapping[str, Any]
) -> Settings:
    """A reopened session runs on the provider settings it was stored with (its model, URL,
    window and output limit): the environment and the config file are defaults for new
    sessions; only a flag overrides them (another provider: none of them)."""
    if info is None or info.provider is None:
        return settings
    if flags.get("provider") not in (None, info.provider):
        return settings
    stored: dict[str, Any] = {
        "provider": info.provider,
        "model": info.model,
        "base_url": info.base_url,
        "context_window": info.context_window,
        "max_tokens": info.max_tokens,
    }
    kept = {k: v for k, v in stored.items() if v is not None and flags.get(k) is None}
    return replace(settings, **kept)


def _one_shot_text(args: argparse.Namespace, ui: Ui) -> str | None:
    """None for the interactive chat; else the question: -p text, then piped stdin."""
    prompt: str | None = args.prompt
    if ui.interactive:
        return prompt
    piped = ui.stdin.read().strip()
    return "\n\n".join(part for part in (prompt, piped) if part)


def open_chat(
    ui: Ui,
    store: SessionStore,
    settings: Settings,
    name: str,
    environ: Mapping[str, str],
    resume: str | None = None,
) -> ChatContext:
    spec = PROVIDERS.get(name)
    model = settings.model or (spec.default_model if spec is not None else None)
    provider = create_provider(
        name,
        model=model,
        base_url=settings.base_url,
        context_window=settings.context_window,
        environ=environ,
    )
    model = model or str(getattr(provider, "model", None) or name)
    options = session_options(name, model, provider, settings, environ)
    session = ChatSession.open(
        store,
        provider,
        provider_name=name,
        model=model,
        base_url=settings.base_url,
        context_window=settings.context_window,
        resume=resume,
        **options,
    )
    return ChatContext(
        ui=ui, store=store, session=session, settings=settings, provider_name=name, environ=environ
    )


def session_options(
    name: str, model: str, provider: Provider, settings: Settings, environ: Mapping[str, str]
) -> dict[str, Any]:
    """Keyword arguments of ChatSession for these settings."""
    spec = PROVIDERS.get(name)
    return {
        "model_info": model_info(name, model, provider),
        "max_tokens": settings.max_tokens or (spec.default_max_tokens if spec else None),
        "recovery": RecoveryConfig.from_env(environ),
        "compaction": CompactionConfig.from_env(environ),
        "microcompaction": MicrocompactConfig.from_env(environ),
        "budget_usd": settings.session_budget_usd,
    }


def repl(ctx: ChatContext) -> int:
    from chatcli.cli.slash import dispatch

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
        session.record_cancelled(view.text)
        ui.note("answer cancelled (Ctrl-C); what arrived is kept in the transcript", "yellow")
        return False
    except ChatcliError as exc:
        ui.error(str(exc))
        return False
    view.show(turn.reply.message.text)
    ui.console.print(turn_footer(turn))
    return True


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


class StreamView:
    """The answer as it streams: a spinner until text arrives, then live Markdown; event lines
    print above it. Text from a failed call is dropped; a continuation's text is appended."""

    def __init__(self, ui: Ui) -> None:
        self.ui = ui
        self.text = self._kept = ""
        self._spinner = Spinner("dots", text="waiting for the model…", style="cyan")
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

    def event(self, event: Event) -> None:
        if isinstance(event, Continued):
            self._kept = self.text
        # The line says what happened; the spinner, below it, only that the model is working
        # (repeating the line there showed every event twice).
        self.ui.console.print(event_line(event))

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

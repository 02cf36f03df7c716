"""What the chat loop and the slash commands share: the `ChatContext`, and opening a session
on the right settings. A new session runs on the configured settings (flags, environment,
config file); a reopened one, by `--resume`, `--continue` or `/resume`, on the settings it
was stored with, overridden only by the command line's flags.

Its own module so that `chat` (the loop) and `slash` (the commands) both import it and not
each other.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from chatcli.chat.localmodel import sampling_for
from chatcli.chat.session import ChatSession
from chatcli.chat.settings import CliSettings, load_settings
from chatcli.cli.ui import Ui
from chatcli.config import CompactionConfig, MicrocompactConfig, RecoveryConfig
from chatcli.errors import ConfigError
from chatcli.providers.base import Provider
from chatcli.providers.registry import PROVIDERS, create_provider, model_info
from chatcli.redact import is_redacted, redact_url
from chatcli.store import SessionInfo, SessionStore

__all__ = [
    "ChatContext",
    "engine_sampling",
    "open_chat",
    "reopen",
    "reopened_settings",
    "session_options",
]


@dataclass(kw_only=True)
class ChatContext:
    """What the loop and the slash commands share. `flags`: the provider settings the user
    gave on the command line (None: not given), which override a reopened session's."""

    ui: Ui
    store: SessionStore
    session: ChatSession
    settings: CliSettings
    provider_name: str
    environ: Mapping[str, str]
    flags: Mapping[str, Any] = field(default_factory=dict)
    budget_shown: set[str] = field(default_factory=set)

    def new_provider(self, model: str) -> Provider:
        return create_provider(
            self.provider_name,
            model=model,
            base_url=self.settings.base_url,
            context_window=self.settings.context_window,
            environ=self.environ,
            **engine_sampling(self.provider_name, model),
        )


def reopened_settings(
    settings: CliSettings, info: SessionInfo | None, flags: Mapping[str, Any]
) -> CliSettings:
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
        "base_url": flags.get("base_url") or _reopened_base_url(info, settings.base_url),
        "context_window": info.context_window,
        "max_tokens": info.max_tokens,
    }
    kept = {k: v for k, v in stored.items() if v is not None and flags.get(k) is None}
    return replace(settings, **kept)


def _reopened_base_url(info: SessionInfo, configured: str | None) -> str | None:
    """The stored URL, whose credentials were not stored: the configured URL when it is the
    same one (its credentials included), else an error saying how to give it."""
    if info.base_url is None or redact_url(configured) == info.base_url:
        return configured if info.base_url is not None else None
    if is_redacted(info.base_url):
        raise ConfigError(
            f"session {info.id} ran on {info.base_url}, whose credentials are not stored: "
            "give the URL again with --base-url (or CHATCLI_BASE_URL)"
        )
    return info.base_url


def open_chat(
    ui: Ui,
    store: SessionStore,
    settings: CliSettings,
    name: str,
    environ: Mapping[str, str],
    resume: str | None = None,
    flags: Mapping[str, Any] | None = None,
) -> ChatContext:
    """Create the provider `name` on `settings` and open the session (`resume`: the one with
    that id, else a new one)."""
    spec = PROVIDERS.get(name)
    model = settings.model or (spec.default_model if spec is not None else None)
    provider = create_provider(
        name,
        model=model,
        base_url=settings.base_url,
        context_window=settings.context_window,
        environ=environ,
        **engine_sampling(name, model),
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
        ui=ui,
        store=store,
        session=session,
        settings=settings,
        provider_name=name,
        environ=environ,
        flags=dict(flags or {}),
    )


def reopen(ctx: ChatContext, session_id: str) -> ChatContext:
    """/resume ID: the session as `chatcli --resume ID` with this chat's flags opens it, on
    its stored provider settings (SessionNotFound: no such session)."""
    info = ctx.store.get_session(session_id)
    defaults = load_settings(dict(ctx.flags), ctx.environ)
    settings = reopened_settings(defaults, info, ctx.flags)
    name = settings.provider or ctx.provider_name
    return open_chat(ctx.ui, ctx.store, settings, name, ctx.environ, info.id, ctx.flags)


def engine_sampling(name: str, model: str | None) -> dict[str, float]:
    """A model run in this process runs with its makers' sampling, when it is a known one
    (`chatcli.chat.localmodel.sampling_for`)."""
    spec = PROVIDERS.get(name)
    return sampling_for(model) if spec is not None and spec.local and model else {}


def session_options(
    name: str, model: str, provider: Provider, settings: CliSettings, environ: Mapping[str, str]
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

"""Helpers shared by the adapters: optional SDK imports, API keys, error translation, the
rules every adapter follows when it maps `Settings` (unsupported: an error; a documented drop:
logged; tool settings only with tools; the schema's name), and user turns joined for the
servers whose chat template wants the roles to alternate."""

from __future__ import annotations

import importlib
import logging
import re
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import Any, NoReturn

from chatcli.catalog import lookup
from chatcli.errors import ConfigError, ErrorInfo, ErrorKind, ProviderError, classify_error
from chatcli.providers.base import Request
from chatcli.request_settings import TOOL_CHOICE_MODES, UnsupportedSetting

_log = logging.getLogger("chatcli.providers")

__all__ = [
    "api_key_from_env",
    "drop_setting",
    "incomplete_answer",
    "merge_user_turns",
    "model_limits",
    "raise_classified",
    "require_module",
    "schema_name",
    "tool_settings_apply",
    "transport_errors",
    "unsupported",
]


def require_module(name: str, extra: str) -> ModuleType:
    """Import an optional SDK, or fail with the command that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"{name} is not installed; install it with: pip install 'chatcli-recovery[{extra}]'"
        ) from exc


def api_key_from_env(
    explicit: str | None, names: Sequence[str], environ: Mapping[str, str], *, required: bool
) -> str | None:
    """The explicit key, else the first of `names` set in `environ`."""
    if explicit:
        return explicit
    for name in names:
        if environ.get(name):
            return environ[name]
    if required:
        raise ConfigError(f"no API key: set {' or '.join(names)} (or pass api_key=...)")
    return None


def raise_classified(exc: BaseException, *, status: int | None = None) -> NoReturn:
    """Translate a foreign exception into ProviderError, classified once, chained."""
    raise ProviderError(classify_error(exc, status=status)) from exc


def transport_errors() -> tuple[type[BaseException], ...]:
    """The HTTP libraries' errors: some SDK versions let a connection dropped mid-stream
    through unwrapped. The SDKs use httpx or its successor httpx2; google-genai's async
    client uses aiohttp instead whenever aiohttp is installed (litellm brings it), and lets
    its `ClientPayloadError` through when a stream is cut."""
    found: list[type[BaseException]] = []
    for name, error in (
        ("httpx2", "HTTPError"),
        ("httpx", "HTTPError"),
        ("aiohttp", "ClientError"),
    ):
        try:
            found.append(getattr(importlib.import_module(name), error))
        except ImportError:
            continue
    return tuple(found)


def incomplete_answer(message: str) -> ProviderError:
    """An answer that arrived cut off or empty (a stream without its terminator, no choices).

    Detected by the adapter, with no foreign error to classify; it is worth a retry, so it is
    TRANSIENT (never a silent empty answer).
    """
    return ProviderError(ErrorInfo(kind=ErrorKind.TRANSIENT, message=message))


def model_limits(
    model: str, provider: str, context_window: int | None, max_output_tokens: int | None
) -> tuple[int | None, int | None]:
    """The limits given, else the offline catalog's (None when unknown).

    The window is the largest prompt-plus-output the model takes; where the catalog also
    states a separate input cap (gpt-5: 400k context, 272k input), the smaller is used, so a
    prompt predicted to fit really does.
    """
    if context_window is not None and max_output_tokens is not None:
        return context_window, max_output_tokens
    info = lookup(model, provider)
    if info is None:
        return context_window, max_output_tokens
    known = [n for n in (info.context_window, info.max_input_tokens) if n is not None]
    window = context_window if context_window is not None else min(known, default=None)
    output = max_output_tokens if max_output_tokens is not None else info.max_output_tokens
    return window, output


# -- settings -----------------------------------------------------------------------------


def unsupported(api: str, name: str, hint: str) -> UnsupportedSetting:
    """The error for setting `name`, which `api` cannot take; `hint` says what to do."""
    return UnsupportedSetting(f"{api} cannot take the setting {name!r}: {hint}")


def drop_setting(api: str, name: str, why: str) -> None:
    """Log a setting that `api` does not take and that is left out on purpose (a hint the
    providers disagree on, such as `seed`), so that leaving it out is never silent."""
    _log.warning("%s: setting %r not sent: %s", api, name, why)


def tool_settings_apply(request: Request) -> bool:
    """Whether `tool_choice` / `parallel_tool_calls` are sent: only with tools (APIs reject
    them without; a client's defaults also reach requests that offer none, a summary say).
    A tool named in `tool_choice` must be one of the request's tools."""
    if not request.tools:
        return False
    choice = request.settings.tool_choice
    names = [tool.name for tool in request.tools]
    if choice is not None and choice not in TOOL_CHOICE_MODES and choice not in names:
        raise ConfigError(f"tool_choice {choice!r} names no tool of the request (tools: {names})")
    return True


def schema_name(schema: Mapping[str, Any]) -> str:
    """The name an API wants for a JSON schema: its `title` in the allowed characters, else
    "response"."""
    title = re.sub(r"[^A-Za-z0-9_-]", "_", str(schema.get("title") or ""))[:64]
    return title or "response"


def merge_user_turns(messages: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """Chat messages with each run of consecutive plain user messages (text content, nothing
    else) joined into one, a blank line between their texts. A server's chat template may
    want user and assistant turns to alternate (several raise "Conversation roles must
    alternate user/assistant/user/assistant/..."), and a recovered view can hold two user
    messages in a row (a pinned request before the kept ones, a turn that failed); joined,
    the model reads the same words. Anthropic's and Gemini's adapters join turns their own
    way."""
    merged: list[dict[str, Any]] = []
    for message in messages:
        last = merged[-1] if merged else None
        if last is not None and _plain_user(last) and _plain_user(message):
            last["content"] = f"{last['content']}\n\n{message['content']}"
        else:
            merged.append(dict(message))
    return merged


def _plain_user(message: Mapping[str, Any]) -> bool:
    return (
        message.get("role") == "user"
        and isinstance(message.get("content"), str)
        and set(message) == {"role", "content"}
    )

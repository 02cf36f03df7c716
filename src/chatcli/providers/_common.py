"""Helpers shared by the adapters: optional SDK imports, API keys, error translation."""

from __future__ import annotations

import importlib
from collections.abc import Mapping, Sequence
from types import ModuleType
from typing import NoReturn

from chatcli.errors import ConfigError, ProviderError, classify_error

__all__ = ["api_key_from_env", "raise_classified", "require_module"]


def require_module(name: str, extra: str) -> ModuleType:
    """Import an optional SDK, or fail with the command that installs it."""
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise ImportError(
            f"{name} is not installed; install it with: pip install 'chatcli[{extra}]'"
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

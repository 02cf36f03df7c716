"""The chatcli command's user settings: a TOML file, the environment and flags, resolved once.

Precedence, lowest to highest: built-in defaults, the config file, `CHATCLI_*` variables,
command-line flags. The config file is `$CHATCLI_CONFIG`, else `$CHATCLI_HOME/config.toml`,
else `config.toml` in the user's config directory (`$XDG_CONFIG_HOME/chatcli`, default
`~/.config/chatcli`; `%APPDATA%\\chatcli` on Windows). A missing default file is fine; a
`$CHATCLI_CONFIG` that names no file, a malformed file, an unknown key or a bad value is a
`ConfigError` that names the file or the variable.

API keys are read only from the environment or the OS keyring (`chatcli.providers.keys`):
never from the config file (a key there is refused, so it cannot end up in a dotfiles repo),
and chatcli never writes one anywhere.

Example `config.toml`::

    provider = "anthropic"
    model = "claude-sonnet-4-5"
    max_tokens = 4096
    session_budget_usd = 2.5
"""

from __future__ import annotations

import argparse
import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from chatcli.errors import ConfigError
from chatcli.store import default_db_path

__all__ = [
    "ENV_NAMES",
    "CliSettings",
    "default_cache_dir",
    "default_config_path",
    "load_settings",
    "positive_int",
]

# Setting -> the variable that sets it. The config file uses the setting names as keys.
ENV_NAMES = {
    "provider": "CHATCLI_PROVIDER",
    "model": "CHATCLI_MODEL",
    "base_url": "CHATCLI_BASE_URL",
    "context_window": "CHATCLI_CONTEXT_WINDOW",
    "max_tokens": "CHATCLI_MAX_TOKENS",
    "session_budget_usd": "CHATCLI_SESSION_BUDGET_USD",
}


@dataclass(frozen=True, slots=True, kw_only=True)
class CliSettings:
    """Everything the command needs to start. `config_path` is the file that was read."""

    provider: str | None = None
    model: str | None = None
    base_url: str | None = None
    context_window: int | None = None
    max_tokens: int | None = None
    session_budget_usd: float | None = None
    db_path: Path
    history_path: Path
    cache_dir: Path
    config_path: Path | None = None


def default_config_path(environ: Mapping[str, str]) -> Path:
    """Where the config file is looked for (see the module docstring)."""
    if environ.get("CHATCLI_CONFIG"):
        return Path(environ["CHATCLI_CONFIG"]).expanduser()
    if environ.get("CHATCLI_HOME"):
        return Path(environ["CHATCLI_HOME"]).expanduser() / "config.toml"
    if os.name == "nt" and environ.get("APPDATA"):
        return Path(environ["APPDATA"]) / "chatcli" / "config.toml"
    base = environ.get("XDG_CONFIG_HOME") or str(Path(environ.get("HOME", "~")) / ".config")
    return Path(base).expanduser() / "chatcli" / "config.toml"


def default_cache_dir(environ: Mapping[str, str]) -> Path:
    """`$CHATCLI_CACHE`, else `$XDG_CACHE_HOME/chatcli` (default `~/.cache/chatcli`): the
    same place the build scripts keep llama.cpp, so the demo model sits beside it."""
    if environ.get("CHATCLI_CACHE"):
        return Path(environ["CHATCLI_CACHE"]).expanduser()
    base = environ.get("XDG_CACHE_HOME") or str(Path(environ.get("HOME", "~")) / ".cache")
    return Path(base).expanduser() / "chatcli"


def load_settings(
    flags: Mapping[str, Any] | None = None, environ: Mapping[str, str] | None = None
) -> CliSettings:
    """Defaults < config file < environment < `flags` (a flag set to None is not given)."""
    env = os.environ if environ is None else environ
    path = default_config_path(env)
    if env.get("CHATCLI_CONFIG") and not path.is_file():
        # Named explicitly: a typo must not silently fall back to the defaults.
        raise ConfigError(f"CHATCLI_CONFIG={env['CHATCLI_CONFIG']!r}: no such file: {path}")
    values: dict[str, Any] = {}
    values.update(_read_config(path))
    values.update(_from_env(env))
    values.update({k: v for k, v in (flags or {}).items() if k in ENV_NAMES and v is not None})
    db_path = default_db_path(env)
    return CliSettings(
        **values,
        db_path=db_path,
        history_path=db_path.parent / "history",
        cache_dir=default_cache_dir(env),
        config_path=path if path.is_file() else None,
    )


def _read_config(path: Path) -> dict[str, Any]:
    if not path.is_file():
        return {}
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise ConfigError(f"{path}: not valid TOML: {exc}") from exc
    return {key: _checked(key, value, f"{key} in {path}") for key, value in data.items()}


def _from_env(environ: Mapping[str, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for key, variable in ENV_NAMES.items():
        raw = environ.get(variable, "").strip()
        if raw:
            out[key] = _checked(key, _parse(key, raw, variable), variable)
    return out


def _parse(key: str, raw: str, where: str) -> Any:
    kind = _KINDS[key]
    if kind is str:
        return raw
    try:
        return kind(raw)
    except ValueError:
        raise ConfigError(f"{where}={raw!r} is not a valid {kind.__name__}") from None


def _checked(key: str, value: Any, where: str) -> Any:
    """The value if it is a valid `key` setting, else a ConfigError naming `where`."""
    if "api_key" in key or key.endswith("_key"):
        raise ConfigError(
            f"{where}: API keys are not read from config files; set the provider's variable "
            "(e.g. OPENAI_API_KEY) or store the key in the OS keyring"
        )
    if key not in _KINDS:
        raise ConfigError(f"{where}: unknown setting (known: {', '.join(sorted(_KINDS))})")
    kind = _KINDS[key]
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise ConfigError(f"{where}={value!r} must be a {kind.__name__}")
    if isinstance(value, (int, float)) and value <= 0:
        raise ConfigError(f"{where}={value!r} must be positive")
    return value


_KINDS: dict[str, type] = {
    "provider": str,
    "model": str,
    "base_url": str,
    "context_window": int,
    "max_tokens": int,
    "session_budget_usd": float,
}


def positive_int(text: str) -> int:
    """An argparse type for a flag that takes a whole number of at least 1 (the chat's and the
    proxy's flags)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not an integer") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} must be at least 1")
    return value

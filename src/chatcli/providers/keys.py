"""API keys: from the environment, else the OS keyring (`keyring`, when importable).

Never from a config file, and chatcli never writes one anywhere.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping, Sequence

__all__ = ["KEYRING_SERVICE", "KeyringGet", "lookup_api_key"]

KEYRING_SERVICE = "chatcli"

KeyringGet = Callable[[str, str], str | None]


def lookup_api_key(
    provider: str,
    env_names: Sequence[str],
    environ: Mapping[str, str],
    keyring_get: KeyringGet | None = None,
) -> str | None:
    """The first of `env_names` that is set, else the keyring's entry for `provider`
    (service "chatcli", user = the provider name), else None."""
    for name in env_names:
        if environ.get(name):
            return environ[name]
    getter = keyring_get if keyring_get is not None else _system_keyring()
    if getter is None:
        return None
    try:
        return getter(KEYRING_SERVICE, provider) or None
    except Exception:  # a locked or absent keyring backend must not stop the command
        return None


def _system_keyring() -> KeyringGet | None:
    try:
        keyring = importlib.import_module("keyring")  # optional; untyped
    except ImportError:
        return None
    getter: KeyringGet = keyring.get_password
    return getter

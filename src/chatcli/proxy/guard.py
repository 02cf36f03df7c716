"""Who may use the proxy, and how much at once: client keys and per-key concurrency.

The proxy binds to loopback unless told otherwise; binding anywhere else requires client
keys (`--api-key`, `CHATCLI_PROXY_KEYS`). A client presents its key the way its SDK does
(`Authorization: Bearer KEY` for OpenAI clients, `x-api-key: KEY` for Anthropic ones);
keys are compared in constant time (`hmac.compare_digest`), against every configured key.
These are the proxy's own keys, never the upstream's: the upstream key stays in the proxy's
environment or keyring and is never sent back.
"""

from __future__ import annotations

import hmac
import ipaddress
from collections import Counter
from collections.abc import Mapping, Sequence

from chatcli.errors import ConfigError

__all__ = ["KEYS_ENV", "Guard", "is_loopback", "parse_keys"]

KEYS_ENV = "CHATCLI_PROXY_KEYS"


def is_loopback(host: str) -> bool:
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def parse_keys(given: Sequence[str], environ: Mapping[str, str]) -> tuple[str, ...]:
    """Client keys from `--api-key` values and `CHATCLI_PROXY_KEYS` (comma-separated)."""
    keys = [*given, *environ.get(KEYS_ENV, "").split(",")]
    return tuple(k.strip() for k in keys if k.strip())


class Guard:
    """Checks a request's key and holds a concurrency slot per key."""

    def __init__(self, keys: Sequence[str], *, host: str, max_concurrency: int) -> None:
        if not keys and not is_loopback(host):
            raise ConfigError(
                f"--host {host} is not loopback: give client keys with --api-key or "
                f"{KEYS_ENV} (clients send them as their API key)"
            )
        if max_concurrency < 1:
            raise ConfigError(f"--max-concurrency={max_concurrency} must be at least 1")
        self._keys = tuple(k.encode() for k in keys)
        self.max_concurrency = max_concurrency
        self._active: Counter[str] = Counter()

    def client(self, headers: Mapping[str, str]) -> str | None:
        """The key that identifies this client ("" when keys are off), or None: refused."""
        if not self._keys:
            return ""
        given = _presented(headers).encode()
        matched = False
        for key in self._keys:  # no early exit: the time does not say which key matched
            matched |= hmac.compare_digest(given, key)
        return given.decode() if matched else None

    def acquire(self, client: str) -> bool:
        if self._active[client] >= self.max_concurrency:
            return False
        self._active[client] += 1
        return True

    def in_flight(self, client: str) -> int:
        """The slots `client` holds now."""
        return self._active[client]

    def release(self, client: str) -> None:
        self._active[client] -= 1
        if self._active[client] <= 0:
            del self._active[client]


def _presented(headers: Mapping[str, str]) -> str:
    auth = headers.get("authorization", "")
    if auth.lower().startswith("bearer "):
        return auth[7:].strip()
    return headers.get("x-api-key", "").strip()

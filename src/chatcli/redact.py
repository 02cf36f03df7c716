"""Credentials out of URLs: the one place a `base_url` is made safe to show or store.

A base URL can carry a secret: `https://user:token@host/v1`, `...?api-key=...`,
`...?key=...` (Gemini style), `...?access_token=...`. `redact_url` replaces the userinfo and
the value of every query parameter whose name says it is a secret with `REDACTED`, and keeps
the rest byte for byte, so the URL still says where it points.
"""

from __future__ import annotations

import re
from urllib.parse import unquote, urlsplit, urlunsplit

__all__ = ["REDACTED", "is_redacted", "redact_url"]

REDACTED = "***"
# Query parameter names that hold secrets (api-key, api_key, key, token, access_token,
# sig, signature, password, secret, auth, credential, ...); matched on the decoded name.
_SECRET_NAME = re.compile(r"key|token|secret|passw|pwd|auth|sig|credential|session", re.I)


def redact_url(url: str | None) -> str | None:
    """`url` with its credentials replaced by `REDACTED` (None stays None)."""
    if url is None:
        return None
    try:
        parts = urlsplit(url)
    except ValueError:  # not a URL we can read: show nothing of it
        return REDACTED
    netloc = parts.netloc
    if "@" in netloc:
        netloc = f"{REDACTED}@{netloc.rpartition('@')[2]}"
    query = "&".join(_redact_param(p) for p in parts.query.split("&")) if parts.query else ""
    return urlunsplit((parts.scheme, netloc, parts.path, query, parts.fragment))


def is_redacted(url: str | None) -> bool:
    """Whether `url` had credentials taken out by `redact_url` (it cannot be used as is)."""
    return url is not None and REDACTED in url


def _redact_param(param: str) -> str:
    name, sep, value = param.partition("=")
    if sep and value and _SECRET_NAME.search(unquote(name)):
        return f"{name}={REDACTED}"
    return param

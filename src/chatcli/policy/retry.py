"""When to ask a provider again after a rate limit or a transient error, and how long to wait.

Pure functions of the attempt number, the provider's Retry-After and a random draw: no clock
and no sleep (callers inject those). Shared by the recovery loop and the compaction's summary
calls, so one policy decides every retry; it lives apart from both because the recovery
module imports the compaction module.
"""

from __future__ import annotations

import random as _random
from collections.abc import Callable

from chatcli.errors import ErrorKind

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "RETRYABLE",
    "RETRY_BASE_DELAY",
    "RETRY_MAX_DELAY",
    "RandomSource",
    "jitter_source",
    "never_answered",
    "retry_delay",
]

# Rate-limit / transient retries in a row before the error is raised (a success resets it).
DEFAULT_MAX_RETRIES = 2
# Backoff: up to 1 s, 2 s, 4 s, ... capped at RETRY_MAX_DELAY. A Retry-After longer than that
# cap (a quota window, an outage) is not waited for: blocking a call for minutes helps nobody.
RETRY_BASE_DELAY = 1.0
RETRY_MAX_DELAY = 30.0
# The kinds worth asking again: waiting can fix them (a quota or a bad request it cannot).
RETRYABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.TRANSIENT})

# What an HTTP library says when a connection closed before any byte of the answer came: a
# kept-alive connection the server had just closed, reused before its close arrived (httpx's
# and httpx2's RemoteProtocolError; aiohttp's ServerDisconnectedError says it by its class).
_NEVER_ANSWERED_TEXT = "without sending a response"
_NEVER_ANSWERED_CLASS = "ServerDisconnectedError"

# A draw in [0, 1): `random.random`, or a fixed function in tests.
RandomSource = Callable[[], float]

# Where `retry_delay` draws its jitter when the caller passes no source. Module state on
# purpose: the recovery loop and the compaction call `retry_delay` deep inside, and a test
# suite pins this one name (tests/conftest.py) instead of threading a source through both.
jitter_source: RandomSource = _random.random


def retry_delay(
    attempt: int, retry_after: float | None, *, random: RandomSource | None = None
) -> float | None:
    """Seconds to wait before retry number `attempt` (1-based), or None: do not retry.

    The provider's Retry-After wins when it is within `RETRY_MAX_DELAY`: it is waited exactly.
    Without one, "full jitter": a uniform draw in [0, backoff], where the backoff doubles from
    `RETRY_BASE_DELAY` up to that cap. Clients that failed together (one rate-limit window, one
    outage) then spread their retries instead of all coming back at the same instant.
    `random` returns a float in [0, 1) (default: `jitter_source`).
    """
    if retry_after is not None:
        return max(0.0, float(retry_after)) if retry_after <= RETRY_MAX_DELAY else None
    backoff = min(RETRY_BASE_DELAY * 2.0 ** (attempt - 1), RETRY_MAX_DELAY)
    draw = (random or jitter_source)()
    return backoff * min(max(draw, 0.0), 1.0)


def never_answered(error: BaseException) -> bool:
    """Whether `error` (or an error it was raised from) is a connection the server closed
    before sending any of its answer. The usual cause is a race no caller can see: a server
    that closes a kept-alive connection after an answer (llama-server does after each streamed
    one) while the client already reuses it for the next request. Browsers and HTTP clients
    send such a request again at once; so does the recovery loop, once, even when retries are
    off (`max_retries=0`): a continuation in the middle of a stream has no one else to retry it."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if type(current).__name__ == _NEVER_ANSWERED_CLASS:
            return True
        if type(current).__name__ == "RemoteProtocolError" and _NEVER_ANSWERED_TEXT in str(current):
            return True
        current = current.__cause__ or current.__context__
    return False

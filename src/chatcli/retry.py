"""When to ask a provider again after a rate limit or a transient error, and how long to wait.

Pure functions of the attempt number and the provider's Retry-After: no clock and no sleep
(callers inject those). Shared by the recovery loop and the compaction's summary calls, so one
policy decides every retry; it lives apart from both because the recovery module imports the
compaction module.
"""

from __future__ import annotations

from chatcli.errors import ErrorKind

__all__ = [
    "DEFAULT_MAX_RETRIES",
    "RETRYABLE",
    "RETRY_BASE_DELAY",
    "RETRY_MAX_DELAY",
    "retry_delay",
]

# Rate-limit / transient retries in a row before the error is raised (a success resets it).
DEFAULT_MAX_RETRIES = 2
# Backoff: 1 s, 2 s, 4 s, ... capped at RETRY_MAX_DELAY. A Retry-After longer than that cap
# (a quota window, an outage) is not waited for: blocking a call for minutes helps nobody.
RETRY_BASE_DELAY = 1.0
RETRY_MAX_DELAY = 30.0
# The kinds worth asking again: waiting can fix them (a quota or a bad request it cannot).
RETRYABLE = frozenset({ErrorKind.RATE_LIMIT, ErrorKind.TRANSIENT})


def retry_delay(attempt: int, retry_after: float | None) -> float | None:
    """Seconds to wait before retry number `attempt` (1-based), or None: do not retry.

    The provider's Retry-After wins when it is within `RETRY_MAX_DELAY`; without one, the
    delay doubles from `RETRY_BASE_DELAY` up to that cap. No jitter: the policy is
    deterministic, and one client's retries are not a thundering herd.
    """
    if retry_after is not None:
        return max(0.0, float(retry_after)) if retry_after <= RETRY_MAX_DELAY else None
    return min(RETRY_BASE_DELAY * 2.0 ** (attempt - 1), RETRY_MAX_DELAY)

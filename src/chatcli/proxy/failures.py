"""Why a request failed, as a `Failure` any client dialect can write: the one table from the
library's classified errors (`ErrorInfo.kind`) to what the client is told.

An overflow recovery could not fix is the client's 400 (its dialect's "context too long"
error, saying what the proxy tried and what the client can do), never a 5xx: a client
retries a 5xx forever. Upstream rate limits keep their
`Retry-After`; the upstream rejecting the proxy's own key is the client's 401/403. Messages
go through `redact_secrets`, so no key the upstream echoes reaches the client. A stream
that must stop because text already sent was dropped (`Retracted`) is an upstream failure
(OpenAI `server_error`, Anthropic `api_error`): the request may simply be sent again.
"""

from __future__ import annotations

import logging

from chatcli.errors import (
    ContextRecoveryError,
    ErrorInfo,
    ErrorKind,
    ProviderError,
    redact_secrets,
)
from chatcli.wire.dialect import Failure, FailureKind
from chatcli.wire.items import Retracted

__all__ = ["failure_from", "overflow_message"]

logger = logging.getLogger("chatcli.proxy")

# ErrorKind -> (what the client is told, its status when the upstream's is not a 4xx).
_BY_KIND: dict[ErrorKind, tuple[FailureKind, int]] = {
    ErrorKind.CONTEXT_OVERFLOW: (FailureKind.OVERFLOW, 400),
    ErrorKind.OUTPUT_CAP: (FailureKind.INVALID, 400),
    ErrorKind.INVALID_REQUEST: (FailureKind.INVALID, 400),
    ErrorKind.PAYLOAD_TOO_LARGE: (FailureKind.TOO_LARGE, 413),
    ErrorKind.RATE_LIMIT: (FailureKind.RATE_LIMIT, 429),
    ErrorKind.QUOTA: (FailureKind.RATE_LIMIT, 429),
    ErrorKind.AUTH: (FailureKind.AUTH, 401),
    ErrorKind.TRANSIENT: (FailureKind.UPSTREAM, 502),
    ErrorKind.OTHER: (FailureKind.UPSTREAM, 502),
}
# Kinds whose status is always the table's: an overflow is a 400 even when the upstream said
# 413 or 500 (early llama.cpp), a rate limit a 429 even when it came as a 400.
_FIXED_STATUS = frozenset({FailureKind.OVERFLOW, FailureKind.RATE_LIMIT, FailureKind.UPSTREAM})


def failure_from(error: BaseException) -> Failure:
    """The Failure to answer for an exception raised by `Client.asend`."""
    if isinstance(error, ContextRecoveryError):
        return _from_info(error.info, FailureKind.OVERFLOW, 400, overflow_message(error))
    if isinstance(error, ProviderError):
        kind, status = _BY_KIND[error.info.kind]
        return _from_info(error.info, kind, status, error.info.message or str(error))
    if isinstance(error, Retracted):
        return Failure(kind=FailureKind.UPSTREAM, status=502, message=str(error))
    logger.error("upstream call failed: %s", redact_secrets(repr(error)))
    return Failure(kind=FailureKind.UPSTREAM, status=502, message="the upstream call failed")


def overflow_message(error: ContextRecoveryError) -> str:
    """What a client is told of a request recovery could not fit: the window, what the proxy
    tried, and what the client can do (the library's own message speaks to the chat's user,
    of its slash commands and flags)."""
    info = error.info
    window = f"{info.limit:,}-token context window" if info.limit else "context window"
    prompt = f" ({info.prompt_tokens:,} tokens of prompt)" if info.prompt_tokens else ""
    why = f": {info.message.rstrip('.')}" if info.message else ""
    tried = "; ".join(error.attempts) or "no recovery step applies"
    return (
        f"the request does not fit the upstream model's {window}{prompt}{why}. The proxy's "
        f"recovery could not make it fit ({tried}). The system prompt, the tool definitions "
        "and the latest message are always sent: to go on, compact or clear the conversation, "
        "send a shorter system prompt, fewer tools or a shorter message, or use a model with "
        "a larger window"
    )


def _from_info(info: ErrorInfo, kind: FailureKind, status: int, message: str) -> Failure:
    upstream = info.status
    if kind not in _FIXED_STATUS and upstream is not None and 400 <= upstream < 500:
        status = upstream
        if kind is FailureKind.AUTH and upstream == 403:
            kind = FailureKind.PERMISSION
    if kind is FailureKind.UPSTREAM and upstream in (503, 529):
        kind, status = FailureKind.OVERLOADED, 503
    return Failure(
        kind=kind,
        status=status,
        message=redact_secrets(message) or kind.value,
        retry_after=info.retry_after,
        prompt_tokens=info.prompt_tokens,
        limit=info.limit,
    )

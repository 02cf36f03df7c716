"""Error kinds, classified error info, and chatcli's exception tree.

Every provider failure is classified ONCE, at the adapter boundary (or by `Client` for a
foreign exception), into an `ErrorInfo`; the core only ever looks at that.

Exception tree::

    ChatcliError
     +-- ConfigError              a CHATCLI_* setting (or argument) has an invalid value
     +-- ProviderError            a provider call failed; `.info` is the classified ErrorInfo
     +-- ContextRecoveryError     every recovery level was tried and the request still fails
     +-- CompactionError          /compact failed; the session is unchanged
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "ChatcliError",
    "CompactionError",
    "ConfigError",
    "ContextRecoveryError",
    "ErrorInfo",
    "ErrorKind",
    "ProviderError",
    "classify_error",
]


class ErrorKind(StrEnum):
    """What a failure means for recovery."""

    CONTEXT_OVERFLOW = "context_overflow"  # the prompt does not fit: truncate history
    OUTPUT_CAP = "output_cap"  # max_tokens above the model's cap: lower max_tokens
    RATE_LIMIT = "rate_limit"  # per-minute limits, throttling: wait and retry
    QUOTA = "quota"  # billing / credit exhausted: do not retry
    PAYLOAD_TOO_LARGE = "payload_too_large"  # byte-size limit of a proxy or API
    AUTH = "auth"
    TRANSIENT = "transient"  # 5xx, overloaded, connection reset: retry
    INVALID_REQUEST = "invalid_request"
    OTHER = "other"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """A classified provider error, with the numbers its message states (else None)."""

    kind: ErrorKind
    message: str = ""
    status: int | None = None
    code: str | None = None
    prompt_tokens: int | None = None
    limit: int | None = None
    max_tokens: int | None = None
    output_limit: int | None = None
    requested_tokens: int | None = None
    retry_after: float | None = None

    @property
    def is_overflow(self) -> bool:
        return self.kind is ErrorKind.CONTEXT_OVERFLOW


class ChatcliError(Exception):
    """Base of every exception chatcli raises."""


class ConfigError(ChatcliError, ValueError):
    """An invalid configuration value; the message names the variable and the value."""


class ProviderError(ChatcliError):
    """A provider call failed; `info` says how it was classified."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message or info.kind.value)
        self.info = info


class ContextRecoveryError(ChatcliError):
    """Every recovery level was tried (or skipped) and the request still does not fit.

    `info` is the last classified provider error; `attempts` describes each level applied or
    skipped, in order. The original provider exception is chained as `__cause__`.
    """

    def __init__(self, message: str, *, info: ErrorInfo, attempts: tuple[str, ...]) -> None:
        super().__init__(message)
        self.info = info
        self.attempts = attempts


class CompactionError(ChatcliError):
    """A compaction failed; the working view is exactly as it was before."""


def classify_error(error: object, *, status: int | None = None) -> ErrorInfo:
    """Classify an exception, a message string or a parsed JSON body.

    Placeholder until the classifier lands: everything is OTHER.
    """
    return ErrorInfo(kind=ErrorKind.OTHER, message=str(error), status=status)

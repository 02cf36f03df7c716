"""What a provider failure means for recovery: `ErrorKind`, and `ErrorInfo`, the classified
error with the numbers its message states.

Every failure is classified once, at the adapter boundary, into an `ErrorInfo`; the core only
ever looks at that, never at an SDK's exception.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = ["ErrorInfo", "ErrorKind"]


class ErrorKind(StrEnum):
    """What a failure means for recovery."""

    CONTEXT_OVERFLOW = "context_overflow"  # the prompt does not fit: truncate history
    OUTPUT_CAP = "output_cap"  # max_tokens above the model's cap: lower max_tokens
    RATE_LIMIT = "rate_limit"  # a limit per second..day, throttling: wait and retry
    QUOTA = "quota"  # quota, billing, credit or monthly limit exhausted: do not retry
    PAYLOAD_TOO_LARGE = "payload_too_large"  # byte-size limit of a proxy or API
    AUTH = "auth"
    TRANSIENT = "transient"  # 5xx, overloaded, connection reset: retry
    INVALID_REQUEST = "invalid_request"
    OTHER = "other"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """A classified provider error, with the numbers its message states (else None).

    `prompt_tokens`: the input as counted by the provider; `limit`: the context window;
    `max_tokens`: the output requested; `output_limit`: the model's output cap;
    `requested_tokens`: prompt + output when the provider states only the sum;
    `input_chars` / `limit_chars`: a limit stated in characters instead of tokens.
    `reason` names the rule (or HTTP status) that decided the kind, for logs and reports.
    """

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
    input_chars: int | None = None
    limit_chars: int | None = None
    reason: str | None = None

    @property
    def is_overflow(self) -> bool:
        return self.kind is ErrorKind.CONTEXT_OVERFLOW

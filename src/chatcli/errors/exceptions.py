"""chatcli's exception tree: every exception chatcli raises is a `ChatcliError`.

::

    ChatcliError
     +-- ConfigError              a CHATCLI_* setting (or argument) has an invalid value
     +-- ProviderError            a provider call failed; `.info` is the classified ErrorInfo
     +-- ContextRecoveryError     every recovery level was tried and the request still fails
     +-- CompactionError          /compact failed; the session is unchanged
          +-- CannotSummarise     the model cannot summarise: asking again fails the same way
"""

from __future__ import annotations

from chatcli.errors.kinds import ErrorInfo
from chatcli.messages import Usage

__all__ = [
    "CannotSummarise",
    "ChatcliError",
    "CompactionError",
    "ConfigError",
    "ContextRecoveryError",
    "ProviderError",
]


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
    """A compaction failed; the working view is exactly as it was before.

    `calls` and `usage`: the summary calls made before it failed and the usage they reported.
    They were paid for, so cost tracking counts them like a compaction that worked.
    """

    def __init__(self, *args: object, calls: int = 0, usage: Usage | None = None) -> None:
        super().__init__(*args)
        self.calls = calls
        self.usage = usage if usage is not None else Usage()


class CannotSummarise(CompactionError):
    """The model cannot summarise this conversation: its summary failed the checks, or its
    window has no room for a summary. A failure of the model, not of the provider: asking it
    again fails the same way (auto-compaction stops asking)."""

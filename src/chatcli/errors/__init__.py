"""Errors: chatcli's exception tree and the classifier that turns any provider failure into
one `ErrorInfo`, in modules with one concern each.

- `kinds`: `ErrorKind`, what a failure means for recovery, and `ErrorInfo`, the classified error.
- `exceptions`: the exception tree, `ChatcliError` at its root.
- `classify`: `classify_error`, and `redact_secrets` for the messages it keeps.
- `evidence`: what an exception, a message or a parsed body says (codes, status, texts).
- `rules`: the ordered table of classification rules, as data.
- `numbers`: the numbers a message states (prompt tokens, limits), for recovery.

The signs of an overflow in a successful response (a context-window stop, a silently cut
prompt) are not errors: they live in `chatcli.overflow_signs`, re-exported here.
"""

from chatcli.errors.classify import classify_error, redact_secrets
from chatcli.errors.exceptions import (
    CannotSummarise,
    ChatcliError,
    CompactionError,
    ConfigError,
    ContextRecoveryError,
    ProviderError,
)
from chatcli.errors.kinds import ErrorInfo, ErrorKind
from chatcli.overflow_signs import (
    SILENT_TRUNCATION,
    is_context_window_stop,
    is_window_cap,
    silent_truncation,
)

__all__ = [
    "SILENT_TRUNCATION",
    "CannotSummarise",
    "ChatcliError",
    "CompactionError",
    "ConfigError",
    "ContextRecoveryError",
    "ErrorInfo",
    "ErrorKind",
    "ProviderError",
    "classify_error",
    "is_context_window_stop",
    "is_window_cap",
    "redact_secrets",
    "silent_truncation",
]

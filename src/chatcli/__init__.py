"""chatcli keeps LLM conversations alive: context-overflow recovery, max_tokens escalation,
tool-result budgets and compaction, across providers."""

from chatcli.config import RecoveryConfig
from chatcli.errors import (
    ChatcliError,
    CompactionError,
    ConfigError,
    ContextRecoveryError,
    ErrorInfo,
    ErrorKind,
    ProviderError,
    classify_error,
)
from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, ToolResult, Usage
from chatcli.providers.base import Provider, Request, Response, ToolSpec

__all__ = [
    "ChatcliError",
    "CompactionError",
    "ConfigError",
    "ContextRecoveryError",
    "ErrorInfo",
    "ErrorKind",
    "Message",
    "Provider",
    "ProviderError",
    "RecoveryConfig",
    "Request",
    "Response",
    "Role",
    "StopReason",
    "TextPart",
    "ToolCall",
    "ToolResult",
    "ToolSpec",
    "Usage",
    "classify_error",
]

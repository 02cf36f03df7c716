"""chatcli keeps LLM conversations alive: context-overflow recovery, max_tokens escalation,
tool-result budgets and compaction, across providers.

The public API is re-exported here; `__all__` is exactly that API (a test checks it).
"""

from chatcli.compaction import (
    AutoCompaction,
    CompactionBreaker,
    CompactionReport,
    CompactionResult,
    aauto_compact,
    acompact,
    auto_compact,
    compact,
    should_auto_compact,
)
from chatcli.config import CompactionConfig, MicrocompactConfig, RecoveryConfig
from chatcli.continuation import CONTINUATION_MESSAGE
from chatcli.errors import (
    ChatcliError,
    CompactionError,
    ConfigError,
    ContextRecoveryError,
    ErrorInfo,
    ErrorKind,
    ProviderError,
    classify_error,
    is_context_window_stop,
)
from chatcli.events import (
    CompactionPaused,
    Continued,
    Escalated,
    Event,
    Hook,
    InstructionsCarried,
    LevelApplied,
    LevelSkipped,
    MaxTokensFitted,
    OutputCapLowered,
    OverflowDetected,
    PreflightRecovery,
    RecoveryFailed,
    Retried,
    SilentTruncationDetected,
    ToolCallsDropped,
)
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.carry import CARRY_HEADING, carry_instructions
from chatcli.history.microcompact import microcompact
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.result import TransformReport, TransformResult
from chatcli.history.sticky import StickyView
from chatcli.history.truncate import COMPACTION_NOTICE, apply_recovery_level
from chatcli.integrations.sdk import wrap
from chatcli.messages import (
    CompactionPart,
    Message,
    Role,
    StopReason,
    TextPart,
    ToolCall,
    ToolResult,
    Usage,
)
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import (
    NativeCompaction,
    Provider,
    Request,
    Response,
    StreamChunk,
    StreamingProvider,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from chatcli.providers.counting import (
    LlamaServerTokens,
    RemoteCounter,
    calibrate_estimator,
    counter_for,
)
from chatcli.providers.gemini import Gemini
from chatcli.providers.llama_cpp import LlamaCpp
from chatcli.providers.openai import OpenAI
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recall import RecallTool, recall_tool
from chatcli.recovery import Client, Reply
from chatcli.request_settings import Settings
from chatcli.tokens.estimate import TokenEstimator

__all__ = [
    "CARRY_HEADING",
    "COMPACTION_NOTICE",
    "CONTINUATION_MESSAGE",
    "Anthropic",
    "AutoCompaction",
    "ChatcliError",
    "Client",
    "CompactionBreaker",
    "CompactionConfig",
    "CompactionError",
    "CompactionPart",
    "CompactionPaused",
    "CompactionReport",
    "CompactionResult",
    "ConfigError",
    "ContextRecoveryError",
    "Continued",
    "ErrorInfo",
    "ErrorKind",
    "Escalated",
    "Event",
    "Gemini",
    "Hook",
    "InstructionsCarried",
    "LevelApplied",
    "LevelSkipped",
    "LlamaCpp",
    "LlamaServerTokens",
    "MaxTokensFitted",
    "Message",
    "MicrocompactConfig",
    "NativeCompaction",
    "OpenAI",
    "OpenAICompatible",
    "OutputCapLowered",
    "OverflowDetected",
    "PreflightRecovery",
    "Provider",
    "ProviderError",
    "RecallTool",
    "RecoveryConfig",
    "RecoveryFailed",
    "RemoteCounter",
    "Reply",
    "Request",
    "Response",
    "Retried",
    "Role",
    "Settings",
    "SilentTruncationDetected",
    "StickyView",
    "StopReason",
    "StreamChunk",
    "StreamingProvider",
    "TextDelta",
    "TextPart",
    "TokenEstimator",
    "ToolCall",
    "ToolCallDelta",
    "ToolCallsDropped",
    "ToolResult",
    "ToolSpec",
    "TransformReport",
    "TransformResult",
    "Usage",
    "aauto_compact",
    "acompact",
    "apply_recovery_level",
    "auto_compact",
    "calibrate_estimator",
    "carry_instructions",
    "classify_error",
    "compact",
    "counter_for",
    "enforce_tool_result_budget",
    "is_context_window_stop",
    "microcompact",
    "recall_tool",
    "repair_tool_pairing",
    "should_auto_compact",
    "wrap",
]

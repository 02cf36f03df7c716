"""OpenAI adapter: Chat Completions (the default) and the Responses API, via the official SDK.

`OpenAI(model)` speaks Chat Completions; `OpenAI(model, api="responses")` speaks the Responses
API. Both run on one driver (`adapter`: `OpenAIBase`, which `OpenAICompatible` shares too); each
wire's conversions live in its own module (`chat`, `responses`, the latter with OpenAI's native
compaction), what they share in `common`. This module re-exports the names used elsewhere.
"""

from chatcli.providers.openai.adapter import Api, OpenAI, OpenAIBase, prompt_cache_key
from chatcli.providers.openai.chat import _chat_tool as _chat_tool
from chatcli.providers.openai.chat import chat_messages, chat_response
from chatcli.providers.openai.common import _sdk_errors as _sdk_errors
from chatcli.providers.openai.common import parse_tool_call
from chatcli.providers.openai.responses import (
    COMPACTION_FAMILIES,
    REASONING_KEY,
    RETAINED_KEY,
    compacted_window,
    responses_input,
    responses_response,
    supports_native_compaction,
)

__all__ = [
    "COMPACTION_FAMILIES",
    "REASONING_KEY",
    "RETAINED_KEY",
    "Api",
    "OpenAI",
    "OpenAIBase",
    "chat_messages",
    "chat_response",
    "compacted_window",
    "parse_tool_call",
    "prompt_cache_key",
    "responses_input",
    "responses_response",
    "supports_native_compaction",
]

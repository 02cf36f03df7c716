"""LangChain messages <-> chatcli messages: the one place that translates between them.

`to_chatcli` turns a LangChain conversation into chatcli messages, each tagged with the
position of the LangChain message it came from; `Converted.back` turns a working view chosen by
chatcli's recovery into LangChain messages again:

- a message recovery left as it was is the caller's own object, unchanged (ids, content
  blocks, metadata: nothing is lost);
- a message recovery cut is a copy of the original with only its text (and, for an assistant
  message, its tool calls) replaced: its id, metadata and non-text content blocks are kept;
- a message recovery made (the level-3 notice, a synthetic result for a call that has none,
  a partial answer and the continuation request) is a new message of the matching type.

Tool pairs stay valid: an assistant message's `tool_calls` and a `ToolMessage`'s
`tool_call_id` map to chatcli's `ToolCall.id` / `ToolResult.call_id`, which recovery repairs
as pairs. A LangChain `invalid_tool_calls` entry (arguments that did not parse, typically cut
off at max_tokens) is a chatcli call marked `incomplete`: chatcli never forwards one to run,
and a message it edits keeps none.

`answer_to_chatcli` reads a model's answer: its text and calls, the stop reason from
`response_metadata` (OpenAI `finish_reason`, Anthropic `stop_reason`, Gemini `finish_reason`,
Ollama `done_reason`, Responses API `incomplete_details`) and the usage.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar

from langchain_core.messages import (
    AIMessage,
    BaseMessage,
    HumanMessage,
    SystemMessage,
    ToolMessage,
)
from langchain_core.messages import ToolCall as LangChainToolCall

from chatcli.errors import is_context_window_stop
from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, ToolResult, Usage
from chatcli.providers.base import Response

__all__ = [
    "ORIGIN",
    "Converted",
    "answer_to_chatcli",
    "from_chatcli",
    "message_to_chatcli",
    "replace_answer",
    "to_chatcli",
]

# The `provider_details` key of a chatcli message that says which LangChain message it is.
ORIGIN = "langchain_index"

# Stop reasons as LangChain integrations put them in `response_metadata`, lower-cased.
_STOPS: Mapping[str, StopReason] = {
    "stop": StopReason.END_TURN,
    "end_turn": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "max_tokens": StopReason.MAX_TOKENS,
    "max_output_tokens": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "tool_use": StopReason.TOOL_USE,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "content_filter": StopReason.REFUSAL,
    "refusal": StopReason.REFUSAL,
    "safety": StopReason.REFUSAL,
    "compaction": StopReason.COMPACTION,
}
_STOP_KEYS = ("finish_reason", "stop_reason", "done_reason")
# Content block types that hold a tool call: a cut call dropped from `tool_calls` is dropped
# from the content too, where an integration keeps a copy (ChatAnthropic, the Responses API).
_CALL_BLOCKS = frozenset({"tool_use", "function_call", "tool_call"})
_M = TypeVar("_M", bound=BaseMessage)
_ROLES: Mapping[str, Role] = {
    "system": Role.SYSTEM,
    "human": Role.USER,
    "ai": Role.ASSISTANT,
    "tool": Role.TOOL,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class Converted:
    """A LangChain conversation and its chatcli form (`messages[i]` came from `originals[i]`)."""

    originals: tuple[BaseMessage, ...]
    messages: tuple[Message, ...]

    def back(self, view: Sequence[Message]) -> list[BaseMessage]:
        """The LangChain messages of a working view made from `messages` (see the module)."""
        return [self._one(message) for message in view]

    def _one(self, message: Message) -> BaseMessage:
        index = (message.provider_details or {}).get(ORIGIN)
        if not isinstance(index, int) or not 0 <= index < len(self.originals):
            return from_chatcli(message)
        if message == self.messages[index]:
            return self.originals[index]
        return _edited(self.originals[index], message)


def to_chatcli(messages: Sequence[BaseMessage]) -> Converted:
    """`messages` as chatcli messages, each tagged with its position (see `Converted`)."""
    converted = tuple(message_to_chatcli(m, index=i) for i, m in enumerate(messages))
    return Converted(originals=tuple(messages), messages=converted)


def message_to_chatcli(message: BaseMessage, *, index: int | None = None) -> Message:
    """One LangChain message as a chatcli message; `index` tags where it came from. A message
    type chatcli has no role for (a `ChatMessage` with another role) is user text."""
    details = None if index is None else {ORIGIN: index}
    role = _ROLES.get(message.type, Role.USER)
    if isinstance(message, ToolMessage):
        result = ToolResult(
            call_id=message.tool_call_id, content=message.text, is_error=message.status == "error"
        )
        return Message(role=Role.TOOL, tool_result=result, provider_details=details)
    if role is Role.TOOL:  # a tool-typed message that is not a ToolMessage has no call id
        role = Role.USER
    parts = (TextPart(text=message.text),) if message.text else ()
    calls = _calls(message) if isinstance(message, AIMessage) else ()
    return Message(role=role, parts=parts, tool_calls=calls, provider_details=details)


def from_chatcli(message: Message) -> BaseMessage:
    """A new LangChain message for a chatcli message (one recovery made, with no original).
    Incomplete tool calls are left out: they must never run."""
    if message.role is Role.SYSTEM:
        return SystemMessage(content=message.text)
    if message.role is Role.USER:
        return HumanMessage(content=message.text)
    if message.tool_result is not None:
        result = message.tool_result
        status = "error" if result.is_error else "success"
        return ToolMessage(content=result.content, tool_call_id=result.call_id, status=status)
    return AIMessage(content=message.text, tool_calls=_langchain_calls(message))


def answer_to_chatcli(answer: AIMessage) -> Response:
    """A model's answer as chatcli's `Response`: message, stop reason and usage."""
    message = message_to_chatcli(answer)
    return Response(
        message=message,
        stop_reason=_stop_reason(answer, has_calls=bool(message.tool_calls)),
        usage=_usage(answer.usage_metadata),
    )


def replace_answer(answer: AIMessage, message: Message, **updates: Any) -> AIMessage:
    """`answer` with the text and tool calls of chatcli's `message` (a stitched or trimmed
    answer); `updates` are further fields to set."""
    return _edited(answer, message, **updates)


# -- details ----------------------------------------------------------------------------------


def _calls(message: AIMessage) -> tuple[ToolCall, ...]:
    complete = (
        ToolCall(id=call["id"] or "", name=call["name"], arguments=call["args"])
        for call in message.tool_calls
    )
    cut = (
        ToolCall(id=call["id"] or "", name=call["name"] or "", incomplete=True)
        for call in message.invalid_tool_calls
    )
    return (*complete, *cut)


def _langchain_calls(message: Message) -> list[LangChainToolCall]:
    return [
        LangChainToolCall(name=call.name, args=dict(call.arguments), id=call.id, type="tool_call")
        for call in message.tool_calls
        if not call.incomplete
    ]


def _edited(original: _M, message: Message, **updates: Any) -> _M:
    """A copy of `original` with the text (and an assistant's tool calls) of `message`."""
    content = _with_text(original.content, message.text)
    fields: dict[str, Any] = {"content": content, **updates}
    if isinstance(original, AIMessage):
        calls = _langchain_calls(message)
        fields["tool_calls"], fields["invalid_tool_calls"] = calls, []  # cut calls never go on
        if isinstance(content, list):
            kept = {call["id"] for call in calls}
            fields["content"] = [b for b in content if _call_id(b) in kept or _call_id(b) is None]
        # The raw calls of the wire answer: OpenAI's converter sends them when `tool_calls` is
        # empty, so a dropped (cut) call would come back from here.
        extra = dict(original.additional_kwargs)
        extra.pop("tool_calls", None)
        extra.pop("function_call", None)
        fields["additional_kwargs"] = extra
    return original.model_copy(update=fields)


def _call_id(block: str | dict[str, Any]) -> str | None:
    """The call id of a content block that holds a tool call (Anthropic `tool_use`, the
    Responses API's `function_call`, LangChain's standard `tool_call`), else None."""
    if isinstance(block, str) or block.get("type") not in _CALL_BLOCKS:
        return None
    return str(block.get("call_id") or block.get("id") or "")


def _with_text(content: str | list[str | dict[str, Any]], text: str) -> Any:
    """`content` with its text replaced by `text`: a string stays a string; in a list of
    blocks the text blocks become one, where the first was, and other blocks are kept."""
    if isinstance(content, str):
        return text
    blocks: list[str | dict[str, Any]] = []
    placed = False
    for block in content:
        if isinstance(block, str) or block.get("type") == "text":
            if not placed and text:
                blocks.append({"type": "text", "text": text})
            placed = True
        else:
            blocks.append(block)
    if not placed and text:
        blocks.insert(0, {"type": "text", "text": text})
    return blocks


def _stop_reason(answer: AIMessage, *, has_calls: bool) -> StopReason:
    metadata = answer.response_metadata
    incomplete = metadata.get("incomplete_details")
    raw = incomplete.get("reason") if isinstance(incomplete, Mapping) else None
    raw = raw or next((metadata[k] for k in _STOP_KEYS if metadata.get(k)), None)
    if not isinstance(raw, str):
        return StopReason.TOOL_USE if has_calls else StopReason.END_TURN
    if is_context_window_stop(raw.lower()):
        return StopReason.CONTEXT_WINDOW
    return _STOPS.get(raw.lower(), StopReason.OTHER)


def _usage(usage: Mapping[str, Any] | None) -> Usage:
    """LangChain's `usage_metadata` (its input_tokens include cache reads and writes; chatcli's
    do not)."""
    if not usage:
        return Usage()
    details = usage.get("input_token_details") or {}
    read, write = details.get("cache_read") or 0, details.get("cache_creation") or 0
    reasoning = (usage.get("output_token_details") or {}).get("reasoning") or 0
    return Usage(
        input_tokens=max(0, usage.get("input_tokens", 0) - read - write),
        output_tokens=usage.get("output_tokens", 0),
        cache_read_tokens=read,
        cache_write_tokens=write,
        reasoning_tokens=reasoning,
    )

"""The OpenAI Chat Completions dialect: `POST /v1/chat/completions`, whole and streamed.

Shapes follow openai-python's own types (`ChatCompletion`, `ChatCompletionChunk`) and the
error envelope the API returns (`{"error": {"message", "type", "param", "code"}}`).
Message content other than text (images, audio) is not part of the neutral view, so a
cross-dialect upstream does not get it; a same-dialect upstream gets the message verbatim
whenever recovery left it whole (`chatcli.wire.forwarding`).
"""

from __future__ import annotations

import json
import time
import uuid
from collections.abc import AsyncIterator, Mapping
from typing import Any, TypeGuard

from chatcli.messages import Message, Role, StopReason, TextPart
from chatcli.providers.base import TextDelta, ToolSpec
from chatcli.providers.openai import parse_tool_call
from chatcli.recovery import Reply
from chatcli.wire.dialect import (
    ClientRequest,
    Failure,
    FailureKind,
    Json,
    RequestError,
    checked,
    split_fields,
    sse,
    sse_comment,
    text_of,
)
from chatcli.wire.items import EventItem, FinalReply, StreamItem, ToolCallDelta
from chatcli.wire.known import Known, KnownConversations
from chatcli.wire.schemas import ChatCompletionsRequest
from chatcli.wire.usage import answer_usage

__all__ = ["HANDLED", "SETTINGS", "OpenAIDialect"]

HANDLED = frozenset(
    {
        "model",
        "messages",
        "max_tokens",
        "max_completion_tokens",
        "tools",
        "stream",
        "stream_options",
    }
)
# Request field -> neutral setting (the names of `chatcli.Settings`).
SETTINGS: Mapping[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "stop": "stop",
    "seed": "seed",
    "tool_choice": "tool_choice",
    "parallel_tool_calls": "parallel_tool_calls",
    "response_format": "response_format",
    "reasoning_effort": "reasoning_effort",
}
FINISH_REASONS: Mapping[StopReason, str] = {
    StopReason.END_TURN: "stop",
    StopReason.STOP_SEQUENCE: "stop",
    StopReason.MAX_TOKENS: "length",
    StopReason.CONTEXT_WINDOW: "length",
    StopReason.TOOL_USE: "tool_calls",
    StopReason.REFUSAL: "content_filter",
    StopReason.OTHER: "stop",
    StopReason.COMPACTION: "stop",
}
_ERROR_TYPES: Mapping[FailureKind, tuple[str, str | None]] = {
    FailureKind.OVERFLOW: ("invalid_request_error", "context_length_exceeded"),
    FailureKind.INVALID: ("invalid_request_error", None),
    FailureKind.AUTH: ("invalid_request_error", "invalid_api_key"),
    FailureKind.PERMISSION: ("invalid_request_error", None),
    FailureKind.NOT_FOUND: ("invalid_request_error", None),
    FailureKind.TOO_LARGE: ("invalid_request_error", None),
    FailureKind.RATE_LIMIT: ("requests", "rate_limit_exceeded"),
    FailureKind.UPSTREAM: ("server_error", None),
    FailureKind.OVERLOADED: ("server_error", None),
}


class OpenAIDialect:
    """Chat Completions in and out (see the module docstring). `known`: the conversations
    parsed lately, whose messages a request that repeats them gets back as they were
    parsed (`chatcli.wire.known`); None: every request is parsed whole."""

    name = "openai"

    def __init__(self, *, known: KnownConversations | None = None) -> None:
        self.known = known

    def parse(self, body: Json) -> ClientRequest:
        raw = body.get("messages")
        known = self.known.find(raw) if self.known is not None and _listed(raw) else Known()
        checked(ChatCompletionsRequest, body, passed=known.count)
        if not _listed(raw):
            raise RequestError("messages must be a non-empty list", param="messages")
        new = enumerate(raw[known.count :], known.count)
        parsed = (*known.parsed, *((_message(m, i),) for i, m in new))
        if self.known is not None:
            self.known.keep(known, raw, parsed)
        messages = tuple(message for (message,) in parsed)
        options = body.get("stream_options") or {}
        return ClientRequest(
            dialect=self.name,
            model=body.get("model"),
            messages=messages,
            origins=tuple(range(len(messages))),
            raw_messages=tuple(raw),
            max_tokens=_max_tokens(body),
            tools=tuple(_tool(t) for t in body.get("tools") or ()),
            raw_tools=body.get("tools"),
            stream=bool(body.get("stream")),
            include_usage=bool(isinstance(options, dict) and options.get("include_usage")),
            **split_fields(body, HANDLED, SETTINGS),
        )

    def reply(self, request: ClientRequest, reply: Reply, *, model: str) -> Json:
        message = reply.message
        wire: Json = {"role": "assistant", "content": message.text or None, "refusal": None}
        if message.tool_calls:
            wire["tool_calls"] = [
                {"id": c.id, "type": "function", "function": _function(c.name, c.arguments_json)}
                for c in message.tool_calls
            ]
        choice = {
            "index": 0,
            "message": wire,
            "finish_reason": FINISH_REASONS[reply.stop_reason],
            "logprobs": None,
        }
        return {**_envelope("chat.completion", model), "choices": [choice], "usage": _usage(reply)}

    async def stream(
        self,
        request: ClientRequest,
        items: AsyncIterator[StreamItem],
        *,
        model: str,
    ) -> AsyncIterator[bytes]:
        """The answer's chunks."""
        head = _envelope("chat.completion.chunk", model)

        def chunk(delta: Json, finish: str | None = None) -> bytes:
            choice = {"index": 0, "delta": delta, "finish_reason": finish, "logprobs": None}
            return sse({**head, "choices": [choice]})

        yield chunk({"role": "assistant", "content": ""})
        async for item in items:
            if isinstance(item, TextDelta):
                yield chunk({"content": item.text})
            elif isinstance(item, ToolCallDelta):
                call = {"index": item.index, "id": item.id, "type": "function"}
                yield chunk(
                    {"tool_calls": [{**call, "function": _function(item.name, item.arguments)}]}
                )
            elif isinstance(item, EventItem):
                yield sse_comment(f"chatcli: {item.event.describe()}")
            elif isinstance(item, FinalReply):
                yield chunk({}, FINISH_REASONS[item.reply.stop_reason])
                if request.include_usage:
                    yield sse({**head, "choices": [], "usage": _usage(item.reply)})
        yield sse("[DONE]")

    def stream_error(self, failure: Failure) -> bytes:
        """An error after the stream began: a data event carrying the error envelope (the
        SDK raises it as an APIError)."""
        return sse(self.error(failure))

    def error(self, failure: Failure) -> Json:
        kind, code = _ERROR_TYPES[failure.kind]
        message = failure.message
        if failure.kind is FailureKind.OVERFLOW:
            message = _overflow_message(failure)
        param = failure.param or ("messages" if failure.kind is FailureKind.OVERFLOW else None)
        return {"error": {"message": message, "type": kind, "param": param, "code": code}}


def _overflow_message(failure: Failure) -> str:
    """OpenAI's own wording, with the numbers when known (clients parse it)."""
    if failure.limit and failure.prompt_tokens:
        return (
            f"This model's maximum context length is {failure.limit} tokens. However, your "
            f"messages resulted in {failure.prompt_tokens} tokens. Please reduce the length of "
            f"the messages. (chatcli: {failure.message})"
        )
    return f"The conversation does not fit the model's context window. ({failure.message})"


def _envelope(kind: str, model: str) -> Json:
    return {
        "id": f"chatcmpl-{uuid.uuid4().hex}",
        "object": kind,
        "created": int(time.time()),
        "model": model,
        "system_fingerprint": None,
    }


def _function(name: str, arguments: str) -> Json:
    return {"name": name, "arguments": arguments}


def _usage(reply: Reply) -> Json:
    usage = answer_usage(reply)
    prompt = usage.prompt_tokens
    out: Json = {
        "prompt_tokens": prompt,
        "completion_tokens": usage.output_tokens,
        "total_tokens": prompt + usage.output_tokens,
    }
    if usage.cache_read_tokens:
        out["prompt_tokens_details"] = {"cached_tokens": usage.cache_read_tokens}
    if usage.reasoning_tokens:
        out["completion_tokens_details"] = {"reasoning_tokens": usage.reasoning_tokens}
    return out


def _listed(raw: Any) -> TypeGuard[list[Any]]:
    """A non-empty list (of messages)."""
    return isinstance(raw, list) and bool(raw)


def _max_tokens(body: Mapping[str, Any]) -> int | None:
    value = body.get("max_completion_tokens", body.get("max_tokens"))
    if value is None:
        return None
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(
            f"max_tokens must be a positive integer, not {value!r}", param="max_tokens"
        )
    return value


def _tool(tool: Any) -> ToolSpec:
    function = tool.get("function") if isinstance(tool, dict) else None
    if not isinstance(function, dict) or not function.get("name"):
        raise RequestError("each tool needs a function with a name", param="tools")
    return ToolSpec(
        name=function["name"],
        description=function.get("description") or "",
        parameters=function.get("parameters") or {},
    )


def _message(raw: Any, index: int) -> Message:
    if not isinstance(raw, dict):
        raise RequestError(f"messages[{index}] must be an object", param=f"messages[{index}]")
    role = raw.get("role")
    if role in ("system", "developer"):
        return Message.system(text_of(raw.get("content")))
    if role == "user":
        return Message.user(text_of(raw.get("content")))
    if role == "tool":
        return Message.tool(str(raw.get("tool_call_id") or ""), text_of(raw.get("content")))
    if role == "assistant":
        text = text_of(raw.get("content")) or (raw.get("refusal") or "")
        calls = tuple(_tool_call(c) for c in raw.get("tool_calls") or ())
        parts = (TextPart(text=text),) if text else ()
        return Message(role=Role.ASSISTANT, parts=parts, tool_calls=calls)
    raise RequestError(f"messages[{index}].role {role!r} is not supported", param="messages")


def _tool_call(raw: Any) -> Any:
    function = raw.get("function") or {}
    arguments = function.get("arguments") or ""
    if not isinstance(arguments, str):
        arguments = json.dumps(arguments)
    return parse_tool_call(str(raw.get("id") or ""), str(function.get("name") or ""), arguments)

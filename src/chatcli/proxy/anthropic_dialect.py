"""The Anthropic Messages dialect: `POST /v1/messages` (whole and streamed) and
`POST /v1/messages/count_tokens`.

Shapes follow anthropic-sdk-python's types (`Message`, the `message_start` ...
`message_stop` stream events) and the API's error envelope
(`{"type": "error", "error": {"type", "message"}}`). An overflow recovery cannot fix is a 400
`invalid_request_error` "prompt is too long: N tokens > M maximum", Anthropic's own wording,
which Claude Code recognises (it then compacts on its own side).

One user turn may hold several tool results and text: each becomes its own neutral message,
in order, all with the turn's index as origin. Thinking blocks (with their signatures) ride
on the assistant message's `provider_details`, as the Anthropic adapter keeps them.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from chatcli.messages import Message, StopReason
from chatcli.providers.anthropic import response_from_message
from chatcli.providers.base import TextDelta, ToolSpec
from chatcli.proxy.dialect import (
    ClientRequest,
    Failure,
    FailureKind,
    Json,
    RequestError,
    split_fields,
    sse,
    sse_comment,
    text_of,
)
from chatcli.proxy.items import EventItem, FinalReply, StreamItem, ToolCallDelta
from chatcli.recovery import Reply

__all__ = ["HANDLED", "SETTINGS", "AnthropicDialect"]

HANDLED = frozenset({"model", "messages", "system", "max_tokens", "tools", "stream"})
# Request field -> neutral setting (the names of `chatcli.Settings`).
SETTINGS: Mapping[str, str] = {
    "temperature": "temperature",
    "top_p": "top_p",
    "stop_sequences": "stop",
    "tool_choice": "tool_choice",
    "thinking": "thinking_budget",
}
STOP_REASONS: Mapping[StopReason, str] = {
    StopReason.END_TURN: "end_turn",
    StopReason.STOP_SEQUENCE: "stop_sequence",
    StopReason.MAX_TOKENS: "max_tokens",
    StopReason.CONTEXT_WINDOW: "model_context_window_exceeded",
    StopReason.TOOL_USE: "tool_use",
    StopReason.REFUSAL: "refusal",
    StopReason.OTHER: "end_turn",
}
_ERROR_TYPES: Mapping[FailureKind, str] = {
    FailureKind.OVERFLOW: "invalid_request_error",
    FailureKind.INVALID: "invalid_request_error",
    FailureKind.AUTH: "authentication_error",
    FailureKind.PERMISSION: "permission_error",
    FailureKind.NOT_FOUND: "not_found_error",
    FailureKind.TOO_LARGE: "request_too_large",
    FailureKind.RATE_LIMIT: "rate_limit_error",
    FailureKind.UPSTREAM: "api_error",
    FailureKind.OVERLOADED: "overloaded_error",
}


class AnthropicDialect:
    """Messages in and out (see the module docstring)."""

    name = "anthropic"

    def parse(self, body: Json) -> ClientRequest:
        raw = body.get("messages")
        if not isinstance(raw, list) or not raw:
            raise RequestError("messages: must be a non-empty list")
        system = tuple(_system(body.get("system")))
        turns = [(i, m) for i, turn in enumerate(raw) for m in _turn(turn, i)]
        return ClientRequest(
            dialect=self.name,
            model=body.get("model"),
            messages=system + tuple(m for _, m in turns),
            origins=(None,) * len(system) + tuple(i for i, _ in turns),
            raw_messages=tuple(raw),
            raw_system=body.get("system"),
            max_tokens=_max_tokens(body.get("max_tokens")),
            tools=tuple(_tool(t) for t in body.get("tools") or () if "input_schema" in t),
            raw_tools=body.get("tools"),
            stream=bool(body.get("stream")),
            **split_fields(body, HANDLED, SETTINGS),
        )

    def reply(self, request: ClientRequest, reply: Reply, *, model: str) -> Json:
        return {
            **_message_head(model, reply),
            "content": list(_content(reply.message)),
            "stop_reason": STOP_REASONS[reply.stop_reason],
            "stop_sequence": None,
        }

    async def stream(
        self, request: ClientRequest, items: AsyncIterator[StreamItem], *, model: str
    ) -> AsyncIterator[bytes]:
        head = {**_message_head(model, None), "content": [], "stop_reason": None}
        yield sse(
            {"type": "message_start", "message": {**head, "stop_sequence": None}}, "message_start"
        )
        index = -1  # the open content block, -1: none
        text_open = False
        async for item in items:
            if isinstance(item, TextDelta):
                if not text_open:
                    index, text_open = index + 1, True
                    yield _block_start(index, {"type": "text", "text": ""})
                yield _block_delta(index, {"type": "text_delta", "text": item.text})
            elif isinstance(item, ToolCallDelta):
                if index >= 0:
                    yield _block_stop(index)
                index, text_open = index + 1, False
                yield _block_start(
                    index, {"type": "tool_use", "id": item.id, "name": item.name, "input": {}}
                )
                yield _block_delta(
                    index, {"type": "input_json_delta", "partial_json": item.arguments}
                )
            elif isinstance(item, EventItem):
                yield sse_comment(f"chatcli: {item.event.describe()}")
            elif isinstance(item, FinalReply):
                if index >= 0:
                    yield _block_stop(index)
                delta = {"stop_reason": STOP_REASONS[item.reply.stop_reason], "stop_sequence": None}
                usage = _usage(item.reply)
                yield sse(
                    {"type": "message_delta", "delta": delta, "usage": usage}, "message_delta"
                )
        yield sse({"type": "message_stop"}, "message_stop")

    def stream_error(self, failure: Failure) -> bytes:
        """An error after the stream began: the API's own `error` event."""
        return sse(self.error(failure), "error")

    def error(self, failure: Failure) -> Json:
        message = failure.message
        if failure.kind is FailureKind.OVERFLOW:
            message = _overflow_message(failure)
        return {"type": "error", "error": {"type": _ERROR_TYPES[failure.kind], "message": message}}


def _overflow_message(failure: Failure) -> str:
    if failure.limit and failure.prompt_tokens:
        return f"prompt is too long: {failure.prompt_tokens} tokens > {failure.limit} maximum"
    return f"prompt is too long ({failure.message})"


def _block_start(index: int, block: Json) -> bytes:
    return sse(
        {"type": "content_block_start", "index": index, "content_block": block},
        "content_block_start",
    )


def _block_delta(index: int, delta: Json) -> bytes:
    return sse(
        {"type": "content_block_delta", "index": index, "delta": delta}, "content_block_delta"
    )


def _block_stop(index: int) -> bytes:
    return sse({"type": "content_block_stop", "index": index}, "content_block_stop")


def _message_head(model: str, reply: Reply | None) -> Json:
    usage = _usage(reply) if reply is not None else {"input_tokens": 0, "output_tokens": 0}
    return {
        "id": f"msg_{uuid.uuid4().hex[:24]}",
        "type": "message",
        "role": "assistant",
        "model": model,
        "usage": usage,
    }


def _usage(reply: Reply) -> Json:
    usage = reply.usage
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    }


def _content(message: Message) -> Iterator[Json]:
    details = (message.provider_details or {}).get("anthropic") or {}
    yield from details.get("thinking") or ()
    if message.text:
        yield {"type": "text", "text": message.text}
    for call in message.tool_calls:
        yield {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}


def _max_tokens(value: Any) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or value < 1:
        raise RequestError(f"max_tokens: must be a positive integer, not {value!r}")
    return value


def _tool(tool: Mapping[str, Any]) -> ToolSpec:
    if not tool.get("name"):
        raise RequestError("tools: each tool needs a name")
    return ToolSpec(
        name=tool["name"],
        description=tool.get("description") or "",
        parameters=tool.get("input_schema") or {},
    )


def _system(system: Any) -> Iterator[Message]:
    if isinstance(system, str):
        if system:
            yield Message.system(system)
    elif isinstance(system, list):
        for block in system:
            if text := text_of([block]):
                yield Message.system(text)
    elif system is not None:
        raise RequestError("system: must be a string or a list of text blocks")


def _turn(raw: Any, index: int) -> Iterator[Message]:
    if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant"):
        raise RequestError(f"messages.{index}: needs role user or assistant")
    content = raw.get("content")
    if raw["role"] == "assistant":
        blocks = [{"type": "text", "text": content}] if isinstance(content, str) else content
        yield response_from_message({"content": blocks or []}).message
        return
    if isinstance(content, str):
        yield Message.user(content)
        return
    # Every turn gives at least one message (one of images only gives an empty user message),
    # so a turn recovery keeps is forwarded, verbatim, to an upstream of this dialect.
    text: list[str] = []
    results = 0
    for block in content or ():
        if block.get("type") == "tool_result":
            if text:
                yield Message.user("".join(text))
                text = []
            results += 1
            result = text_of(block.get("content"))
            yield Message.tool(
                str(block.get("tool_use_id") or ""), result, bool(block.get("is_error"))
            )
        elif block.get("type") == "text":
            text.append(block.get("text") or "")
    if text or not results:
        yield Message.user("".join(text))

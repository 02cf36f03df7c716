"""The Anthropic Messages dialect: `POST /v1/messages` (whole and streamed) and
`POST /v1/messages/count_tokens`.

Shapes follow anthropic-sdk-python's types (`Message`, the `message_start` ...
`message_stop` stream events) and the API's error envelope
(`{"type": "error", "error": {"type", "message"}}`). An overflow recovery cannot fix is a 400
`invalid_request_error` "prompt is too long: N tokens > M maximum", Anthropic's own wording,
which Claude Code recognises (it then compacts on its own side).

A system turn among the messages (Claude Code puts its environment in one) is a system
message where it stands. One user turn may hold several tool results and text: each becomes
its own neutral message, in order, all with the turn's index as origin. Thinking blocks
(with their signatures) ride on the assistant message's `provider_details`, as the
Anthropic adapter keeps them. A `compaction` block the proxy made (`ClientRequest.leading`,
`chatcli.proxy.compaction`) begins the answer; the upstream's own comes where the upstream
put it (`CompactionDelta`), every field as it came (signature, `encrypted_content`, tool
changes), and an answer that paused after it (`pause_after_compaction`) keeps its
`stop_reason` "compaction". Streamed, a compaction block is written as the API streams one
and the SDKs fold it: started with its content null, its `content` and `encrypted_content`
in one `compaction_delta` (`BetaCompactionContentBlockDelta`), stopped.
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator, Mapping
from typing import Any

from chatcli.messages import Message, StopReason
from chatcli.providers.anthropic import response_from_message
from chatcli.providers.anthropic_compaction import compaction_block, part_block
from chatcli.providers.base import TextDelta, ToolSpec
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
from chatcli.wire.items import (
    CompactionDelta,
    EventItem,
    ReasoningDelta,
    ReasoningItem,
    StreamItem,
    ToolCallDelta,
)
from chatcli.wire.schemas import MessagesRequest
from chatcli.wire.usage import answer_usage

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
    StopReason.COMPACTION: "compaction",
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
        checked(MessagesRequest, body)
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
            # `request` is read for its leading blocks only (callers without one pass None)
            "content": [*getattr(request, "leading", ()), *_content(reply.message)],
            "stop_reason": STOP_REASONS[reply.stop_reason],
            "stop_sequence": None,
        }

    async def stream(
        self, request: ClientRequest, items: AsyncIterator[StreamItem], *, model: str
    ) -> AsyncIterator[bytes]:
        head = {**_message_head(model, None), "content": [], "stop_reason": None}
        start = {"type": "message_start", "message": {**head, "stop_sequence": None}}
        yield sse(start, "message_start")
        blocks = _Blocks()
        for block in request.leading:
            for chunk in blocks.compaction(block):
                yield chunk
        async for item in items:
            for chunk in blocks.events(item):
                yield chunk
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
        numbers = f"{failure.prompt_tokens} tokens > {failure.limit} maximum"
        return f"prompt is too long: {numbers} (chatcli: {failure.message})"
    return f"prompt is too long ({failure.message})"


class _Blocks:
    """The content blocks of a streamed message: which one is open, and the events of each
    item (a block is started, written to, and stopped before the next one starts)."""

    def __init__(self) -> None:
        self.index = -1
        self.open: str | None = None

    def events(self, item: StreamItem) -> list[bytes]:
        if isinstance(item, TextDelta):
            out = [] if self.open == "text" else self.start("text", {"type": "text", "text": ""})
            return [*out, _block_delta(self.index, {"type": "text_delta", "text": item.text})]
        if isinstance(item, ToolCallDelta):
            block = {"type": "tool_use", "id": item.id, "name": item.name, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": item.arguments}
            return [*self.start("tool_use", block), _block_delta(self.index, delta)]
        if isinstance(item, ReasoningDelta):
            return self.reasoning(item)
        if isinstance(item, ReasoningItem):
            thinking = (item.details.get("anthropic") or {}).get("thinking") or ()
            return [event for block in thinking for event in self.thinking(block)]
        if isinstance(item, EventItem):
            return [sse_comment(f"chatcli: {item.event.describe()}")]
        if isinstance(item, CompactionDelta):
            return [event for block in part_block(item.part) for event in self.compaction(block)]
        stop = {"stop_reason": STOP_REASONS[item.reply.stop_reason], "stop_sequence": None}
        ending: Json = {"type": "message_delta", "delta": stop, "usage": _usage(item.reply)}
        return [*self.close(), sse(ending, "message_delta")]

    def compaction(self, block: Mapping[str, Any]) -> list[bytes]:
        """A `compaction` block as the API streams it (module docstring): every other field
        of the block in its start."""
        delta: Json = {"type": "compaction_delta", "content": block.get("content")}
        if "encrypted_content" in block:
            delta["encrypted_content"] = block["encrypted_content"]
        opened = {k: v for k, v in block.items() if k not in ("content", "encrypted_content")}
        start = self.start("compaction", {**opened, "content": None})
        return [*start, _block_delta(self.index, delta), *self.close()]

    def reasoning(self, item: ReasoningDelta) -> list[bytes]:
        """A piece of a thinking block as the upstream streamed it: its start opens a block
        (a redacted one whole), its text and signature are that block's deltas."""
        if item.block is not None:
            return self.start(str(item.block.get("type")), dict(item.block))
        if item.thinking:
            return [_block_delta(self.index, {"type": "thinking_delta", "thinking": item.thinking})]
        if item.signature:
            delta = {"type": "signature_delta", "signature": item.signature}
            return [_block_delta(self.index, delta)]
        return []

    def thinking(self, block: Mapping[str, Any]) -> list[bytes]:
        """A thinking block as the API streams it (a redacted one whole, in its start)."""
        if block.get("type") != "thinking":
            return self.start("redacted_thinking", dict(block))
        text = {"type": "thinking_delta", "thinking": block.get("thinking", "")}
        signature = {"type": "signature_delta", "signature": block.get("signature", "")}
        start = self.start("thinking", {"type": "thinking", "thinking": ""})
        return [*start, _block_delta(self.index, text), _block_delta(self.index, signature)]

    def start(self, kind: str, block: Json) -> list[bytes]:
        out = self.close()
        self.index += 1
        self.open = kind
        return [*out, _block_start(self.index, block)]

    def close(self) -> list[bytes]:
        if self.open is None:
            return []
        self.open = None
        return [_block_stop(self.index)]


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
    usage = answer_usage(reply)
    return {
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_creation_input_tokens": usage.cache_write_tokens,
        "cache_read_input_tokens": usage.cache_read_tokens,
    }


def _content(message: Message) -> Iterator[Json]:
    yield from compaction_block(message)  # the upstream's own, first as the API puts it
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
    if not isinstance(raw, dict) or raw.get("role") not in ("user", "assistant", "system"):
        raise RequestError(f"messages.{index}: needs role user, assistant or system")
    content = raw.get("content")
    if raw["role"] == "system":  # an instruction between turns (Claude Code sends them)
        yield Message.system(content if isinstance(content, str) else text_of(content))
        return
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

"""Adapter for Anthropic's Messages API, through the official `anthropic` SDK.

Install with `pip install 'chatcli[anthropic]'`; the SDK is imported when a provider is built.

Mapping (neutral -> wire):
- system messages, wherever they are, are lifted in order into the `system` parameter;
- a tool result becomes a `tool_result` block inside a USER message (`is_error` kept);
  consecutive messages of the same role are merged into one, because the API wants the roles
  to alternate, and in a merged user message the `tool_result` blocks go first (the API
  rejects text before them);
- assistant tool calls become `tool_use` blocks; `thinking` / `redacted_thinking` blocks of an
  answer ride in `Message.provider_details["anthropic"]["thinking"]` and are sent back first
  in that assistant message, byte for byte (the API checks their signatures);
- empty text is not sent (the API rejects empty text blocks) and a message left with no
  content at all is dropped.

Mapping (wire -> neutral): stop reasons per `STOP_REASONS`; `model_context_window_exceeded`
is `StopReason.CONTEXT_WINDOW`, which the Client treats as an overflow. Usage keeps cache reads
and writes apart from `input_tokens`, as Anthropic reports them. A `tool_use` that the output
limit cut off (the last block of a `max_tokens` answer, or streamed JSON that does not parse)
is a `ToolCall` with `incomplete=True`.

Errors are classified once, here. SDK-level retries are off: the Client retries classified
errors itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from typing import Any

from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, Usage
from chatcli.providers._common import (
    api_key_from_env,
    incomplete_answer,
    model_limits,
    raise_classified,
    require_module,
)
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta, ToolSpec

__all__ = [
    "DEFAULT_MAX_TOKENS",
    "STOP_REASONS",
    "Anthropic",
    "StreamFold",
    "request_params",
    "response_from_message",
    "usage_from_wire",
    "wire_messages",
]

DEFAULT_MAX_TOKENS = 4096  # the API requires max_tokens; used when neither request nor model say

STOP_REASONS: Mapping[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "max_tokens": StopReason.MAX_TOKENS,
    "tool_use": StopReason.TOOL_USE,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "refusal": StopReason.REFUSAL,
    "model_context_window_exceeded": StopReason.CONTEXT_WINDOW,
}

_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
_KEY_ENV = ("ANTHROPIC_API_KEY",)


class Anthropic:
    """A model behind the Anthropic Messages API (a `StreamingProvider`).

    `api_key` defaults to `$ANTHROPIC_API_KEY` (or `environ`'s); it only reaches the SDK
    client and is never shown or logged. `base_url` points the SDK elsewhere (a proxy, a test
    server).
    `context_window` and `max_output_tokens` are the model's limits when known;
    `max_output_tokens` is also the `max_tokens` sent when a request sets none.
    """

    def __init__(
        self,
        model: str,
        api_key: str | None = None,
        base_url: str | None = None,
        *,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        timeout: float | None = None,
        environ: Mapping[str, str] | None = None,
    ) -> None:
        sdk = require_module("anthropic", "anthropic")
        key = api_key_from_env(
            api_key, _KEY_ENV, os.environ if environ is None else environ, required=True
        )
        options: dict[str, Any] = {"api_key": key, "base_url": base_url, "max_retries": 0}
        if timeout is not None:
            options["timeout"] = timeout
        self.model = model
        self.base_url = base_url
        self.context_window, self.max_output_tokens = model_limits(
            model, "anthropic", context_window, max_output_tokens
        )
        # A fresh SDK client per call: nothing stays open between calls (no pool to close, no
        # connection tied to a finished event loop). Lambdas keep the key out of reprs.
        self._connect: Callable[[], Any] = lambda: sdk.Anthropic(**options)
        self._aconnect: Callable[[], Any] = lambda: sdk.AsyncAnthropic(**options)

    def __repr__(self) -> str:
        return f"Anthropic(model={self.model!r}, base_url={self.base_url!r})"

    def _params(self, request: Request) -> dict[str, Any]:
        default = self.max_output_tokens or DEFAULT_MAX_TOKENS
        return request_params(request, model=self.model, default_max_tokens=default)

    def complete(self, request: Request) -> Response:
        params = self._params(request)
        if _needs_streaming(params):
            return _last(self.stream(request))
        with _translated_errors(), self._connect() as client:
            message = client.messages.create(**params)
        return response_from_message(_dump(message))

    async def acomplete(self, request: Request) -> Response:
        params = self._params(request)
        if _needs_streaming(params):
            chunks = [chunk async for chunk in self.astream(request)]
            return _last(iter(chunks))
        with _translated_errors():
            async with self._aconnect() as client:
                message = await client.messages.create(**params)
        return response_from_message(_dump(message))

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Anthropic's own count of the prompt `messages` make, system prompt included, from
        `messages.count_tokens`: exact, but a round trip (free, rate-limited); see
        `chatcli.providers.counting` for caching and the fallback to the estimate."""
        params = self._params(Request(messages=tuple(messages)))
        del params["max_tokens"]  # the one `create` argument that `count_tokens` does not take
        with _translated_errors(), self._connect() as client:
            counted = client.messages.count_tokens(**params)
        return int(counted.input_tokens)

    def stream(self, request: Request) -> Iterator[StreamChunk]:
        fold = StreamFold()
        with _translated_errors(), self._connect() as client:
            events = client.messages.create(**self._params(request), stream=True)
            with events:  # closes the connection when the caller stops early
                for event in events:
                    if text := fold.feed(_dump(event)):
                        yield TextDelta(text=text)
        yield fold.finish()

    async def astream(self, request: Request) -> AsyncIterator[StreamChunk]:
        fold = StreamFold()
        with _translated_errors():
            async with self._aconnect() as client:
                events = await client.messages.create(**self._params(request), stream=True)
                async with events:
                    async for event in events:
                        if text := fold.feed(_dump(event)):
                            yield TextDelta(text=text)
        yield fold.finish()


# The SDK refuses a non-streaming request it expects to take over 10 minutes (max_tokens above
# 128,000 * 600 / 3,600 when no timeout is set): such requests are streamed and folded instead,
# so escalating max_tokens to a model's real cap (64k for recent models) never hits that wall.
NONSTREAMING_MAX_TOKENS = 21_333


def _needs_streaming(params: Mapping[str, Any]) -> bool:
    return int(params["max_tokens"]) > NONSTREAMING_MAX_TOKENS


def _last(chunks: Iterator[StreamChunk]) -> Response:
    """The Response that ends a stream (the text deltas before it are folded into it)."""
    response = None
    for chunk in chunks:
        response = chunk
    assert isinstance(response, Response)  # a stream ends with exactly one Response
    return response


@contextmanager
def _translated_errors() -> Iterator[None]:
    """Turn SDK and transport failures into a classified ProviderError (chained)."""
    sdk = require_module("anthropic", "anthropic")
    http = require_module("httpx2", "anthropic")  # the SDK's transport: mid-stream drops
    try:
        yield
    except sdk.APIStatusError as exc:
        # An `error` event inside a stream arrives with the stream's 200: that is not the
        # error's status, so none is claimed.
        raise_classified(exc, status=None if exc.status_code == 200 else exc.status_code)
    except (sdk.APIError, http.HTTPError) as exc:
        raise_classified(exc)


def _dump(obj: Any) -> dict[str, Any]:
    """An SDK model as its wire JSON (fields the server left out are absent)."""
    data: dict[str, Any] = obj.model_dump(mode="json", exclude_none=True)
    return data


# -- neutral -> wire ----------------------------------------------------------------------


def request_params(request: Request, *, model: str, default_max_tokens: int) -> dict[str, Any]:
    """Keyword arguments for `messages.create`; `request.options` go into the body as-is."""
    system, messages = wire_messages(request.messages)
    params: dict[str, Any] = {
        "model": request.model or model,
        "max_tokens": request.max_tokens or default_max_tokens,
        "messages": messages,
    }
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = [_wire_tool(tool) for tool in request.tools]
    # Sent as extra body fields: the SDK's signature varies between versions (recent ones
    # have no `temperature` argument), the wire field does not.
    extra = dict(request.options)
    if request.temperature is not None:
        extra["temperature"] = request.temperature
    if extra:
        params["extra_body"] = extra
    return params


def wire_messages(
    messages: Sequence[Message],
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """(system blocks, messages) in the Messages API shape; see the module docstring."""
    system = [{"type": "text", "text": m.text} for m in messages if m.role is Role.SYSTEM]
    turns = [
        ("assistant" if m.role is Role.ASSISTANT else "user", _blocks(m))
        for m in messages
        if m.role is not Role.SYSTEM
    ]
    return [block for block in system if block["text"]], _merge_turns(turns)


def _blocks(message: Message) -> list[dict[str, Any]]:
    if message.tool_result is not None:
        result = message.tool_result
        block = {"type": "tool_result", "tool_use_id": result.call_id, "content": result.content}
        return [{**block, "is_error": True} if result.is_error else block]
    texts = [{"type": "text", "text": part.text} for part in message.parts if part.text]
    calls = [
        {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.arguments)}
        for call in message.tool_calls
    ]
    return [*_thinking_blocks(message), *texts, *calls]


def _thinking_blocks(message: Message) -> list[dict[str, Any]]:
    if message.role is not Role.ASSISTANT or not message.provider_details:
        return []
    details = message.provider_details.get("anthropic") or {}
    return [dict(block) for block in details.get("thinking", ())]


def _merge_turns(turns: Sequence[tuple[str, list[dict[str, Any]]]]) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for role, blocks in turns:
        if not blocks:
            continue
        if merged and merged[-1]["role"] == role:
            merged[-1]["content"].extend(blocks)
        else:
            merged.append({"role": role, "content": list(blocks)})
    for turn in merged:
        if turn["role"] == "user":  # tool results first; sorted() is stable
            turn["content"].sort(key=lambda block: block["type"] != "tool_result")
    return merged


def _wire_tool(tool: ToolSpec) -> dict[str, Any]:
    schema = dict(tool.parameters) or {"type": "object", "properties": {}}
    wire = {"name": tool.name, "input_schema": schema}
    return {**wire, "description": tool.description} if tool.description else wire


# -- wire -> neutral ----------------------------------------------------------------------


def response_from_message(
    message: Mapping[str, Any], *, unparsed: frozenset[int] = frozenset()
) -> Response:
    """A Messages API `message` object as a Response.

    `unparsed` holds the content indexes of `tool_use` blocks whose streamed JSON did not
    parse (their input is `{}`); those calls are incomplete, like the last block of an answer
    stopped at `max_tokens`.
    """
    blocks: list[Mapping[str, Any]] = message.get("content") or []
    stop = message.get("stop_reason")
    cut = {len(blocks) - 1} if stop == "max_tokens" else set()
    calls = tuple(
        _tool_call(block, incomplete=i in unparsed or i in cut)
        for i, block in enumerate(blocks)
        if block.get("type") == "tool_use"
    )
    parts = tuple(
        TextPart(text=block["text"])
        for block in blocks
        if block.get("type") == "text" and block.get("text")
    )
    thinking = [dict(block) for block in blocks if block.get("type") in _THINKING_TYPES]
    reply = Message(
        role=Role.ASSISTANT,
        parts=parts,
        tool_calls=calls,
        provider_details={"anthropic": {"thinking": thinking}} if thinking else None,
    )
    return Response(
        message=reply,
        stop_reason=STOP_REASONS.get(stop or "", StopReason.OTHER),
        usage=usage_from_wire(message.get("usage") or {}),
        model=message.get("model"),
        provider_details={"anthropic": _response_details(message)},
    )


def _tool_call(block: Mapping[str, Any], *, incomplete: bool) -> ToolCall:
    arguments = block.get("input")
    return ToolCall(
        id=block["id"],
        name=block["name"],
        arguments=arguments if isinstance(arguments, dict) else {},
        incomplete=incomplete,
    )


def _response_details(message: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("id", "stop_reason", "stop_sequence", "stop_details")
    return {key: message[key] for key in keys if message.get(key) is not None}


def usage_from_wire(usage: Mapping[str, Any]) -> Usage:
    """Anthropic usage; `output_tokens` already includes thinking tokens."""
    details = usage.get("output_tokens_details") or {}
    return Usage(
        input_tokens=usage.get("input_tokens") or 0,
        output_tokens=usage.get("output_tokens") or 0,
        cache_read_tokens=usage.get("cache_read_input_tokens") or 0,
        cache_write_tokens=usage.get("cache_creation_input_tokens") or 0,
        reasoning_tokens=details.get("thinking_tokens") or 0,
    )


# -- streaming ----------------------------------------------------------------------------


class StreamFold:
    """Folds raw stream events (wire JSON) into the final message, as the API documents them:
    message_start, content blocks (start, deltas, stop), message_delta, message_stop.

    `feed` returns the text an event adds (else ""); `finish` returns the Response, or raises
    a TRANSIENT ProviderError when the stream was empty or ended before `message_stop`.
    Unknown events and deltas are ignored, as the API asks.
    """

    def __init__(self) -> None:
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.stopped = False

    def feed(self, event: Mapping[str, Any]) -> str:
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(event.get("message") or {})
        elif kind == "content_block_start":
            self.blocks[event["index"]] = dict(event.get("content_block") or {})
        elif kind == "content_block_delta":
            return self._apply_delta(event["index"], event.get("delta") or {})
        elif kind == "message_delta":
            self._apply_message_delta(event)
        elif kind == "message_stop":
            self.stopped = True
        return ""

    def _apply_delta(self, index: int, delta: Mapping[str, Any]) -> str:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return str(delta["text"])
        if kind == "input_json_delta":
            self.json_parts.setdefault(index, []).append(delta.get("partial_json", ""))
        elif kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
        elif kind == "signature_delta":
            block["signature"] = delta["signature"]
        return ""

    def _apply_message_delta(self, event: Mapping[str, Any]) -> None:
        message = self.message if self.message is not None else {}
        self.message = message
        message.update(event.get("delta") or {})
        # usage in message_delta is cumulative: its counts replace those of message_start
        message["usage"] = {**(message.get("usage") or {}), **(event.get("usage") or {})}

    def finish(self) -> Response:
        if self.message is None:
            raise incomplete_answer("the Anthropic stream was empty")
        if not self.stopped:
            raise incomplete_answer("the Anthropic stream ended before message_stop")
        unparsed = frozenset(i for i in self.json_parts if not self._parse_input(i))
        content = [self.blocks[i] for i in sorted(self.blocks)]
        return response_from_message({**self.message, "content": content}, unparsed=unparsed)

    def _parse_input(self, index: int) -> bool:
        text = "".join(self.json_parts[index])
        try:
            self.blocks[index]["input"] = json.loads(text) if text else {}
        except json.JSONDecodeError:
            self.blocks[index]["input"] = {}
            return False
        return True

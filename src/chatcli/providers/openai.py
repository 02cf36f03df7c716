"""OpenAI adapter: Chat Completions (the default) and the Responses API, via the official SDK.

`OpenAI(model)` speaks Chat Completions; `OpenAI(model, api="responses")` speaks the Responses
API. Both share one driver (`OpenAIBase`): build the wire body, call the SDK, translate the
answer, translate SDK exceptions into `ProviderError` (classified once, here). The SDK client
is built with `max_retries=0` because chatcli's `Client` retries by itself, per error kind.

Mapping notes:

- Usage: OpenAI counts cache reads (and writes) inside `prompt_tokens`/`input_tokens`; chatcli's
  `Usage.input_tokens` is the uncached remainder, so `Usage.prompt_tokens` equals the reported
  prompt size. `output_tokens` includes the reasoning tokens; `reasoning_tokens` is that share.
- Tool calls: arguments travel as a JSON string. A string that does not parse to an object (cut
  off by the token limit, or malformed) gives `ToolCall.incomplete=True`, the raw text kept in
  `provider_details["raw_arguments"]`; such a call is sent back as `{}` and never executed.
- Opaque data (Responses API): reasoning items (with `encrypted_content` when requested through
  `Request.options`, e.g. `{"include": ["reasoning.encrypted_content"], "store": False}`) are
  kept verbatim in `Message.provider_details["openai_reasoning"]` and sent back, in front of the
  message's text and calls; message and function-call item ids ride on the parts and calls.
- Settings (`Request.settings`), both wires: temperature, top_p, tool_choice (a tool's name
  becomes a function choice), parallel_tool_calls, reasoning_effort (Responses:
  `reasoning.effort`), response_format ("json": a JSON object; a schema: `json_schema`, named
  after its title; Responses: `text.format`). Chat Completions also takes stop and seed. The
  Responses API has no stop sequences (an error) and no seed (dropped, logged: a best-effort
  hint). A thinking budget is an error: OpenAI takes reasoning_effort instead. The fields go
  in `extra_body` (every SDK version sends them), `settings.extra` on top.
- Prompt caching: `OpenAI` sends a `prompt_cache_key` derived from the conversation's stable
  beginning (`prompt_cache_key()`), unless the caller set one (in `settings.extra` or
  `options`) or built the adapter with `prompt_cache_key=False`.
- `Request.options` are passed to the SDK's `create` as they are, last (they win).
- A Chat Completions stream is read raw (`with_streaming_response`) and each event decoded
  with `json` into `_Fields`, not into the SDK's pydantic models: building a model per chunk
  was a large share of the CPU a streamed answer cost (the proxy's hot path). Requests,
  status errors and in-stream errors stay the SDK's. The proxy's fold of a whole stream
  (`OpenAIBase.folded`; `PassthroughFold`, a part at a time) reads the usual event cheaper
  still (`_StreamFolder`), to the same outcome.
- Tool results have no error flag on this wire; `ToolResult.is_error` is not sent.
"""

from __future__ import annotations

import asyncio
import hashlib
import itertools
import json
import json.scanner
import os
import re
import urllib.parse
import urllib.request
from collections.abc import AsyncIterator, Callable, Iterable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
    suppress,
)
from dataclasses import dataclass, field, replace
from types import ModuleType, SimpleNamespace
from typing import Any, Literal, Protocol

from chatcli.errors import ConfigError, ProviderError, classify_error
from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, Usage
from chatcli.providers._common import (
    api_key_from_env,
    drop_setting,
    incomplete_answer,
    model_limits,
    raise_classified,
    require_module,
    schema_name,
    tool_settings_apply,
    transport_errors,
    unsupported,
)
from chatcli.providers.adapter import Adapter
from chatcli.providers.base import (
    Request,
    Response,
    StreamDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from chatcli.redact import redact_url
from chatcli.request_settings import JSON_MODE, TOOL_CHOICE_MODES

__all__ = ["OpenAI", "OpenAIBase", "RawStream", "prompt_cache_key"]

Api = Literal["chat", "responses"]
Json = dict[str, Any]

# Chat Completions `finish_reason` values (openai-python types/chat/chat_completion.py).
_CHAT_STOP = {
    "stop": StopReason.END_TURN,
    "length": StopReason.MAX_TOKENS,
    "tool_calls": StopReason.TOOL_USE,
    "function_call": StopReason.TOOL_USE,
    "content_filter": StopReason.REFUSAL,
}
# Responses API `incomplete_details.reason` values (openai-python types/responses/response.py).
_INCOMPLETE_STOP = {
    "max_output_tokens": StopReason.MAX_TOKENS,
    "content_filter": StopReason.REFUSAL,
}
REASONING_KEY = "openai_reasoning"


def _sdk() -> ModuleType:
    return require_module("openai", "openai")


def _failure(body_or_message: object) -> ProviderError:
    """A failure reported inside a 200 answer (stream event, empty answer), classified once."""
    return ProviderError(classify_error(body_or_message))


# --- shared by both wires ----------------------------------------------------------------


def _count(obj: Any, name: str) -> int:
    # SDK objects are built without validation, so fields a server omits are simply absent.
    return int(getattr(obj, name, None) or 0)


def _usage(prompt: int, output: int, details: Any, out_details: Any) -> Usage:
    cached = _count(details, "cached_tokens")
    written = _count(details, "cache_write_tokens")
    return Usage(
        input_tokens=max(prompt - cached - written, 0),
        output_tokens=output,
        cache_read_tokens=cached,
        cache_write_tokens=written,
        reasoning_tokens=_count(out_details, "reasoning_tokens"),
    )


def parse_tool_call(
    call_id: str, name: str, raw: str, *, truncated: bool = False, details: Json | None = None
) -> ToolCall:
    """A ToolCall from wire arguments; unparseable (or empty when truncated) => incomplete."""
    try:
        arguments = json.loads(raw) if raw.strip() else ({} if not truncated else None)
    except json.JSONDecodeError:
        arguments = None
    if not isinstance(arguments, dict):
        kept = {**(details or {}), "raw_arguments": raw}
        return ToolCall(id=call_id, name=name, incomplete=True, provider_details=kept)
    return ToolCall(id=call_id, name=name, arguments=arguments, provider_details=details)


def _text_parts(text: str, details: Json | None = None) -> tuple[TextPart, ...]:
    return (TextPart(text=text, provider_details=details),) if text else ()


# --- Chat Completions ----------------------------------------------------------------------


def chat_messages(messages: Sequence[Message]) -> list[Json]:
    """Neutral messages as Chat Completions `messages`."""
    return [_chat_message(m) for m in messages]


def _chat_message(message: Message) -> Json:
    if message.tool_result is not None:
        return {
            "role": "tool",
            "tool_call_id": message.tool_result.call_id,
            "content": message.text,
        }
    if message.tool_calls:
        calls = [_chat_call(c) for c in message.tool_calls]
        return {"role": "assistant", "content": message.text or None, "tool_calls": calls}
    return {"role": message.role.value, "content": message.text}


def _chat_call(call: ToolCall) -> Json:
    function = {"name": call.name, "arguments": call.arguments_json}
    return {"id": call.id, "type": "function", "function": function}


def _chat_tool(tool: ToolSpec) -> Json:
    function = {"name": tool.name, "description": tool.description, "parameters": tool.parameters}
    return {"type": "function", "function": function}


def _chat_body(request: Request) -> Json:
    body: Json = {"messages": chat_messages(request.messages)}
    if request.tools:
        body["tools"] = [_chat_tool(t) for t in request.tools]
    return body


def _chat_usage(usage: Any) -> Usage:
    return _usage(
        _count(usage, "prompt_tokens"),
        _count(usage, "completion_tokens"),
        getattr(usage, "prompt_tokens_details", None),
        getattr(usage, "completion_tokens_details", None),
    )


@dataclass(slots=True)
class _PendingCall:
    id: str = ""
    name: str = ""
    arguments: str = ""


def _chat_answer(
    *,
    text: str,
    refusal: str,
    calls: Sequence[_PendingCall],
    finish_reason: str | None,
    usage: Usage,
    model: str | None,
    answer_id: str | None,
) -> Response:
    """The one place a Chat Completions answer (whole or streamed) becomes a Response."""
    stop = _CHAT_STOP.get(finish_reason or "", StopReason.OTHER)
    if refusal:
        stop = StopReason.REFUSAL
    truncated = stop is StopReason.MAX_TOKENS
    tool_calls = tuple(
        parse_tool_call(c.id, c.name, c.arguments, truncated=truncated) for c in calls
    )
    message = Message(
        role=Role.ASSISTANT, parts=_text_parts(text or refusal), tool_calls=tool_calls
    )
    details = {"id": answer_id} if answer_id else None
    return Response(
        message=message, stop_reason=stop, usage=usage, model=model, provider_details=details
    )


def chat_response(raw: Any) -> Response:
    """A Chat Completions `ChatCompletion` as a Response (first choice)."""
    if not raw.choices:
        raise incomplete_answer("the answer has no choices (empty completion)")
    choice = raw.choices[0]
    message = choice.message
    calls = [
        _PendingCall(id=c.id, name=c.function.name, arguments=c.function.arguments or "")
        for c in (message.tool_calls or ())
        if getattr(c, "function", None) is not None
    ]
    return _chat_answer(
        text=message.content or "",
        refusal=getattr(message, "refusal", None) or "",
        calls=calls,
        finish_reason=choice.finish_reason,
        usage=_chat_usage(raw.usage) if raw.usage else Usage(),
        model=raw.model,
        answer_id=raw.id,
    )


# A value read alike from a plain dict and from `_Fields` (no JSON object inside).
_TEXT = (str, type(None))


def _usual_choice(choice: object) -> bool:
    """A choice `_ChatAccumulator.fold` takes: an object; the first one (index 0) with a
    delta object of text only (no tool call), its values strings or null."""
    if not isinstance(choice, dict):
        return False
    if choice.get("index") != 0:
        return True  # not read at all (chatcli asks for one choice)
    delta = choice.get("delta")
    return (
        isinstance(delta, dict)
        and delta.get("tool_calls") in (None, [])
        and isinstance(delta.get("content"), _TEXT)
        and isinstance(delta.get("refusal"), _TEXT)
        and isinstance(choice.get("finish_reason"), _TEXT)
    )


@dataclass(slots=True)
class _ChatAccumulator:
    """Collects `ChatCompletionChunk`s; the finish_reason chunk is the terminator."""

    events: int = 0
    texts: list[str] = field(default_factory=list)
    refusal: list[str] = field(default_factory=list)
    calls: dict[int, _PendingCall] = field(default_factory=dict)
    finish_reason: str | None = None
    usage: Usage = field(default_factory=Usage)
    model: str | None = None
    answer_id: str | None = None

    def add(self, chunk: Any) -> list[StreamDelta]:
        self.took(chunk.model, chunk.id)
        if getattr(chunk, "usage", None) is not None:
            self.usage = _chat_usage(chunk.usage)
        deltas: list[StreamDelta] = []
        for choice in chunk.choices:
            if choice.index == 0:  # chatcli asks for one choice; ignore any other
                deltas.extend(self._add_choice(choice))
        return deltas

    def fold(self, chunk: Json) -> bool:
        """`add` without its deltas (a whole stream folded at its end: the proxy's), for a
        chunk decoded into plain dicts when it has the usual shape (`_usual_choice`: text
        only; no usage, tool call or error; its values strings or null, read alike from a
        dict and from `_Fields`). False, with nothing done, for any other: `add` takes it."""
        if "error" in chunk or chunk.get("usage") is not None:
            return False
        model, answer_id, choices = chunk.get("model"), chunk.get("id"), chunk.get("choices")
        if not (isinstance(model, _TEXT) and isinstance(answer_id, _TEXT)):
            return False
        if not isinstance(choices, list) or not all(map(_usual_choice, choices)):
            return False
        self.took(model, answer_id)
        for choice in choices:
            if choice.get("index") == 0:
                delta = choice["delta"]
                self.took_choice(
                    delta.get("content"), delta.get("refusal"), choice.get("finish_reason")
                )
        return True

    def _add_choice(self, choice: Any) -> list[StreamDelta]:
        delta = choice.delta
        deltas: list[StreamDelta] = [TextDelta(text=delta.content)] if delta.content else []
        for call in getattr(delta, "tool_calls", None) or ():
            pending = self.calls.setdefault(call.index, _PendingCall())
            pending.id = call.id or pending.id
            function = call.function
            name, arguments = (function.name, function.arguments) if function else (None, None)
            pending.name += name or ""
            pending.arguments += arguments or ""
            # The call's position among the answer's calls: the wire's index, renumbered.
            index = sorted(self.calls).index(call.index)
            deltas.append(
                ToolCallDelta(index=index, id=call.id, name=name, arguments=arguments or "")
            )
        self.took_choice(delta.content, getattr(delta, "refusal", None), choice.finish_reason)
        return deltas

    def took(self, model: Any, answer_id: Any) -> None:
        """What every chunk gives, `add`'s and `fold`'s one rule: the model and answer id."""
        self.events += 1
        self.model, self.answer_id = model or self.model, answer_id or self.answer_id

    def took_choice(self, content: Any, refusal: Any, finish_reason: Any) -> None:
        """What the first choice of every chunk gives, `add`'s and `fold`'s one rule: text
        (kept only when there is some: the parts are joined), refusal, finish reason."""
        if content:
            self.texts.append(content)
        if refusal:
            self.refusal.append(refusal)
        self.finish_reason = finish_reason or self.finish_reason

    def finish(self) -> Response | None:
        if self.finish_reason is None:
            return None
        return _chat_answer(
            text="".join(self.texts),
            refusal="".join(self.refusal),
            calls=[self.calls[i] for i in sorted(self.calls)],
            finish_reason=self.finish_reason,
            usage=self.usage,
            model=self.model,
            answer_id=self.answer_id,
        )


# --- Responses API -------------------------------------------------------------------------


def responses_input(messages: Sequence[Message]) -> list[Json]:
    """Neutral messages as Responses API `input` items."""
    return [item for m in messages for item in _response_items(m)]


def _response_items(message: Message) -> list[Json]:
    if message.tool_result is not None:
        result = message.tool_result
        return [
            {"type": "function_call_output", "call_id": result.call_id, "output": result.content}
        ]
    if message.role is not Role.ASSISTANT:
        return [{"role": message.role.value, "content": message.text}]
    reasoning = (message.provider_details or {}).get(REASONING_KEY, ())
    items = [dict(item) for item in reasoning]
    if message.text:
        items.append(_assistant_text_item(message))
    items.extend(_function_call_item(c) for c in message.tool_calls)
    return items


def _assistant_text_item(message: Message) -> Json:
    item_id = (message.parts[0].provider_details or {}).get("id") if message.parts else None
    if item_id is None:
        return {"role": "assistant", "content": message.text}
    # The original output item, id included: a reasoning item must be followed by its own item.
    content = [{"type": "output_text", "text": message.text, "annotations": []}]
    return {
        "type": "message",
        "role": "assistant",
        "id": item_id,
        "status": "completed",
        "content": content,
    }


def _function_call_item(call: ToolCall) -> Json:
    item: Json = {"type": "function_call", "call_id": call.id, "name": call.name}
    item["arguments"] = call.arguments_json
    item_id = (call.provider_details or {}).get("id")
    if item_id is not None:
        item["id"] = item_id
    return item


def _responses_tool(tool: ToolSpec) -> Json:
    # The Responses API makes function tools strict by default, which rejects ordinary schemas.
    return {
        "type": "function",
        "name": tool.name,
        "description": tool.description,
        "parameters": tool.parameters,
        "strict": False,
    }


def _responses_body(request: Request) -> Json:
    body: Json = {"input": responses_input(request.messages)}
    if request.tools:
        body["tools"] = [_responses_tool(t) for t in request.tools]
    return body


def _responses_usage(usage: Any) -> Usage:
    return _usage(
        _count(usage, "input_tokens"),
        _count(usage, "output_tokens"),
        getattr(usage, "input_tokens_details", None),
        getattr(usage, "output_tokens_details", None),
    )


@dataclass(slots=True)
class _Output:
    """The pieces of a Responses API `output` list, in neutral form."""

    texts: list[str] = field(default_factory=list)
    text_id: str | None = None
    refused: bool = False
    calls: list[ToolCall] = field(default_factory=list)
    reasoning: list[Json] = field(default_factory=list)

    def add(self, item: Any, *, truncated: bool) -> None:
        if item.type == "message":
            self._add_message(item)
        elif item.type == "function_call":
            details = {"id": item.id} if getattr(item, "id", None) else None
            raw = item.arguments or ""
            call = parse_tool_call(
                item.call_id, item.name, raw, truncated=truncated, details=details
            )
            self.calls.append(call)
        elif item.type == "reasoning":
            self.reasoning.append(item.model_dump(mode="json", exclude_none=True))

    def _add_message(self, item: Any) -> None:
        self.text_id = item.id
        for part in item.content:
            if part.type == "refusal":
                self.refused = True
                self.texts.append(str(part.refusal))
            else:
                self.texts.append(str(getattr(part, "text", None) or ""))


def _responses_stop(raw: Any, output: _Output) -> StopReason:
    if raw.status == "incomplete":
        reason = getattr(raw.incomplete_details, "reason", None)
        return _INCOMPLETE_STOP.get(reason or "", StopReason.OTHER)
    if output.refused:
        return StopReason.REFUSAL
    if output.calls:
        return StopReason.TOOL_USE
    return StopReason.END_TURN if raw.status in (None, "completed") else StopReason.OTHER


def responses_response(raw: Any) -> Response:
    """A Responses API `Response` object as a chatcli Response."""
    if raw.status == "failed":
        error = raw.error.model_dump() if raw.error is not None else {"message": "failed"}
        raise _failure({"error": error})
    truncated = raw.status == "incomplete"
    output = _Output()
    for item in raw.output or ():
        output.add(item, truncated=truncated)
    text_details = {"id": output.text_id} if output.text_id else None
    message = Message(
        role=Role.ASSISTANT,
        parts=_text_parts("".join(output.texts), text_details),
        tool_calls=tuple(output.calls),
        provider_details={REASONING_KEY: tuple(output.reasoning)} if output.reasoning else None,
    )
    usage = _responses_usage(raw.usage) if raw.usage is not None else Usage()
    return Response(
        message=message,
        stop_reason=_responses_stop(raw, output),
        usage=usage,
        model=raw.model,
        provider_details={"id": raw.id},
    )


@dataclass(slots=True)
class _ResponsesAccumulator:
    """Collects Responses stream events; `response.completed`/`.incomplete` terminate."""

    events: int = 0
    final: Any = None
    calls: dict[int, int] = field(default_factory=dict)  # output_index -> call position

    def add(self, event: Any) -> list[StreamDelta]:
        self.events += 1
        kind = event.type
        if kind == "response.output_text.delta":
            return [TextDelta(text=str(event.delta))]
        if kind == "response.output_item.added" and event.item.type == "function_call":
            index = self.calls.setdefault(event.output_index, len(self.calls))
            item = event.item
            delta = ToolCallDelta(index=index, id=item.call_id, name=item.name)
            return [replace(delta, arguments=item.arguments)] if item.arguments else [delta]
        if kind == "response.function_call_arguments.delta" and event.output_index in self.calls:
            return [ToolCallDelta(index=self.calls[event.output_index], arguments=event.delta)]
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.final = event.response
        elif kind == "error":  # the documented in-stream error event
            error = {"code": event.code, "message": event.message, "param": event.param}
            raise _failure({"error": error})
        return []

    def finish(self) -> Response | None:
        return None if self.final is None else responses_response(self.final)


# --- settings ------------------------------------------------------------------------------


def _chat_settings(request: Request, api: str) -> Json:
    """Chat Completions fields for `request.settings` (OpenAI and OpenAI-compatible servers)."""
    settings = request.settings
    if settings.thinking_budget is not None:
        raise unsupported(api, "thinking_budget", "use reasoning_effort (or Settings.extra)")
    body = _common_settings(request)
    if settings.stop is not None:
        body["stop"] = list(settings.stop)
    if settings.seed is not None:
        body["seed"] = settings.seed
    if settings.reasoning_effort is not None:
        body["reasoning_effort"] = settings.reasoning_effort
    if settings.response_format == JSON_MODE:
        body["response_format"] = {"type": "json_object"}
    elif isinstance(settings.response_format, Mapping):
        schema = dict(settings.response_format)
        json_schema = {"name": schema_name(schema), "schema": schema}
        body["response_format"] = {"type": "json_schema", "json_schema": json_schema}
    if "tool_choice" in body and body["tool_choice"] not in TOOL_CHOICE_MODES:
        body["tool_choice"] = {"type": "function", "function": {"name": body["tool_choice"]}}
    return body


def _responses_settings(request: Request, api: str) -> Json:
    """Responses API fields for `request.settings`."""
    settings = request.settings
    if settings.stop is not None:
        raise unsupported(api, "stop", "the Responses API has no stop sequences (api='chat' has)")
    if settings.thinking_budget is not None:
        raise unsupported(api, "thinking_budget", "use reasoning_effort (or Settings.extra)")
    if settings.seed is not None:
        drop_setting(api, "seed", "the Responses API takes no seed")
    body = _common_settings(request)
    if settings.reasoning_effort is not None:
        body["reasoning"] = {"effort": settings.reasoning_effort}
    if settings.response_format == JSON_MODE:
        body["text"] = {"format": {"type": "json_object"}}
    elif isinstance(settings.response_format, Mapping):
        schema = dict(settings.response_format)
        body["text"] = {
            "format": {"type": "json_schema", "name": schema_name(schema), "schema": schema}
        }
    if "tool_choice" in body and body["tool_choice"] not in TOOL_CHOICE_MODES:
        body["tool_choice"] = {"type": "function", "name": body["tool_choice"]}
    return body


def _common_settings(request: Request) -> Json:
    """The fields both wires name alike: sampling and the tool settings (with tools only)."""
    settings = request.settings
    body: Json = {}
    if settings.temperature is not None:
        body["temperature"] = settings.temperature
    if settings.top_p is not None:
        body["top_p"] = settings.top_p
    if tool_settings_apply(request):
        if settings.tool_choice is not None:
            body["tool_choice"] = settings.tool_choice
        if settings.parallel_tool_calls is not None:
            body["parallel_tool_calls"] = settings.parallel_tool_calls
    return body


def prompt_cache_key(messages: Sequence[Message]) -> str:
    """A key that names a conversation by its stable beginning: the first system message and
    the first user message (what every request of the conversation starts with, even after a
    recovery cut adds a notice), so requests of one conversation go to the same cache machine
    and different conversations spread out."""
    system = next((m.text for m in messages if m.role is Role.SYSTEM), "")
    first_user = next((m.text for m in messages if m.role is Role.USER), "")
    digest = hashlib.sha256(json.dumps([system, first_user]).encode()).hexdigest()
    return "chatcli-" + digest[:32]


# --- the driver ----------------------------------------------------------------------------


class _Accumulator(Protocol):
    events: int

    def add(self, event: Any) -> list[StreamDelta]: ...

    def finish(self) -> Response | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class _Wire:
    """What differs between Chat Completions and the Responses API."""

    body: Callable[[Request], Json]
    settings: Callable[[Request, str], Json]
    parse: Callable[[Any], Response]
    accumulator: Callable[[], _Accumulator]
    endpoint: Callable[[Any], Any]  # SDK client -> the resource whose `create` is called
    max_tokens_param: str
    stream_params: Mapping[str, Any]
    raw_stream: bool = False  # events decoded here (`_Fields`), not into the SDK's models


_WIRES: dict[str, _Wire] = {
    "chat": _Wire(
        body=_chat_body,
        settings=_chat_settings,
        parse=chat_response,
        accumulator=_ChatAccumulator,
        endpoint=lambda client: client.chat.completions,
        max_tokens_param="max_completion_tokens",
        stream_params={"stream": True, "stream_options": {"include_usage": True}},
        raw_stream=True,
    ),
    "responses": _Wire(
        body=_responses_body,
        settings=_responses_settings,
        parse=responses_response,
        accumulator=_ResponsesAccumulator,
        endpoint=lambda client: client.responses,
        max_tokens_param="max_output_tokens",
        stream_params={"stream": True},
    ),
}


@dataclass(frozen=True, slots=True, kw_only=True)
class RawStream:
    """A Chat Completions stream read raw (`OpenAIBase.apassthrough`): its HTTP request, and
    its bytes as they come (a failure to read raises the classified ProviderError)."""

    request: Any
    chunks: AsyncIterator[bytes]
    detachable: Any = None  # the lean transport's body, its reads as they come (`detach`)


class _Fields(SimpleNamespace):
    """A decoded stream event: its JSON object's fields as attributes, an absent one None (as
    on the SDK's models, which are built without validation)."""

    def __getattr__(self, name: str) -> Any:
        return None


def _fields(pairs: dict[str, Any]) -> _Fields:
    return _Fields(**pairs)


# One decoder for every event: `json.loads` with an object_hook builds a new decoder (and its
# scanner) per call, half the cost of decoding a short event.
_EVENT_DECODER = json.JSONDecoder(object_hook=_fields)
# The whole-stream fold's (`_plain_object`, `_TextEvents`): `json`'s scanner, called at once,
# decodes the value at an index into plain dicts (typeshed wants a scanner as its context).
_SCAN = json.scanner.make_scanner(json.JSONDecoder())  # type: ignore[arg-type]
# The line ends `str.splitlines` knows besides "\n" (`_other_line_end`).
_ASCII_LINE_ENDS = "\r\x0b\x0c\x1c\x1d\x1e"
_OTHER_LINE_END = re.compile(f"[{_ASCII_LINE_ENDS}\x85\u2028\u2029]")


class _SSE:
    """Server-sent events, line by line: `feed` gives an event's data when the blank line that
    ends it comes (comments and other fields skipped, a multi-line data joined with newlines),
    nothing once `[DONE]` came (the rest is still read, so the connection goes back to the
    pool)."""

    def __init__(self) -> None:
        self.data: list[str] = []
        self.done = False

    def feed(self, line: str) -> str | None:
        if self.done:
            return None
        if line:
            name, _, value = line.partition(":")
            if name == "data":
                self.data.append(value.removeprefix(" "))
            return None
        if not self.data:
            return None
        data, self.data = "\n".join(self.data), []
        self.done = data.startswith("[DONE]")
        return None if self.done else data


def _event(data: str, http_request: Any) -> _Fields:
    """One event's data decoded; an `error` event raises the SDK's APIError, as its own stream
    does (so it is classified like any SDK error)."""
    event = _EVENT_DECODER.decode(data)
    if not isinstance(event, _Fields):
        raise _failure(f"a stream event that is not a JSON object: {data[:200]}")
    if event.error:
        error = json.loads(data)["error"]
        message = error.get("message") if isinstance(error, dict) else None
        if not message or not isinstance(message, str):
            message = "An error occurred during streaming"
        raise _sdk().APIError(message=message, request=http_request, body=error)
    return event


class _StreamFolder:
    """A raw stream folded into `accumulator` a part at a time (each part whole events), event
    by event as `_event` and `add` would (the same values, the same exceptions), cheaply for
    the usual event: a text event of the stream's shape (`_TextEvents`, found once and kept
    across parts) by its text alone; else decoded into plain dicts and folded without deltas
    (`_ChatAccumulator.fold`); any other, and any that does not decode alone into an object,
    by `_event` and `add`."""

    def __init__(self, accumulator: _ChatAccumulator, http_request: Any) -> None:
        self.accumulator, self.http_request = accumulator, http_request
        self.shape: _TextEvents | None = None
        self.tries = _SHAPE_TRIES

    def feed(self, stream: bytes) -> None:
        accumulator, shape = self.accumulator, self.shape
        for data in _stream_data(stream):
            if shape is not None and (text := shape.text(data)) is not None:
                accumulator.took(shape.model, shape.answer_id)
                accumulator.took_choice(text, shape.refusal, shape.finish_reason)
                continue
            chunk = _plain_object(data)
            if chunk is None or not accumulator.fold(chunk):
                accumulator.add(_event(data, self.http_request))
            elif self.tries and (found := _TextEvents.of(data, chunk)) is not None:
                self.shape = shape = found
                self.tries -= 1


class PassthroughFold:
    """`OpenAIBase.folded` a part at a time: the events piped to the client folded as they
    are piped (`piped`, whole events, in order), so that little is left to decode when the
    answer ends (`ended`), on the way to the client's last bytes; so is the adapter's check
    of `request`'s answer made ready (`_checking`: an OpenAI-compatible server's estimates
    its prompt, a pass over every message). A malformed piped event raises from `ended`, as
    from `folded`; nothing is folded after it."""

    def __init__(self, provider: OpenAIBase, request: Request, http_request: Any = None) -> None:
        self.provider, self.fold = provider, provider._fold()
        accumulator = self.fold.accumulator
        assert isinstance(accumulator, _ChatAccumulator)  # the passthrough's one wire
        self.folder = _StreamFolder(accumulator, http_request)
        self.checked = provider._checking(request)
        self.failure: Exception | None = None

    def piped(self, events: bytes) -> None:
        if self.failure is not None:
            return
        try:
            with self.provider._errors():
                self.folder.feed(events)
        except Exception as exc:
            self.failure = exc

    def ended(self, rest: bytes) -> tuple[str, Response | Exception]:
        """The answer text piped, and the Response `astream` ends with or the error it
        raises instead (`rest`: the events not piped)."""
        if self.failure is not None:
            raise self.failure
        shown = "".join(self.folder.accumulator.texts)
        try:
            with self.provider._errors():
                self.folder.feed(rest)
            return shown, self.checked(self.fold.finish())
        except Exception as exc:
            return shown, exc


def _stream_data(stream: bytes) -> Iterator[str]:
    """Each event's data in a whole raw stream, up to `[DONE]`, as `_SSE` reads its lines
    (a last event without its blank line too). With "\\n" its only line end, the events are
    what lies between blank lines: the usual one, a single `data: ` line, is cut out as it is;
    any other (comments, other fields, data on several lines) is `_SSE`'s, and so is a whole
    stream with another line end (CR, CRLF, any other `str.splitlines` knows)."""
    text = stream.decode()
    sse = _SSE()
    if _other_line_end(text):
        yield from _sse_data(sse, text.splitlines())
        return
    for block in text.split("\n\n"):
        if block.startswith("data: ") and "\n" not in block:
            if block.startswith("[DONE]", 6):
                return
            yield block[6:]
        else:
            yield from _sse_data(sse, block.split("\n"))
            if sse.done:
                return


def _other_line_end(text: str) -> bool:
    """Whether `text` has a line end other than "\\n": a plain search of each when it is
    ASCII (`isascii` is told, not searched), several times faster than the expression's."""
    if text.isascii():
        return any(end in text for end in _ASCII_LINE_ENDS)
    return _OTHER_LINE_END.search(text) is not None


def _sse_data(sse: _SSE, lines: Iterable[str]) -> Iterator[str]:
    """The data of the events `lines` end (with a blank line after them: a last event
    without its own ends too)."""
    for line in itertools.chain(lines, [""]):
        if (data := sse.feed(line)) is not None:
            yield data


def _plain_object(data: str) -> Json | None:
    """An event's data decoded into plain dicts, when it is one JSON object alone (no blank
    around it); else None, and `_event` decodes it (raising what it raises)."""
    try:
        value, end = _SCAN(data, 0)
    except Exception:  # StopIteration, a JSONDecodeError, a RecursionError: `_event`'s to say
        return None
    return value if end == len(data) and isinstance(value, dict) else None


# How many times a stream's fold looks for the shape of its text events (`_TextEvents.of`):
# the first event often differs (the role in it), and a stream whose events all differ
# (a random field in each) must not pay for the search at every event.
_SHAPE_TRIES = 3
# The last text of an event's data: its `"content"` string, found from the end.
_LAST_CONTENT = re.compile(r'.*"content"\s*:\s*(")', re.DOTALL)


@dataclass(frozen=True, slots=True, kw_only=True)
class _TextEvents:
    """The shape of a stream's text events: their data around their text, the same before
    its JSON string and after it from one event to the next. JSON is read token by token, so
    data with the same text around another JSON string decodes to the same object with that
    text (`of` checks that the string is the text): such an event folds as the first did,
    with its own text, one string decoded rather than three objects."""

    head: str  # the data up to the text's JSON string, its opening quote included
    tail: str  # the data after the string's closing quote
    model: str | None
    answer_id: str | None
    refusal: str | None
    finish_reason: str | None

    @classmethod
    def of(cls, data: str, chunk: Json) -> _TextEvents | None:
        """The shape of `data`'s events, from `data` (`chunk` decoded, taken by
        `_ChatAccumulator.fold`: the usual event) when it has one choice with text, and its
        last `"content"` string is that text: the data with another string there decodes to
        the same object with that string as its text (not, say, as a key or another value)."""
        choices = chunk["choices"]
        if len(choices) != 1 or choices[0].get("index") != 0:
            return None
        text = choices[0]["delta"].get("content")
        found = _LAST_CONTENT.match(data)
        if not text or found is None:
            return None
        quote = found.start(1)
        try:
            _, end = _SCAN(data, quote)
        except ValueError:
            return None
        other = text + "."  # never the text itself
        changed = _plain_object(data[:quote] + json.dumps(other) + data[end:])
        if changed is None or _first_text(changed) != other:
            return None
        choice = choices[0]
        return cls(
            head=data[: quote + 1],
            tail=data[end:],
            model=chunk.get("model"),
            answer_id=chunk.get("id"),
            refusal=choice["delta"].get("refusal"),
            finish_reason=choice.get("finish_reason"),
        )

    def text(self, data: str) -> str | None:
        """The text of an event of this shape, None for any other event."""
        if not (data.startswith(self.head) and data.endswith(self.tail)):
            return None
        try:
            text, end = _SCAN(data, len(self.head) - 1)
        except ValueError:
            return None
        # One JSON string exactly between head and tail: a string, as the head ends in '"'.
        return text if end == len(data) - len(self.tail) and isinstance(text, str) else None


def _first_text(chunk: Json) -> Any:
    """The text of a decoded event's only choice, None when it has no such thing."""
    choices = chunk.get("choices")
    if not isinstance(choices, list) or len(choices) != 1 or not isinstance(choices[0], dict):
        return None
    delta = choices[0].get("delta")
    return delta.get("content") if isinstance(delta, dict) else None


@contextmanager
def _decoded(endpoint: Any, params: Json) -> Iterator[Iterator[_Fields]]:
    """The SDK call's event stream, read raw and decoded here (see the module docstring)."""
    with endpoint.with_streaming_response.create(**params) as response:
        yield _events(response)


def _events(response: Any) -> Iterator[_Fields]:
    for data in _sse_data(_SSE(), response.iter_lines()):
        yield _event(data, response.http_request)


@asynccontextmanager
async def _adecoded(endpoint: Any, params: Json) -> AsyncIterator[AsyncIterator[_Fields]]:
    """The async `_decoded`."""
    async with endpoint.with_streaming_response.create(**params) as response:
        yield _aevents(response)


async def _aevents(response: Any) -> AsyncIterator[_Fields]:
    sse = _SSE()
    async for line in response.iter_lines():
        if (data := sse.feed(line)) is not None:
            yield _event(data, response.http_request)
    if (data := sse.feed("")) is not None:  # a last event without its blank line
        yield _event(data, response.http_request)


def _given_limit(body: Mapping[str, Any]) -> bool:
    return body.get("max_completion_tokens") is not None or body.get("max_tokens") is not None


def _env_proxied(url: str) -> bool:
    """Whether a proxy from the environment applies to `url` (urllib's reading of the
    variables, as httpx's `trust_env`: the scheme's proxy or ALL_PROXY, unless NO_PROXY
    names the host)."""
    proxies = urllib.request.getproxies_environment()
    parts = urllib.parse.urlsplit(url)
    if parts.scheme not in proxies and "all" not in proxies:
        return False
    return not urllib.request.proxy_bypass(parts.hostname or "")


def _status_error(response: Any, content: bytes) -> Exception:
    """The SDK's error for an error status (its message and body), so it is classified as
    the SDK call's own would be."""
    text = content.decode(errors="replace").strip()
    body: Any = text
    with suppress(ValueError):
        body = json.loads(text)
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    detail = message if isinstance(message, str) else text
    status_error: Exception = _sdk().APIStatusError(
        f"Error code: {response.status_code} - {detail}", response=response, body=body
    )
    return status_error


@contextmanager
def _sdk_errors() -> Iterator[None]:
    """Translate SDK exceptions into ProviderError, classified once (with the HTTP status)."""
    sdk = _sdk()
    try:
        yield
    except sdk.APIStatusError as exc:
        raise_classified(exc, status=exc.status_code)
    except (sdk.APIError, *transport_errors()) as exc:  # connection errors, timeouts, errors
        raise_classified(exc)  # raised inside a stream (wrapped or not, by SDK version)


@dataclass(slots=True)
class _Fold:
    """An accumulator as a `Fold`: an answer without its terminator raises `unterminated`."""

    accumulator: _Accumulator
    unterminated: Callable[..., ProviderError]

    def feed(self, event: Any) -> list[StreamDelta]:
        return self.accumulator.add(event)

    def finish(self) -> Response:
        response = self.accumulator.finish()
        if response is None:
            raise self.unterminated(empty=self.accumulator.events == 0)
        return response


class OpenAIBase(Adapter):
    """The shared driver of `OpenAI` and `OpenAICompatible`: the wire (Chat Completions or the
    Responses API) on top of `Adapter`'s entry points.

    Subclasses may refine `_checked` (inspect a finished answer), `_unterminated` (the error
    for a stream that ended without its terminator) and `_body_extra` (fields of their own).
    """

    api_name = "OpenAI"

    def __init__(
        self,
        model: str,
        *,
        api: Api,
        api_key: str,
        base_url: str | None,
        timeout: float,
        context_window: int | None,
        max_output_tokens: int | None,
        max_tokens_param: str | None = None,
    ) -> None:
        if api not in _WIRES:
            raise ConfigError(f"api={api!r} is not one of {sorted(_WIRES)}")
        self.model = model
        self.api: Api = api
        self.base_url = base_url
        self.timeout = timeout
        self.context_window = context_window
        self.max_output_tokens = max_output_tokens
        self._wire = _WIRES[api]
        self._max_tokens_param = max_tokens_param or self._wire.max_tokens_param
        self._raw_route: Any = None  # the passthrough's route and client (`apassthrough`)
        self._raw_loop: asyncio.AbstractEventLoop | None = None
        self._direct: bool | None = None  # `passthrough_direct`, once read
        self.__api_key = api_key  # never shown: not in repr, logs or errors

    def __repr__(self) -> str:
        name, url = type(self).__name__, redact_url(self.base_url)
        return f"{name}(model={self.model!r}, api={self.api!r}, base_url={url!r})"

    def _client_args(self) -> Json:
        return {
            "api_key": self.__api_key,
            "base_url": self.base_url,
            "max_retries": 0,
            "timeout": self.timeout,
        }

    def _new_client(self) -> Any:
        return _sdk().OpenAI(**self._client_args())

    def _new_async_client(self) -> Any:
        return _sdk().AsyncOpenAI(**self._client_args())

    def _errors(self) -> AbstractContextManager[None]:
        return _sdk_errors()

    def params(self, request: Request, *, stream: bool = False) -> Json:
        """The keyword arguments for the SDK's `create`: the wire body, the settings' fields
        and `settings.extra` as `extra_body` (any SDK version sends them, and they win), and
        `request.options` last."""
        params: Json = {"model": request.model or self.model, **self._wire.body(request)}
        if request.max_tokens is not None:
            params[self._max_tokens_param] = request.max_tokens
        if stream:
            params.update(self._wire.stream_params)
        fields = self._wire.settings(request, self.api_name)
        extra = {**fields, **self._body_extra(request), **request.settings.extra}
        if extra:
            params["extra_body"] = extra
        return {**params, **request.options}

    def _body_extra(self, request: Request) -> Json:
        return {}

    # -- a body the caller wrote (the proxy's passthrough) ----------------------------------

    def passthrough_fields(self, request: Request, given: Mapping[str, Any]) -> Json:
        """The fields this adapter would set in a streamed Chat Completions body that a caller
        wrote itself (`given`, whose messages are `request`'s): the model, the output limit
        when `given` has none, usage in the stream, and the adapter's own extras."""
        fields: Json = {"model": request.model or self.model}
        if request.max_tokens is not None and not _given_limit(given):
            fields[self._max_tokens_param] = request.max_tokens
        options = given.get("stream_options")
        options = options if isinstance(options, dict) else {}
        fields["stream_options"] = {**options, "include_usage": True}
        extra = self._body_extra(replace(request, settings=replace(request.settings, extra=given)))
        return {**fields, **extra}

    def passthrough_now(self, body: bytes) -> Any | None:
        """`body` (as `apassthrough` takes it) sent now, from a callback, when that needs no
        wait (`chatcli.providers.lean_http.Route.send_now`): what `apassthrough(sent=)` must
        then read the answer of. None: nothing was sent."""
        return self._passthrough_route().send_now(body)

    @asynccontextmanager
    async def apassthrough(self, body: bytes, sent: Any | None = None) -> AsyncIterator[RawStream]:
        """A streamed Chat Completions call of `body`, written by the caller, with plain
        httpx (no SDK request building) over the lean transport (`_passthrough_route`): its
        bytes as they are read (`sent`: `passthrough_now` sent it already). An error status
        raises the ProviderError the SDK call would; so does a connection error, before or
        while the caller reads."""
        route = self._passthrough_route()
        with self._errors():
            response = await route.send(body, sent)
        try:
            if response.status_code >= 400:
                with self._errors():
                    raise _status_error(response, await response.aread())
            from chatcli.providers.lean_http import DETACHABLE

            detachable = None
            if "content-encoding" not in response.headers:  # the body's bytes as they came
                detachable = response.extensions.get(DETACHABLE)
            yield RawStream(
                request=response.request, chunks=self._read(response), detachable=detachable
            )
        finally:
            await response.aclose()
            # httpx's response and its body's stream refer to each other, and through the
            # response its request holds the body sent (~900 KB at 2,000 messages): freed by
            # the collector's rare full collections only, unless the cycle is broken here.
            import httpx

            response.stream = httpx.ByteStream(b"")

    def read_failure(self, exc: Exception) -> Exception:
        """A failure to read a passthrough's body, as the ProviderError its reads raise."""
        try:
            with self._errors():
                raise exc
        except Exception as classified:
            return classified

    async def _read(self, response: Any) -> AsyncIterator[bytes]:
        with self._errors():
            async for data in response.aiter_bytes():
                yield data

    def folded(
        self, piped: bytes, rest: bytes, request: Request, http_request: Any = None
    ) -> tuple[str, Response | Exception]:
        """A whole Chat Completions event stream read raw (the passthrough's: the events
        `piped` to the client, then the `rest`), decoded once, at its end: the answer text of
        the piped part, and the Response `astream` ends with (the same fold, the same checks)
        or the error it raises instead. A malformed piped event raises. One decoding, not
        two (the fast path's is `PassthroughFold`'s, the piped part folded as it passes)."""
        fold = PassthroughFold(self, request, http_request)
        fold.piped(piped)
        return fold.ended(rest)

    @property
    def passthrough_direct(self) -> bool:
        """Whether the passthrough may reach the upstream itself: no proxy from the
        environment (`HTTPS_PROXY`, `HTTP_PROXY`, `ALL_PROXY`, less `NO_PROXY`) applies to its
        URL. The lean transport connects directly; the SDK's client honours those variables,
        so behind a proxy the library's path is the one that reaches the upstream. Read once
        per adapter, as the SDK's client reads them once; with no event loop needed (the URL
        is the sync client's, the same as the async one's)."""
        if self._direct is None:
            self._direct = not _env_proxied(str(self._client().base_url))
        return self._direct

    def _passthrough_route(self) -> Any:
        """The passthrough's route (`chatcli.providers.lean_http.Route`: its requests built
        once, then sent straight to the transport) over its httpx client: one per adapter and
        event loop, like the SDK's, with the SDK client's URL, headers (organization, project,
        user agent) and connection limits (httpx's own default, 100 connections, would queue
        the 101st stream in flight inside the proxy: measured at 200 streams,
        benchmarks/proxy.py), over the lean transport (`chatcli.providers.lean_http`:
        httpcore's read of each event was half the proxy's CPU per event)."""
        import httpx

        from chatcli.providers.lean_http import LeanTransport, Route

        loop = asyncio.get_running_loop()
        if self._raw_route is None or self._raw_loop is not loop:
            sdk = self._aclient()
            base = str(sdk.base_url).rstrip("/") + "/"
            given = {k: v for k, v in sdk.default_headers.items() if isinstance(v, str)}
            headers = {**given, "authorization": f"Bearer {self.__api_key}"}
            client = httpx.AsyncClient(
                base_url=base,
                headers=headers,
                timeout=self.timeout,
                transport=LeanTransport(_sdk().DEFAULT_CONNECTION_LIMITS),
            )
            self._raw_route = Route.of(client, "chat/completions")
            self._raw_loop = loop
        return self._raw_route

    async def aclose(self) -> None:
        """Release the SDK clients' connections and the passthrough's."""
        await super().aclose()
        route, self._raw_route = self._raw_route, None
        if route is not None and self._raw_loop is asyncio.get_running_loop():
            await route.client.aclose()

    def _send(self, client: Any, params: Json) -> Any:
        return self._wire.endpoint(client).create(**params)

    async def _asend(self, client: Any, params: Json) -> Any:
        return await self._wire.endpoint(client).create(**params)

    def _open(self, client: Any, params: Json) -> AbstractContextManager[Any]:
        endpoint = self._wire.endpoint(client)
        if self._wire.raw_stream:
            return _decoded(endpoint, params)
        events: AbstractContextManager[Any] = endpoint.create(**params)
        return events

    async def _aopen(self, client: Any, params: Json) -> AbstractAsyncContextManager[Any]:
        endpoint = self._wire.endpoint(client)
        if self._wire.raw_stream:
            return _adecoded(endpoint, params)
        events: AbstractAsyncContextManager[Any] = await endpoint.create(**params)
        return events

    def _parse(self, raw: Any) -> Response:
        return self._wire.parse(raw)

    def _fold(self) -> _Fold:
        return _Fold(accumulator=self._wire.accumulator(), unterminated=self._unterminated)

    def _unterminated(self, *, empty: bool) -> ProviderError:
        if empty:
            return incomplete_answer("the server sent an empty event stream (no answer, no error)")
        return incomplete_answer(
            "the event stream ended before its terminator (the answer is cut off)"
        )


class OpenAI(OpenAIBase):
    """OpenAI's API (or Azure OpenAI's v1 endpoint, via `base_url`).

    `api="chat"` (default) uses Chat Completions with `max_completion_tokens`; `api="responses"`
    uses the Responses API with `max_output_tokens`. The key comes from `api_key` or
    `OPENAI_API_KEY` (in `environ`, default `os.environ`); `base_url` from the argument or
    `OPENAI_BASE_URL`. `context_window`/`max_output_tokens` describe the model (None: unknown).
    `prompt_cache_key=False` stops the automatic per-conversation cache key.
    """

    def __init__(
        self,
        model: str,
        *,
        api: Api = "chat",
        api_key: str | None = None,
        base_url: str | None = None,
        timeout: float = 600.0,
        context_window: int | None = None,
        max_output_tokens: int | None = None,
        environ: Mapping[str, str] | None = None,
        prompt_cache_key: bool = True,
    ) -> None:
        env = os.environ if environ is None else environ
        key = api_key_from_env(api_key, ("OPENAI_API_KEY",), env, required=True)
        assert key is not None  # required=True raises instead
        window, output = model_limits(model, "openai", context_window, max_output_tokens)
        super().__init__(
            model,
            api=api,
            api_key=key,
            base_url=base_url or env.get("OPENAI_BASE_URL") or None,
            timeout=timeout,
            context_window=window,
            max_output_tokens=output,
        )
        self._auto_cache_key = prompt_cache_key

    def _body_extra(self, request: Request) -> Json:
        given = request.settings.extra.keys() | request.options.keys()
        if not self._auto_cache_key or "prompt_cache_key" in given:
            return {}
        return {"prompt_cache_key": prompt_cache_key(request.messages)}

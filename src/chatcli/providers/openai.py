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
- `Request.options` are passed to the SDK's `create` as they are, last (they win).
- Tool results have no error flag on this wire; `ToolResult.is_error` is not sent.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import cached_property
from types import ModuleType
from typing import Any, Literal, Protocol

from chatcli.errors import ConfigError, ProviderError, classify_error
from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, Usage
from chatcli.providers._common import (
    api_key_from_env,
    incomplete_answer,
    model_limits,
    raise_classified,
    require_module,
)
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta, ToolSpec

__all__ = ["OpenAI", "OpenAIBase"]

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

    def add(self, chunk: Any) -> str:
        self.events += 1
        self.model, self.answer_id = chunk.model or self.model, chunk.id or self.answer_id
        if getattr(chunk, "usage", None) is not None:
            self.usage = _chat_usage(chunk.usage)
        text = ""
        for choice in chunk.choices:
            if choice.index == 0:  # chatcli asks for one choice; ignore any other
                text += self._add_choice(choice)
        return text

    def _add_choice(self, choice: Any) -> str:
        delta = choice.delta
        for call in getattr(delta, "tool_calls", None) or ():
            pending = self.calls.setdefault(call.index, _PendingCall())
            pending.id = call.id or pending.id
            if call.function is not None:
                pending.name += call.function.name or ""
                pending.arguments += call.function.arguments or ""
        self.refusal.append(getattr(delta, "refusal", None) or "")
        self.finish_reason = choice.finish_reason or self.finish_reason
        self.texts.append(delta.content or "")
        return delta.content or ""

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

    def add(self, event: Any) -> str:
        self.events += 1
        kind = event.type
        if kind == "response.output_text.delta":
            return str(event.delta)
        if kind in ("response.completed", "response.incomplete", "response.failed"):
            self.final = event.response
        elif kind == "error":  # the documented in-stream error event
            error = {"code": event.code, "message": event.message, "param": event.param}
            raise _failure({"error": error})
        return ""

    def finish(self) -> Response | None:
        return None if self.final is None else responses_response(self.final)


# --- the driver ----------------------------------------------------------------------------


class _Accumulator(Protocol):
    events: int

    def add(self, event: Any) -> str: ...

    def finish(self) -> Response | None: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class _Wire:
    """What differs between Chat Completions and the Responses API."""

    body: Callable[[Request], Json]
    parse: Callable[[Any], Response]
    accumulator: Callable[[], _Accumulator]
    endpoint: Callable[[Any], Any]  # SDK client -> the resource whose `create` is called
    max_tokens_param: str
    stream_params: Mapping[str, Any]


_WIRES: dict[str, _Wire] = {
    "chat": _Wire(
        body=_chat_body,
        parse=chat_response,
        accumulator=_ChatAccumulator,
        endpoint=lambda client: client.chat.completions,
        max_tokens_param="max_completion_tokens",
        stream_params={"stream": True, "stream_options": {"include_usage": True}},
    ),
    "responses": _Wire(
        body=_responses_body,
        parse=responses_response,
        accumulator=_ResponsesAccumulator,
        endpoint=lambda client: client.responses,
        max_tokens_param="max_output_tokens",
        stream_params={"stream": True},
    ),
}


@contextmanager
def _sdk_errors() -> Iterator[None]:
    """Translate SDK exceptions into ProviderError, classified once (with the HTTP status)."""
    sdk = _sdk()
    try:
        yield
    except sdk.APIStatusError as exc:
        raise_classified(exc, status=exc.status_code)
    except sdk.APIError as exc:  # connection errors, timeouts, errors raised inside a stream
        raise_classified(exc)


class OpenAIBase:
    """The shared driver of `OpenAI` and `OpenAICompatible`: sync, async, whole and streamed.

    Subclasses may refine `_checked` (inspect a finished answer) and `_unterminated` (the error
    for a stream that ended without its terminator).
    """

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
        self.__api_key = api_key  # never shown: not in repr, logs or errors

    def __repr__(self) -> str:
        name = type(self).__name__
        return f"{name}(model={self.model!r}, api={self.api!r}, base_url={self.base_url!r})"

    def _client_args(self) -> Json:
        return {
            "api_key": self.__api_key,
            "base_url": self.base_url,
            "max_retries": 0,
            "timeout": self.timeout,
        }

    @cached_property
    def _client(self) -> Any:
        return _sdk().OpenAI(**self._client_args())

    @cached_property
    def _async_client(self) -> Any:
        return _sdk().AsyncOpenAI(**self._client_args())

    def close(self) -> None:
        """Release the sync SDK client's connections (if it was ever used)."""
        if "_client" in self.__dict__:
            self._client.close()

    async def aclose(self) -> None:
        """Release the async SDK client's connections (if it was ever used)."""
        if "_async_client" in self.__dict__:
            await self._async_client.close()

    def params(self, request: Request, *, stream: bool = False) -> Json:
        """The keyword arguments for the SDK's `create` (the wire body, plus options)."""
        params: Json = {"model": request.model or self.model, **self._wire.body(request)}
        if request.max_tokens is not None:
            params[self._max_tokens_param] = request.max_tokens
        if request.temperature is not None:
            params["temperature"] = request.temperature
        if stream:
            params.update(self._wire.stream_params)
        return {**params, **request.options}

    def complete(self, request: Request) -> Response:
        with _sdk_errors():
            raw = self._wire.endpoint(self._client).create(**self.params(request))
        return self._checked(self._wire.parse(raw), request)

    async def acomplete(self, request: Request) -> Response:
        with _sdk_errors():
            endpoint = self._wire.endpoint(self._async_client)
            raw = await endpoint.create(**self.params(request))
        return self._checked(self._wire.parse(raw), request)

    def stream(self, request: Request) -> Iterator[StreamChunk]:
        accumulator = self._wire.accumulator()
        with _sdk_errors():
            events = self._wire.endpoint(self._client).create(**self.params(request, stream=True))
            with events:
                for event in events:
                    if text := accumulator.add(event):
                        yield TextDelta(text=text)
        yield self._finished(accumulator, request)

    async def astream(self, request: Request) -> AsyncIterator[StreamChunk]:
        accumulator = self._wire.accumulator()
        with _sdk_errors():
            endpoint = self._wire.endpoint(self._async_client)
            events = await endpoint.create(**self.params(request, stream=True))
            async with events:
                async for event in events:
                    if text := accumulator.add(event):
                        yield TextDelta(text=text)
        yield self._finished(accumulator, request)

    def _finished(self, accumulator: _Accumulator, request: Request) -> Response:
        response = accumulator.finish()
        if response is None:
            raise self._unterminated(request, empty=accumulator.events == 0)
        return self._checked(response, request)

    def _unterminated(self, request: Request, *, empty: bool) -> ProviderError:
        if empty:
            return incomplete_answer("the server sent an empty event stream (no answer, no error)")
        return incomplete_answer(
            "the event stream ended before its terminator (the answer is cut off)"
        )

    def _checked(self, response: Response, request: Request) -> Response:
        return response


class OpenAI(OpenAIBase):
    """OpenAI's API (or Azure OpenAI's v1 endpoint, via `base_url`).

    `api="chat"` (default) uses Chat Completions with `max_completion_tokens`; `api="responses"`
    uses the Responses API with `max_output_tokens`. The key comes from `api_key` or
    `OPENAI_API_KEY` (in `environ`, default `os.environ`); `base_url` from the argument or
    `OPENAI_BASE_URL`. `context_window`/`max_output_tokens` describe the model (None: unknown).
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

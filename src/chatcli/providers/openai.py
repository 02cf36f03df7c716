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
- Native compaction (Responses API, `OpenAI(..., native_compaction=NativeCompaction(...))`, for
  the models `supports_native_compaction` names): `context_management: [{"type": "compaction",
  "compact_threshold": N}]` on every request; the answer's encrypted `compaction` output item
  becomes the message's `CompactionPart` (kept verbatim) and is sent back first, in front of the
  message's other items. `OpenAI.aresponses_compact` is `POST /responses/compact`, the
  standalone compaction (the proxy passes a client's compact request to it).
- `Request.options` are passed to the SDK's `create` as they are, last (they win).
- Tool results have no error flag on this wire; `ToolResult.is_error` is not sent.
"""

from __future__ import annotations

import hashlib
import json
import json.scanner
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    contextmanager,
)
from dataclasses import dataclass, field, replace
from types import ModuleType
from typing import Any, Literal, Protocol

from chatcli.errors import ConfigError, ProviderError, classify_error
from chatcli.messages import CompactionPart, Message, Role, StopReason, TextPart, ToolCall, Usage
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
    NativeCompaction,
    Request,
    Response,
    StreamDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from chatcli.redact import redact_url
from chatcli.request_settings import JSON_MODE, TOOL_CHOICE_MODES

__all__ = [
    "COMPACTION_FAMILIES",
    "OpenAI",
    "OpenAIBase",
    "prompt_cache_key",
    "supports_native_compaction",
]

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
# Model families that take `context_management` compaction on the Responses API. The compaction
# guide (developers.openai.com/api/docs/guides/compaction) lists no models; Codex, its main user,
# enables it for the gpt-5 family and later: others are treated as unsupported (chatcli's own
# compaction then).
COMPACTION_FAMILIES = ("gpt-5", "gpt-6")
_COMPACTION_PROVIDER = "openai"


def supports_native_compaction(model: str) -> bool:
    """Whether `model` is of `COMPACTION_FAMILIES` (on the Responses API)."""
    return model.startswith(COMPACTION_FAMILIES)


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

    def add(self, chunk: Any) -> list[StreamDelta]:
        if not isinstance(getattr(chunk, "choices", None), list):
            raise _failure(f"a stream event that is not a JSON object with choices: {chunk!r:.200}")
        self.took(chunk.model, chunk.id)
        if getattr(chunk, "usage", None) is not None:
            self.usage = _chat_usage(chunk.usage)
        deltas: list[StreamDelta] = []
        for choice in chunk.choices:
            if choice.index == 0:  # chatcli asks for one choice; ignore any other
                deltas.extend(self._add_choice(choice))
        return deltas

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
        """What every chunk gives: the model and answer id."""
        self.events += 1
        self.model, self.answer_id = model or self.model, answer_id or self.answer_id

    def took_choice(self, content: Any, refusal: Any, finish_reason: Any) -> None:
        """What the first choice of every chunk gives: text (kept only when there is some:
        the parts are joined), refusal, finish reason."""
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
    part = message.compaction
    if part is not None and part.provider == _COMPACTION_PROVIDER:  # another's: unreadable
        items.insert(0, dict(part.provider_details))
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
    compaction: Json | None = None  # the latest compaction item, verbatim

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
        elif item.type == "compaction":
            self.compaction = item.model_dump(mode="json", exclude_none=True)

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
        compaction=_compaction_part(output.compaction, str(raw.model or "")),
    )
    usage = _responses_usage(raw.usage) if raw.usage is not None else Usage()
    return Response(
        message=message,
        stop_reason=_responses_stop(raw, output),
        usage=usage,
        model=raw.model,
        provider_details={"id": raw.id},
    )


def _compaction_part(item: Json | None, model: str) -> CompactionPart | None:
    if item is None or not item.get("encrypted_content"):
        return None
    return CompactionPart(provider=_COMPACTION_PROVIDER, model=model, provider_details=item)


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


_WIRES: dict[str, _Wire] = {
    "chat": _Wire(
        body=_chat_body,
        settings=_chat_settings,
        parse=chat_response,
        accumulator=_ChatAccumulator,
        endpoint=lambda client: client.chat.completions,
        max_tokens_param="max_completion_tokens",
        stream_params={"stream": True, "stream_options": {"include_usage": True}},
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

    def _send(self, client: Any, params: Json) -> Any:
        return self._wire.endpoint(client).create(**params)

    async def _asend(self, client: Any, params: Json) -> Any:
        return await self._wire.endpoint(client).create(**params)

    def _open(self, client: Any, params: Json) -> AbstractContextManager[Any]:
        events: AbstractContextManager[Any] = self._wire.endpoint(client).create(**params)
        return events

    async def _aopen(self, client: Any, params: Json) -> AbstractAsyncContextManager[Any]:
        events: AbstractAsyncContextManager[Any] = await self._wire.endpoint(client).create(
            **params
        )
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
        native_compaction: NativeCompaction | None = None,
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
        self.native_compaction = native_compaction

    @property
    def compaction_provider(self) -> str | None:
        """Whose compactions this adapter reads: OpenAI's, on the Responses API only."""
        return _COMPACTION_PROVIDER if self.api == "responses" else None

    def native_compaction_supported(self) -> bool:
        """Whether this model compacts on OpenAI's servers (the Responses API only)."""
        return self.api == "responses" and supports_native_compaction(self.model)

    async def aresponses_compact(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> tuple[Json, Usage]:
        """`POST /responses/compact` (the SDK's `responses.compact`) of `body`, a compact
        request's fields as the API names them, for this adapter's model: OpenAI's
        `CompactedResponse` as the JSON it sent (the user messages, then one encrypted
        `compaction` item), and its usage."""
        fields = {k: v for k, v in body.items() if k != "model"}
        with self._errors():
            raw = await self._aclient().responses.with_raw_response.compact(
                model=self.model, extra_body=fields, extra_headers=dict(headers or {})
            )
            compacted = raw.parse()
        return json.loads(raw.text), _responses_usage(compacted.usage)

    def _body_extra(self, request: Request) -> Json:
        extra = self._compaction_fields()
        given = request.settings.extra.keys() | request.options.keys()
        if not self._auto_cache_key or "prompt_cache_key" in given:
            return extra
        return {**extra, "prompt_cache_key": prompt_cache_key(request.messages)}

    def _compaction_fields(self) -> Json:
        native = self.native_compaction
        if native is None or self.api != "responses":
            return {}
        entry: Json = {"type": "compaction"}
        if native.trigger_tokens is not None:
            entry["compact_threshold"] = native.trigger_tokens
        return {"context_management": [entry]}

    def _checked(self, response: Response, request: Request) -> Response:
        """A compaction is tagged with the model this adapter asked for, as the Client's view
        matches it (the answer may name a dated snapshot)."""
        part = response.message.compaction
        model = request.model or self.model
        if part is None or part.model == model:
            return response
        message = replace(response.message, compaction=replace(part, model=model))
        return replace(response, message=message)

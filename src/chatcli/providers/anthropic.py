"""Adapter for Anthropic's Messages API, through the official `anthropic` SDK.

Install with `pip install 'chatcli-recovery[anthropic]'`; the SDK is imported when a provider
is built.

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

Settings (`Request.settings`, sent as `extra_body`, `settings.extra` on top): temperature,
top_p; stop -> `stop_sequences`; tool_choice -> `{"type": "auto" | "none" | "any"}` or
`{"type": "tool", "name": ...}`, parallel_tool_calls=False -> `disable_parallel_tool_use`;
response_format (a schema) -> `output_config.format` (structured outputs; "json" without a
schema is an error: the API has no such mode); reasoning_effort -> `output_config.effort`
(low to xhigh; "none"/"minimal" are errors); thinking_budget -> `thinking` (`enabled` with
`budget_tokens`, 0: `disabled`), counted inside `max_tokens` as the API counts it (see
`chatcli.request_settings.output_reserve`). `seed` does not exist here: dropped, logged.

Prompt caching: `cache_control` breakpoints at the end of the system prompt and of the latest
message (two of the four allowed; the next request reads the cached prefix up to either), on
its last block the API did not make (thinking and compaction blocks go back as they came), on
by default (`Anthropic(cache_control=None)` turns them off; a `ttl` may be given). A request
with `cache_prefix` (a compaction's summary request, which repeats the conversation's previous
request) has its second breakpoint at the end of that prefix, where the previous request had
it, so it reads the prefix that request wrote and writes nothing after it. Cache reads and
writes are reported in `Usage`. `count_tokens` is sent without breakpoints.

Mapping (wire -> neutral): stop reasons per `STOP_REASONS`; `model_context_window_exceeded`
is `StopReason.CONTEXT_WINDOW`, which the Client treats as an overflow; `compaction` (the
answer paused after compacting) is `StopReason.COMPACTION`. Usage keeps cache reads
and writes apart from `input_tokens`, as Anthropic reports them. A `tool_use` that the output
limit cut off (the last block of a `max_tokens` answer, or streamed JSON that does not parse)
is a `ToolCall` with `incomplete=True`.

Native compaction (`chatcli.providers.anthropic_compaction`) goes to the beta endpoint; its own
tokens (`usage.iterations` entries of type `compaction`, left out of the top-level usage) are
the Response's `compaction_usage`; `applied_edits` ride in its `provider_details`; compaction
on demand is described there too. One module because the Messages API's mapping, both ways,
whole and streamed, is one wire.

Errors are classified once, here. SDK-level retries are off: the Client retries classified
errors itself.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager, contextmanager
from typing import Any

from chatcli.continuation import DEFAULT_MAX_TOKENS
from chatcli.messages import Message, Role, StopReason, TextPart, ToolCall, Usage
from chatcli.providers._common import (
    api_key_from_env,
    drop_setting,
    incomplete_answer,
    model_limits,
    raise_classified,
    require_module,
    tool_settings_apply,
    transport_errors,
    unsupported,
)
from chatcli.providers.adapter import Adapter
from chatcli.providers.anthropic_compaction import (
    COMPACTION_PROVIDER,
    betas,
    compaction_block,
    compaction_part,
    context_edits,
    on_demand,
    on_demand_window,
    signed,
    supports_native_compaction,
)
from chatcli.providers.base import (
    Compacted,
    CompactionDelta,
    NativeCompaction,
    ReasoningDelta,
    Request,
    Response,
    StreamDelta,
    TextDelta,
    ToolCallDelta,
    ToolSpec,
)
from chatcli.redact import redact_url
from chatcli.request_settings import JSON_MODE, output_reserve

__all__ = [
    "CACHE_CONTROL",
    "DEFAULT_MAX_TOKENS",
    "STOP_REASONS",
    "Anthropic",
    "StreamFold",
    "compaction_usage",
    "request_params",
    "response_from_message",
    "settings_fields",
    "supports_native_compaction",
    "usage_from_wire",
    "wire_messages",
]

# What a cache breakpoint carries by default (a 5-minute cache).
CACHE_CONTROL: Mapping[str, Any] = {"type": "ephemeral"}

STOP_REASONS: Mapping[str, StopReason] = {
    "end_turn": StopReason.END_TURN,
    "max_tokens": StopReason.MAX_TOKENS,
    "tool_use": StopReason.TOOL_USE,
    "stop_sequence": StopReason.STOP_SEQUENCE,
    "refusal": StopReason.REFUSAL,
    "model_context_window_exceeded": StopReason.CONTEXT_WINDOW,
    "compaction": StopReason.COMPACTION,
}

_THINKING_TYPES = frozenset({"thinking", "redacted_thinking"})
# Blocks the API made and checks (signatures): sent back exactly as they came, no breakpoint.
_VERBATIM_TYPES = _THINKING_TYPES | {"compaction"}
_KEY_ENV = ("ANTHROPIC_API_KEY",)


class Anthropic(Adapter):
    """A model behind the Anthropic Messages API (a `StreamingProvider`).

    `api_key` defaults to `$ANTHROPIC_API_KEY` (or `environ`'s); it only reaches the SDK
    client and is never shown or logged. `base_url` points the SDK elsewhere (a proxy, a test
    server).
    `context_window` and `max_output_tokens` are the model's limits when known. With no
    `max_tokens` in a request, the one sent is `output_reserve`'s: the cap but no more than
    `DEFAULT_MAX_TOKENS`, plus any thinking budget, the same reserve recovery plans with.
    `cache_control` is put on the cache breakpoints (see the module docstring); None turns
    automatic prompt caching off, `{"type": "ephemeral", "ttl": "1h"}` caches for an hour.
    `native_compaction`: ask the API to compact on its servers (see the module docstring),
    whatever a request asks; None (the default): as the request asks
    (`Request.native_compaction`, which `Client` sets where the model supports it).
    """

    api_name = "Anthropic"
    compaction_provider = COMPACTION_PROVIDER  # the `CompactionPart.provider` it reads

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
        cache_control: Mapping[str, Any] | None = CACHE_CONTROL,
        native_compaction: NativeCompaction | None = None,
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
        self.cache_control = dict(cache_control) if cache_control is not None else None
        self.native_compaction = native_compaction
        self.context_window, self.max_output_tokens = model_limits(
            model, "anthropic", context_window, max_output_tokens
        )
        # A closure keeps the key out of reprs and vars().
        self.__connect: Callable[[str], Any] = lambda name: getattr(sdk, name)(**options)

    def __repr__(self) -> str:
        return f"Anthropic(model={self.model!r}, base_url={redact_url(self.base_url)!r})"

    def native_compaction_supported(self) -> bool:
        """Whether this model compacts on Anthropic's servers (`supports_native_compaction`)."""
        return supports_native_compaction(self.model)

    def params(self, request: Request, *, stream: bool = False) -> dict[str, Any]:
        return request_params(
            request,
            model=self.model,
            cap=self.max_output_tokens,
            cache_control=self.cache_control,
            native=self._native(request),
        )

    def _native(self, request: Request) -> NativeCompaction | None:
        """The native compaction `request` is sent with: the adapter's own, else the request's
        where the model supports it."""
        if self.native_compaction is not None or not self.native_compaction_supported():
            return self.native_compaction
        return request.native_compaction

    def compact_on_demand(self, request: Request) -> Compacted:
        """The conversation in `request` compacted now (`anthropic_compaction.on_demand`),
        streamed and folded when the SDK would refuse to wait for it whole (as `complete`)."""
        params = on_demand(request_params(request, model=self.model, cap=self.max_output_tokens))
        if self._streams_whole_answer(params):
            *_, response = self._events(request, params)
        else:
            with self._errors():
                response = self._parse(self._send(self._client(), params))
        assert isinstance(response, Response)  # a stream ends with its Response
        return on_demand_window(response, model=request.model or self.model)

    def count_tokens(self, messages: Sequence[Message]) -> int:
        """Anthropic's own count of the prompt `messages` make, system prompt included, from
        `messages.count_tokens`: exact, but a round trip (free, rate-limited); see
        `chatcli.providers.counting` for caching and the fallback to the estimate."""
        request = Request(messages=tuple(messages))
        native = self.native_compaction  # its blocks are read by the beta endpoint only
        if native is None and self.native_compaction_supported():
            native = NativeCompaction() if any(m.compaction for m in messages) else None
        params = request_params(
            request, model=self.model, cap=self.max_output_tokens, native=native
        )
        del params["max_tokens"]  # the one `create` argument that `count_tokens` does not take
        with _translated_errors():
            counted = _endpoint(self._client(), params).count_tokens(**params)
        return int(counted.input_tokens)

    def _new_client(self) -> Any:
        return self.__connect("Anthropic")

    def _new_async_client(self) -> Any:
        return self.__connect("AsyncAnthropic")

    def _errors(self) -> AbstractContextManager[None]:
        return _translated_errors()

    def _streams_whole_answer(self, params: dict[str, Any]) -> bool:
        return int(params["max_tokens"]) > NONSTREAMING_MAX_TOKENS

    def _send(self, client: Any, params: dict[str, Any]) -> Any:
        return _endpoint(client, params).create(**params)

    async def _asend(self, client: Any, params: dict[str, Any]) -> Any:
        return await _endpoint(client, params).create(**params)

    def _open(self, client: Any, params: dict[str, Any]) -> AbstractContextManager[Any]:
        events: AbstractContextManager[Any] = _endpoint(client, params).create(
            **params, stream=True
        )
        return events

    async def _aopen(self, client: Any, params: dict[str, Any]) -> AbstractAsyncContextManager[Any]:
        events: AbstractAsyncContextManager[Any] = await _endpoint(client, params).create(
            **params, stream=True
        )
        return events

    def _parse(self, raw: Any) -> Response:
        return response_from_message(_message_json(raw), model=self.model)

    def _fold(self) -> StreamFold:
        return StreamFold(model=self.model)


def _endpoint(client: Any, params: Mapping[str, Any]) -> Any:
    """The beta Messages endpoint for a request with beta flags (`betas`, or a caller's own
    `anthropic-beta` header: the proxy passes a client's on) or a caller's own
    `context_management` (only the beta types read the compaction blocks these bring back),
    else the plain one."""
    headers = {name.lower() for name in params.get("extra_headers", {})}
    beta = "betas" in params or "anthropic-beta" in headers
    return (
        client.beta.messages
        if beta or "context_management" in params.get("extra_body", {})
        else client.messages
    )


# The SDK refuses a non-streaming request it expects to take over 10 minutes (max_tokens above
# 128,000 * 600 / 3,600 when no timeout is set): such requests are streamed and folded instead,
# so escalating max_tokens to a model's real cap (64k for recent models) never hits that wall.
NONSTREAMING_MAX_TOKENS = 21_333


@contextmanager
def _translated_errors() -> Iterator[None]:
    """Turn SDK and transport failures into a classified ProviderError (chained)."""
    sdk = require_module("anthropic", "anthropic")
    try:
        yield
    except sdk.APIStatusError as exc:
        # An `error` event inside a stream arrives with the stream's 200: that is not the
        # error's status, so none is claimed.
        raise_classified(exc, status=None if exc.status_code == 200 else exc.status_code)
    except (sdk.APIError, *transport_errors()) as exc:  # the SDK's transport: mid-stream drops
        raise_classified(exc)


def _dump(obj: Any) -> dict[str, Any]:
    """An SDK model as its wire JSON (fields the server left out are absent)."""
    data: dict[str, Any] = obj.model_dump(mode="json", exclude_none=True)
    return data


def _sent(obj: Any) -> dict[str, Any]:
    """An SDK model as the JSON the server sent: every field it sent, nulls included."""
    data: dict[str, Any] = obj.model_dump(mode="json", exclude_unset=True)
    return data


def _event_json(event: Any) -> dict[str, Any]:
    """A stream event as its wire JSON, a content block's start and deltas as the server sent
    them (the blocks the API checks are kept exactly)."""
    if event.type in ("content_block_start", "content_block_delta"):
        return _sent(event)
    return _dump(event)


def _message_json(message: Any) -> dict[str, Any]:
    """A `Message` as its wire JSON, the blocks the API checks exactly as it sent them."""
    data = _dump(message)
    content = message.content or ()  # a body may leave it out
    blocks = [_sent(b) if b.type in _VERBATIM_TYPES else _dump(b) for b in content]
    return {**data, "content": blocks} if "content" in data else data


# -- neutral -> wire ----------------------------------------------------------------------


def request_params(
    request: Request,
    *,
    model: str,
    cap: int | None,
    cache_control: Mapping[str, Any] | None = None,
    native: NativeCompaction | None = None,
) -> dict[str, Any]:
    """Keyword arguments for `messages.create`; see the module docstring.

    `max_tokens` (which the API requires) is `output_reserve`'s when the request sets none.
    The settings' fields and `settings.extra` travel as `extra_body`: the SDK's signature
    varies between versions (recent ones have no `temperature` argument), the wire does not.
    `request.options` go into the body as they are, last.
    """
    settings = request.settings
    max_tokens = output_reserve(request.max_tokens, cap, settings)
    system, messages = _cached_wire(request.messages, cache_control, request.cache_prefix)
    params: dict[str, Any] = {
        "model": request.model or model,
        "max_tokens": max_tokens or DEFAULT_MAX_TOKENS + settings.output_reserve_extra,
        "messages": messages,
    }
    if system:
        params["system"] = system
    if request.tools:
        params["tools"] = [_wire_tool(tool) for tool in request.tools]
    extra = {**settings_fields(request), **settings.extra, **request.options}
    carried = any(signed(m) for m in request.messages)  # compacted on demand: no threshold edit
    if carried or native is not None:
        params["betas"] = betas(native, signed=carried)
    edits = context_edits(native, compact=not carried) if native is not None else []
    if edits:
        extra = {"context_management": {"edits": edits}, **extra}
    if extra:
        params["extra_body"] = extra
    return params


def settings_fields(request: Request) -> dict[str, Any]:
    """The Messages API fields for `request.settings`; see the module docstring."""
    settings = request.settings
    if settings.response_format == JSON_MODE:
        raise unsupported("Anthropic", "response_format", "no JSON mode without a schema: give one")
    if settings.reasoning_effort in ("none", "minimal"):
        raise unsupported(
            "Anthropic",
            "reasoning_effort",
            f"efforts are {sorted(_EFFORTS)}, not {settings.reasoning_effort!r}",
        )
    if settings.seed is not None:
        drop_setting("Anthropic", "seed", "the Messages API takes no seed")
    body: dict[str, Any] = {
        name: getattr(settings, name) for name in ("temperature", "top_p") if settings.is_set(name)
    }
    if settings.stop is not None:
        body["stop_sequences"] = list(settings.stop)
    if settings.thinking_budget is not None:
        budget = settings.thinking_budget
        body["thinking"] = (
            {"type": "enabled", "budget_tokens": budget} if budget else {"type": "disabled"}
        )
    output_config: dict[str, Any] = {}
    if settings.reasoning_effort is not None:
        output_config["effort"] = settings.reasoning_effort
    if isinstance(settings.response_format, Mapping):
        output_config["format"] = {"type": "json_schema", "schema": dict(settings.response_format)}
    if output_config:
        body["output_config"] = output_config
    if tool_settings_apply(request):
        body.update(_tool_choice(settings.tool_choice, settings.parallel_tool_calls))
    return body


_EFFORTS = frozenset({"low", "medium", "high", "xhigh"})
_TOOL_CHOICE_TYPES = {"auto": "auto", "none": "none", "required": "any"}


def _tool_choice(choice: str | None, parallel: bool | None) -> dict[str, Any]:
    if choice is None and parallel is None:
        return {}
    kind = _TOOL_CHOICE_TYPES.get(choice or "auto")
    wire: dict[str, Any] = {"type": kind} if kind else {"type": "tool", "name": choice}
    if parallel is not None and kind != "none":  # `none` takes no such flag
        wire["disable_parallel_tool_use"] = not parallel
    return {"tool_choice": wire}


def _cached_wire(
    messages: Sequence[Message], cache_control: Mapping[str, Any] | None, prefix: int | None
) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    """`wire_messages` with the cache breakpoints (see the module docstring): at the end of
    the system prompt and of the messages, or of their first `prefix` (`Request.cache_prefix`:
    the turns after it are joined on as they are, so the prefix's blocks stay in place)."""
    if cache_control is None:
        return wire_messages(messages)
    if prefix is None or not 0 < prefix < len(messages):
        system, turns = wire_messages(messages)
        _mark_breakpoints(system, turns, cache_control)
        return system, turns
    system, head = wire_messages(messages[:prefix])
    more, tail = wire_messages(messages[prefix:])
    system += more
    _mark_breakpoints(system, head, cache_control)
    if head and tail and head[-1]["role"] == tail[0]["role"]:
        head[-1]["content"].extend(tail.pop(0)["content"])
    return system, head + tail


def _mark_breakpoints(
    system: list[dict[str, Any]], messages: list[dict[str, Any]], cache_control: Mapping[str, Any]
) -> None:
    """Cache breakpoints at the end of the system prompt and of the latest message (two of the
    four the API allows): the next request of the conversation reads both prefixes."""
    if system:
        system[-1]["cache_control"] = dict(cache_control)
    if messages:
        blocks = [b for b in messages[-1]["content"] if b["type"] not in _VERBATIM_TYPES]
        if blocks:  # the provider's own blocks are sent back as they came
            blocks[-1]["cache_control"] = dict(cache_control)


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
    return [*compaction_block(message), *_thinking_blocks(message), *texts, *calls]


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
    message: Mapping[str, Any],
    *,
    unparsed: frozenset[int] = frozenset(),
    model: str | None = None,
) -> Response:
    """A Messages API `message` object as a Response.

    `unparsed` holds the content indexes of `tool_use` blocks whose streamed JSON did not
    parse (their input is `{}`); those calls are incomplete, like the last block of an answer
    stopped at `max_tokens`. A compaction is tagged with `model` (default: the answer's).
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
    usage = message.get("usage") or {}
    reply = Message(
        role=Role.ASSISTANT,
        parts=parts,
        tool_calls=calls,
        provider_details={"anthropic": {"thinking": thinking}} if thinking else None,
        compaction=compaction_part(blocks, model or message.get("model") or ""),
    )
    return Response(
        message=reply,
        stop_reason=STOP_REASONS.get(stop or "", StopReason.OTHER),
        usage=usage_from_wire(usage),
        model=message.get("model"),
        provider_details={"anthropic": _response_details(message)},
        compaction_usage=compaction_usage(usage),
    )


def compaction_usage(usage: Mapping[str, Any]) -> Usage | None:
    """The tokens of the `compaction` entries of `usage.iterations` (None: there are none)."""
    entries = [i for i in usage.get("iterations") or () if i.get("type") == "compaction"]
    return sum((usage_from_wire(entry) for entry in entries), Usage()) if entries else None


def _tool_call(block: Mapping[str, Any], *, incomplete: bool) -> ToolCall:
    arguments = block.get("input")
    return ToolCall(
        id=block["id"],
        name=block["name"],
        arguments=arguments if isinstance(arguments, dict) else {},
        incomplete=incomplete,
    )


def _response_details(message: Mapping[str, Any]) -> dict[str, Any]:
    keys = ("id", "stop_reason", "stop_sequence", "stop_details", "context_management")
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

    `feed` takes an event (an SDK object or its wire JSON) and returns the deltas it adds:
    answer text, the pieces of tool calls (`ToolCallDelta`, numbered among the calls) and of
    thinking blocks (`ReasoningDelta`, numbered among them), a compaction block whole and as
    it came once it stops (`CompactionDelta`);
    `finish` returns the Response, or raises a TRANSIENT ProviderError when the stream was
    empty or ended before `message_stop`. Unknown events and deltas are ignored, as the API
    asks.
    """

    def __init__(self, model: str | None = None) -> None:
        self.model = model  # what a compaction is tagged with (default: the answer's model)
        self.message: dict[str, Any] | None = None
        self.blocks: dict[int, dict[str, Any]] = {}
        self.json_parts: dict[int, list[str]] = {}
        self.calls: dict[int, int] = {}  # content index of a tool_use block -> call position
        self.reasoning: dict[int, int] = {}  # content index of a thinking block -> position
        self.stopped = False

    def feed(self, event: Any) -> list[StreamDelta]:
        event = event if isinstance(event, Mapping) else _event_json(event)
        kind = event.get("type")
        if kind == "message_start":
            self.message = dict(event.get("message") or {})
        elif kind == "content_block_start":
            return self._start_block(event["index"], dict(event.get("content_block") or {}))
        elif kind == "content_block_delta":
            return self._apply_delta(event["index"], event.get("delta") or {})
        elif kind == "content_block_stop":
            return self._stop_block(event["index"])
        elif kind == "message_delta":
            self._apply_message_delta(event)
        elif kind == "message_stop":
            self.stopped = True
        return []

    def _start_block(self, index: int, block: dict[str, Any]) -> list[StreamDelta]:
        self.blocks[index] = block
        if block.get("type") in _THINKING_TYPES:
            position = self.reasoning.setdefault(index, len(self.reasoning))
            return [ReasoningDelta(index=position, block=dict(block))]
        if block.get("type") != "tool_use":
            return []
        position = self.calls.setdefault(index, len(self.calls))
        return [ToolCallDelta(index=position, id=block.get("id"), name=block.get("name"))]

    def _apply_delta(self, index: int, delta: Mapping[str, Any]) -> list[StreamDelta]:
        block = self.blocks.setdefault(index, {})
        kind = delta.get("type")
        if kind == "text_delta":
            block["text"] = block.get("text", "") + delta["text"]
            return [TextDelta(text=str(delta["text"]))] if delta["text"] else []
        if kind == "input_json_delta":
            partial = delta.get("partial_json", "")
            self.json_parts.setdefault(index, []).append(partial)
            position = self.calls.setdefault(index, len(self.calls))
            return [ToolCallDelta(index=position, arguments=partial)] if partial else []
        if kind == "thinking_delta":
            block["thinking"] = block.get("thinking", "") + delta["thinking"]
            position = self.reasoning.setdefault(index, len(self.reasoning))
            return [ReasoningDelta(index=position, thinking=str(delta["thinking"]))]
        if kind == "signature_delta":
            block["signature"] = delta["signature"]
            if block.get("type") not in _THINKING_TYPES:
                return []
            position = self.reasoning.setdefault(index, len(self.reasoning))
            return [ReasoningDelta(index=position, signature=str(delta["signature"]))]
        if kind == "compaction_delta":  # the whole summary in one delta, as the SDK folds it
            block.update({k: delta[k] for k in ("content", "encrypted_content") if k in delta})
        return []

    def _stop_block(self, index: int) -> list[StreamDelta]:
        """A finished compaction block, whole and verbatim, where it came in the answer."""
        block = self.blocks.get(index) or {}
        if block.get("type") != "compaction":
            return []
        model = self.model or (self.message or {}).get("model") or ""
        part = compaction_part([block], model)
        return [] if part is None else [CompactionDelta(part=part)]

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
        return response_from_message(
            {**self.message, "content": content}, unparsed=unparsed, model=self.model
        )

    def _parse_input(self, index: int) -> bool:
        text = "".join(self.json_parts[index])
        try:
            self.blocks[index]["input"] = json.loads(text) if text else {}
        except json.JSONDecodeError:
            self.blocks[index]["input"] = {}
            return False
        return True

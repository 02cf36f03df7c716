"""The OpenAI adapters: `OpenAIBase`, the driver both wires share, and `OpenAI`, OpenAI's own
API on either wire.

The driver builds the wire body, calls the SDK, translates the answer and lets `_sdk_errors`
classify the SDK's exceptions. The SDK client is built with `max_retries=0` because chatcli's
`Client` retries by itself, per error kind. The settings' fields go in `extra_body` (every SDK
version sends them), `settings.extra` on top; `Request.options` are passed to the SDK's
`create` as they are, last (they win).

A Chat Completions stream is read through the SDK's streaming response and its own SSE
stream typed `object`, so each event is the server's JSON, folded as it is: a typed chunk
built for every event (a token, on most servers) would cost more than the rest of the call.

Prompt caching: `OpenAI` sends a `prompt_cache_key` derived from the conversation's stable
beginning (`prompt_cache_key()`), unless the caller set one (in `settings.extra` or `options`)
or built the adapter with `prompt_cache_key=False`.
"""

from __future__ import annotations

import hashlib
import json
import os
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Iterator, Mapping, Sequence
from contextlib import (
    AbstractAsyncContextManager,
    AbstractContextManager,
    asynccontextmanager,
    contextmanager,
)
from dataclasses import dataclass, replace
from typing import Any, Literal, Protocol

from chatcli.errors import ConfigError, ProviderError
from chatcli.messages import Message, Role, Usage
from chatcli.providers._common import api_key_from_env, incomplete_answer, model_limits
from chatcli.providers.adapter import Adapter
from chatcli.providers.base import Compacted, NativeCompaction, Request, Response, StreamDelta
from chatcli.providers.openai.chat import (
    _chat_body,
    _chat_settings,
    _ChatAccumulator,
    chat_response,
)
from chatcli.providers.openai.common import Json, _sdk, _sdk_errors
from chatcli.providers.openai.responses import (
    _COMPACTION_PROVIDER,
    _compaction_fields,
    _responses_body,
    _responses_settings,
    _responses_usage,
    _ResponsesAccumulator,
    compacted_window,
    responses_input,
    responses_response,
    sent_item,
    supports_native_compaction,
)
from chatcli.redact import redact_url

Api = Literal["chat", "responses"]
# Models that take no JSON schema as their answer's format (OpenAI's structured outputs came
# with GPT-4o).
_NO_SCHEMA_PREFIXES = ("gpt-3.5", "gpt-4-")


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
    # Its stream's events as the server's JSON (the SDK's raw streaming response decoded by
    # its own SSE stream, as `object`), not a typed model built per event.
    raw_events: bool = False


_WIRES: dict[str, _Wire] = {
    "chat": _Wire(
        body=_chat_body,
        settings=_chat_settings,
        parse=chat_response,
        accumulator=_ChatAccumulator,
        endpoint=lambda client: client.chat.completions,
        max_tokens_param="max_completion_tokens",
        stream_params={"stream": True, "stream_options": {"include_usage": True}},
        raw_events=True,
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
    # A Chat Completions stream read as the server's JSON (see the module docstring); an
    # adapter on a caller's own SDK client (`chatcli.wrap`) reads the SDK's typed events,
    # which it hands on to the caller.
    raw_stream_events = True

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
        endpoint = self._wire.endpoint(client)
        if self._wire.raw_events and self.raw_stream_events:
            return _raw_events(endpoint, params)
        events: AbstractContextManager[Any] = endpoint.create(**params)
        return events

    async def _aopen(self, client: Any, params: Json) -> AbstractAsyncContextManager[Any]:
        endpoint = self._wire.endpoint(client)
        if self._wire.raw_events and self.raw_stream_events:
            return _araw_events(endpoint, params)
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


@contextmanager
def _raw_events(endpoint: Any, params: Json) -> Iterator[Any]:
    """The events of a streamed `create` as the JSON objects the server sent: the SDK's
    streaming response (`with_streaming_response`), read by its own SSE stream (`Stream`)
    typed `object`, which hands each event's JSON on as it is (in-stream errors raised as
    the SDK raises them)."""
    with endpoint.with_streaming_response.create(**params) as response:
        yield response.parse(to=_sdk().Stream[object])


@asynccontextmanager
async def _araw_events(endpoint: Any, params: Json) -> AsyncIterator[Any]:
    """The async `_raw_events`."""
    async with endpoint.with_streaming_response.create(**params) as response:
        yield await response.parse(to=_sdk().AsyncStream[object])


class OpenAI(OpenAIBase):
    """OpenAI's API (or Azure OpenAI's v1 endpoint, via `base_url`).

    `api="chat"` (default) uses Chat Completions with `max_completion_tokens`; `api="responses"`
    uses the Responses API with `max_output_tokens`. The key comes from `api_key` or
    `OPENAI_API_KEY` (in `environ`, default `os.environ`); `base_url` from the argument or
    `OPENAI_BASE_URL`. `context_window`/`max_output_tokens` describe the model (None: unknown).
    `prompt_cache_key=False` stops the automatic per-conversation cache key.
    `native_compaction`: ask the Responses API to compact on OpenAI's servers whatever a
    request asks; None (the default): as the request asks (`Request.native_compaction`, which
    `Client` sets where the model supports it).
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

    def structured_output_supported(self) -> bool:
        """Whether this model takes a JSON schema as its answer's format (structured outputs:
        every current model; not GPT-3.5 and the GPT-4 models before GPT-4o)."""
        return not (self.model == "gpt-4" or self.model.startswith(_NO_SCHEMA_PREFIXES))

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

    async def aresponses_forward(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> Json:
        """`POST /responses` of `body`, a request as a client sent it (a `compaction_trigger`
        one: the proxy forwards it), for this adapter's model: the `Response` as the JSON
        OpenAI sent."""
        with self._errors():
            raw = await self._aclient().responses.with_raw_response.create(
                **_forwarded(self.model, body, headers)
            )
        answer: Json = json.loads(raw.text)
        return answer

    async def aresponses_forward_events(
        self, body: Mapping[str, Any], *, headers: Mapping[str, str] | None = None
    ) -> AsyncGenerator[Json, None]:
        """`aresponses_forward` streamed: each event as the JSON OpenAI sent, in its order."""
        with self._errors():
            events = await self._aclient().responses.create(
                **_forwarded(self.model, body, headers), stream=True
            )
            async with events:
                async for event in events:
                    yield sent_item(event)

    def compact_on_demand(self, request: Request) -> Compacted:
        """The conversation in `request` compacted now by `POST /responses/compact` (the
        Responses API's standalone compaction): the window its output makes
        (`compacted_window`)."""
        model = request.model or self.model
        with self._errors():
            raw = self._client().responses.with_raw_response.compact(
                model=model, input=responses_input(request.messages)
            )
            usage = _responses_usage(raw.parse().usage)
        return compacted_window(json.loads(raw.text), usage, model)

    def _body_extra(self, request: Request) -> Json:
        native = self._native(request)
        extra = _compaction_fields(native) if native is not None else {}
        given = request.settings.extra.keys() | request.options.keys()
        if not self._auto_cache_key or "prompt_cache_key" in given:
            return extra
        return {**extra, "prompt_cache_key": prompt_cache_key(request.messages)}

    def _native(self, request: Request) -> NativeCompaction | None:
        """The native compaction `request` is sent with (the Responses API only): the
        adapter's own, else the request's where the model supports it."""
        if self.api != "responses" or self.native_compaction is not None:
            return self.native_compaction if self.api == "responses" else None
        return request.native_compaction if supports_native_compaction(self.model) else None

    def _checked(self, response: Response, request: Request) -> Response:
        """A compaction is tagged with the model this adapter asked for, as the Client's view
        matches it (the answer may name a dated snapshot)."""
        part = response.message.compaction
        model = request.model or self.model
        if part is None or part.model == model:
            return response
        message = replace(response.message, compaction=replace(part, model=model))
        return replace(response, message=message)


def _forwarded(model: str, body: Mapping[str, Any], headers: Mapping[str, str] | None) -> Json:
    """The SDK's `responses.create` arguments sending `body` as it is, for `model`."""
    fields = {k: v for k, v in body.items() if k not in ("model", "stream")}
    return {"model": model, "extra_body": fields, "extra_headers": dict(headers or {})}


def prompt_cache_key(messages: Sequence[Message]) -> str:
    """A key that names a conversation by its stable beginning: the first system message and
    the first user message (what every request of the conversation starts with, even after a
    recovery cut adds a notice), so requests of one conversation go to the same cache machine
    and different conversations spread out."""
    system = next((m.text for m in messages if m.role is Role.SYSTEM), "")
    first_user = next((m.text for m in messages if m.role is Role.USER), "")
    digest = hashlib.sha256(json.dumps([system, first_user]).encode()).hexdigest()
    return "chatcli-" + digest[:32]

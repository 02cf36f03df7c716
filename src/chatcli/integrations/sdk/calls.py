"""One wrapped method (`create`, sync or async): the caller's call, recovered by `Client`.

Every call goes through a `Client` over the caller's own SDK client (`chatcli.integrations.
sdk.upstream`), with `max_retries=0` (the SDK retries transient errors on its own schedule)
and no microcompaction (the caller owns its history; only recovery shapes what is sent). So
the pre-flight (when the window is declared, in the catalog, or learned from an earlier
overflow), the recovery levels, max_tokens escalation and continuation are the library's.
When nothing needs recovery, the SDK is called with the caller's arguments as they are and
its own answer object is returned; otherwise the answer is written by the wire dialect
(`reply`) and validated into the SDK's own type.

Errors: an SDK error recovery does not handle (authentication, rate limits, ...) is raised
as the SDK raised it; a conversation that cannot be made to fit raises
`chatcli.ContextRecoveryError` (the classified overflow chained, and the SDK's error to it).
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import AsyncIterator, Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.errors import ProviderError
from chatcli.events import Hook
from chatcli.integrations.sdk.chunks import Chunks
from chatcli.integrations.sdk.upstream import STREAM_ARGS, SdkCall
from chatcli.messages import Message
from chatcli.providers.base import Provider, Request, Response, StreamChunk, TextDelta
from chatcli.providers.counting import default_estimator
from chatcli.providers.openai import responses_input
from chatcli.recovery import Client, Reply
from chatcli.tokens.estimate import TokenEstimator
from chatcli.wire.dialect import ClientRequest, RequestError
from chatcli.wire.forwarding import Forwarder, Upstream, plan

__all__ = [
    "AsyncRecovering",
    "AsyncRecoveringStream",
    "Endpoint",
    "Options",
    "Recovering",
    "RecoveringStream",
    "Speaks",
    "omitted",
    "plain",
]

logger = logging.getLogger("chatcli.integrations.sdk")

Json = dict[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class Options:
    """What `chatcli.wrap` was given; `learned_windows` and `estimators` are shared by the
    wrapper's calls."""

    config: RecoveryConfig | None = None
    context_window: int | None = None
    max_output_tokens: int | None = None
    hooks: tuple[Hook, ...] = ()
    microcompact: MicrocompactConfig | None = None
    learned_windows: dict[str, int] = field(default_factory=dict)
    # By model: a calibrated estimate learns its margin from every call, so it is kept.
    estimators: dict[str, TokenEstimator] = field(default_factory=dict)


class Speaks(Protocol):
    """What the wrapper needs of a dialect: the arguments in, the Reply out."""

    name: str

    def parse(self, body: Json) -> ClientRequest: ...

    def reply(self, request: ClientRequest, reply: Reply, *, model: str) -> Json: ...


def plain(kwargs: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments as the Forwarder writes them: all but the stream arguments."""
    return {k: v for k, v in kwargs.items() if k not in STREAM_ARGS}


@dataclass(frozen=True, slots=True, kw_only=True)
class Endpoint:
    """What one SDK method needs: its dialect, its adapter, its types."""

    name: str
    dialect: Speaks
    default_max_tokens_arg: str
    stream_args: tuple[str, ...]
    provider: Callable[[Any, SdkCall, Options], Provider]
    answer: Callable[[Json], Any]  # the whole answer's wire JSON -> the SDK's type
    event: Callable[[Json], Any]  # a stream event's wire JSON -> the SDK's type
    chunks: Callable[[ClientRequest, str], Chunks]
    canonical: Callable[[Mapping[str, Any]], Mapping[str, Any]] = plain

    def max_tokens_arg(self, kwargs: Mapping[str, Any]) -> str:
        for name in ("max_completion_tokens", "max_tokens", "max_output_tokens"):
            if name in kwargs:
                return name
        return self.default_max_tokens_arg


class _Forwarder(Forwarder):
    """`chatcli.wire`'s Forwarder, named after the model (learned windows are kept by model)."""

    def __init__(self, upstream: Upstream, request: ClientRequest) -> None:
        super().__init__(upstream, request, plan(request, upstream.dialect))
        self.model = upstream.model
        self.instructions = request.messages[0] if request.origins[:1] == (None,) else None

    def verbatim(self, view: Sequence[Message]) -> Json:
        """The Responses API's fields (see `chatcli.wire.responses`): `input`,
        from the raw turns where recovery left them whole; `instructions` goes as given."""
        if self.dialect != "responses":
            return super().verbatim(view)
        out: Json = {}
        if self.request.raw_tools is not None:
            out["tools"] = self.request.raw_tools
        if self.request.raw_system is not None:
            out["instructions"] = self.request.raw_system
        turns = [m for m in view if m is not self.instructions]
        items: list[Any] = []
        for written in self.raw_messages(turns):
            items.extend(written if isinstance(written, list) else [written])
        out["input"] = items
        return out

    def written(self, messages: Sequence[Message]) -> list[Json]:
        if self.dialect == "responses":  # typed messages: llama-server needs the type
            return [
                {"type": "message", **i} if "role" in i else i for i in responses_input(messages)
            ]
        return super().written(messages)

    def stream(self, request: Request) -> Iterator[StreamChunk]:
        """The sync `astream` (the proxy only streams async)."""
        shaped = self.shaped(request)
        for chunk in self.inner.stream(shaped):  # type: ignore[attr-defined]
            yield self.checked(chunk, request) if isinstance(chunk, Response) else chunk


class Recovering:
    """A wrapped `create` (see the module docstring); `original` is the SDK's own."""

    def __init__(
        self, endpoint: Endpoint, sdk_client: Any, original: Callable[..., Any], options: Options
    ) -> None:
        self.endpoint, self.sdk_client, self.original = endpoint, sdk_client, original
        self.options = options

    def __call__(self, **kwargs: Any) -> Any:
        prepared = self.prepare(kwargs)
        if prepared is None:
            return self.original(**kwargs)
        call, client = prepared
        if kwargs.get("stream"):
            return RecoveringStream(self.stream(call, client))
        with self.translated(client):
            reply = client.send(call.parsed.messages, **self.send_args(call))
        return self.whole(call, reply)

    def stream(self, call: SdkCall, client: Client) -> Iterator[Any]:
        chunks = self.endpoint.chunks(call.parsed, str(call.kwargs["model"]))
        with self.translated(client):
            items = client.stream(call.parsed.messages, **self.send_args(call))
            try:
                for item in items:
                    yield from self.events(call, chunks, item)
            finally:  # closing it closes the SDK's stream (the caller stopped reading)
                getattr(items, "close", lambda: None)()

    def prepare(self, kwargs: Mapping[str, Any]) -> tuple[SdkCall, Client] | None:
        """The call and the Client that sends it; None when the arguments are not a request
        chatcli can read (the SDK is then called as it is, and says what is wrong)."""
        given = {k: v for k, v in kwargs.items() if not omitted(v)}
        if "messages" in given and not isinstance(given["messages"], list):
            given["messages"] = list(given["messages"])
        try:
            parsed = self.endpoint.dialect.parse(given)
        except (RequestError, TypeError, AttributeError) as exc:
            logger.debug("%s: not recovered (%s)", self.endpoint.name, exc)
            return None
        call = SdkCall(
            kwargs=given,
            canonical=self.endpoint.canonical(given),
            parsed=parsed,
            max_tokens_arg=self.endpoint.max_tokens_arg(given),
            stream_args={k: given[k] for k in self.endpoint.stream_args if k in given},
        )
        provider = self.endpoint.provider(self.sdk_client, call, self.options)
        model = str(given.get("model") or "")
        upstream = Upstream(
            provider=provider, name=self.endpoint.name, model=model, dialect=parsed.dialect
        )
        forwarder = _Forwarder(upstream, parsed)
        estimator = self.options.estimators.get(model) or default_estimator(forwarder)
        self.options.estimators[model] = estimator
        client = Client(
            forwarder,
            self.options.config,
            estimator=estimator,
            hooks=self.options.hooks,
            max_retries=0,
            microcompact=self.options.microcompact,
            learned_windows=self.options.learned_windows,
            context_window=self.options.context_window,
        )
        return call, client

    @staticmethod
    def send_args(call: SdkCall) -> dict[str, Any]:
        return {"max_tokens": call.parsed.max_tokens, "tools": call.parsed.tools}

    def whole(self, call: SdkCall, reply: Reply) -> Any:
        if call.answer is not None and call.calls == 1:
            return call.answer  # the caller's own call, answered in full
        model = str(call.kwargs["model"])
        return self.endpoint.answer(self.endpoint.dialect.reply(call.parsed, reply, model=model))

    def events(self, call: SdkCall, chunks: Chunks, item: object) -> list[Any]:
        """The SDK events to give the caller after one item of `Client.stream`."""
        out = [event for raw in call.take_events() for event in chunks.passed(raw)]
        if isinstance(item, TextDelta) and not call.verbatim:
            out.extend(chunks.text(item.text))
        elif isinstance(item, Reply):
            out.extend(chunks.ending(item, whole=call.verbatim and call.calls == 1))
        return [self.endpoint.event(e) if isinstance(e, dict) else e for e in out]

    @contextlib.contextmanager
    def translated(self, client: Client) -> Iterator[None]:
        """The SDK's own exception for a provider error recovery did not handle; the
        window `client` learned is kept for the wrapper's next calls."""
        try:
            yield
        except ProviderError as exc:
            if isinstance(exc.__cause__, Exception):
                raise exc.__cause__ from None
            raise
        finally:
            self.options.learned_windows.update(client.learned_windows)


class AsyncRecovering(Recovering):
    """The async wrapped `create`."""

    async def __call__(self, **kwargs: Any) -> Any:
        prepared = self.prepare(kwargs)
        if prepared is None:
            return await self.original(**kwargs)
        call, client = prepared
        if kwargs.get("stream"):
            return await AsyncRecoveringStream.opened(self.astream(call, client))
        with self.translated(client):
            reply = await client.asend(call.parsed.messages, **self.send_args(call))
        return self.whole(call, reply)

    async def astream(self, call: SdkCall, client: Client) -> AsyncIterator[Any]:
        chunks = self.endpoint.chunks(call.parsed, str(call.kwargs["model"]))
        with self.translated(client):
            items = client.astream(call.parsed.messages, **self.send_args(call))
            try:
                async for item in items:
                    for event in self.events(call, chunks, item):
                        yield event
            finally:  # closing it closes the SDK's stream (the caller stopped reading)
                aclose = getattr(items, "aclose", None)
                if aclose is not None:
                    await aclose()


class RecoveringStream:
    """What a wrapped `create(..., stream=True)` returns: the SDK's events, as its `Stream`
    gives them (iterate it, use it as a context manager, `close()` it). The request is sent
    when it is made, so an error is raised by `create`, as the SDK's is."""

    def __init__(self, events: Iterator[Any]) -> None:
        self._events = events
        self._first: list[Any] = []
        for event in events:
            self._first.append(event)
            break

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._first:
            return self._first.pop()
        return next(self._events)

    def close(self) -> None:
        close = getattr(self._events, "close", None)
        if close is not None:
            close()

    def __enter__(self) -> RecoveringStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


class AsyncRecoveringStream:
    """The async `RecoveringStream` (`async for`, `async with`, `await close()`)."""

    def __init__(self, events: AsyncIterator[Any]) -> None:
        self._events = events
        self._first: list[Any] = []

    @classmethod
    async def opened(cls, events: AsyncIterator[Any]) -> AsyncRecoveringStream:
        stream = cls(events)
        async for event in events:
            stream._first.append(event)
            break
        return stream

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    async def __anext__(self) -> Any:
        if self._first:
            return self._first.pop()
        return await self._events.__anext__()

    async def close(self) -> None:
        aclose = getattr(self._events, "aclose", None)
        if aclose is not None:
            await aclose()

    async def __aenter__(self) -> AsyncRecoveringStream:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


def omitted(value: object) -> bool:
    """The SDKs' "not given" sentinels (`NOT_GIVEN`, `omit`): the SDK leaves such an argument
    out of the body, so chatcli reads the request without it."""
    return type(value).__name__ in ("NotGiven", "Omit")

"""The one adapter shape: the four entry points and the SDK clients' lifetime, written once.

An SDK-backed adapter (OpenAI, OpenAI-compatible, Anthropic, Gemini) subclasses `Adapter` and
supplies only what differs between wires: building the SDK call's arguments (`params`),
calling the SDK (`_send` / `_asend`, `_open` / `_aopen` for a stream), translating the SDK's
exceptions (`_errors`), parsing a whole answer (`_parse`) and folding a stream (`_fold`).
`complete`, `acomplete`, `stream` and `astream` are here, and nowhere else.

One SDK client per adapter instance, built on first use and reused for every call, so calls
share the SDK's connection pool (no new connection and TLS handshake per call); `close()` /
`aclose()` or the context manager (`with` / `async with`) release it. An async SDK client is
tied to the event loop it first ran in (its pooled connections are), so a call from another
loop (a second `asyncio.run`) gets a client of its own.
"""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import AsyncIterator, Iterator, Sequence
from contextlib import AbstractAsyncContextManager, AbstractContextManager
from types import TracebackType
from typing import Any, Protocol, Self

from chatcli.providers.base import Request, Response, StreamChunk, StreamDelta

__all__ = ["Adapter", "Fold"]

Json = dict[str, Any]


class Fold(Protocol):
    """Folds one answer's stream events into deltas as they come and the Response at the end.

    `finish` raises a TRANSIENT ProviderError when the stream was empty or ended before its
    terminator (never a silent empty answer)."""

    def feed(self, event: Any) -> Sequence[StreamDelta]: ...

    def finish(self) -> Response: ...


class Adapter(ABC):
    """The shared driver of the SDK-backed adapters; see the module docstring."""

    model: str
    context_window: int | None
    max_output_tokens: int | None

    _sync_client: Any = None
    _async_client: Any = None
    _async_loop: asyncio.AbstractEventLoop | None = None

    # -- supplied by each adapter ---------------------------------------------------------

    @abstractmethod
    def params(self, request: Request, *, stream: bool = False) -> Json:
        """The keyword arguments of the SDK call for `request`."""

    @abstractmethod
    def _new_client(self) -> Any: ...

    @abstractmethod
    def _new_async_client(self) -> Any: ...

    @abstractmethod
    def _errors(self) -> AbstractContextManager[None]:
        """Translates the SDK's exceptions into a classified ProviderError (chained)."""

    @abstractmethod
    def _send(self, client: Any, params: Json) -> Any: ...

    @abstractmethod
    async def _asend(self, client: Any, params: Json) -> Any: ...

    @abstractmethod
    def _open(self, client: Any, params: Json) -> AbstractContextManager[Any]:
        """The SDK's event stream, closed (the call stopped) when the block exits."""

    @abstractmethod
    async def _aopen(self, client: Any, params: Json) -> AbstractAsyncContextManager[Any]: ...

    @abstractmethod
    def _parse(self, raw: Any) -> Response: ...

    @abstractmethod
    def _fold(self) -> Fold: ...

    def _checked(self, response: Response, request: Request) -> Response:
        """Inspects a finished answer (whole or streamed); may raise or adjust it."""
        return response

    def _streams_whole_answer(self, params: Json) -> bool:
        """True when a whole answer must be fetched as a stream (and folded)."""
        return False

    def _close(self, client: Any) -> None:
        client.close()

    async def _aclose(self, client: Any) -> None:
        await client.close()

    # -- the four entry points ------------------------------------------------------------

    def complete(self, request: Request) -> Response:
        params = self._params(request)
        if self._streams_whole_answer(params):
            return _last(self.stream(request))
        with self._errors():
            raw = self._send(self._client(), params)
        return self._checked(self._parse(raw), request)

    async def acomplete(self, request: Request) -> Response:
        params = self._params(request)
        if self._streams_whole_answer(params):
            return _last([chunk async for chunk in self.astream(request)])
        with self._errors():
            raw = await self._asend(self._aclient(), params)
        return self._checked(self._parse(raw), request)

    def stream(self, request: Request) -> Iterator[StreamChunk]:
        yield from self._events(request, self._params(request, stream=True))

    def _events(self, request: Request, params: Json) -> Iterator[StreamChunk]:
        """The stream of the call `params` (as `params(request, stream=True)` makes them)."""
        fold = self._fold()
        with self._errors(), self._open(self._client(), params) as events:
            for event in events:  # leaving early (the caller closed us) closes the SDK stream
                yield from fold.feed(event)
        yield self._checked(fold.finish(), request)

    async def astream(self, request: Request) -> AsyncIterator[StreamChunk]:
        fold = self._fold()
        with self._errors():
            params = self._params(request, stream=True)
            async with await self._aopen(self._aclient(), params) as events:
                async for event in events:
                    for delta in fold.feed(event):
                        yield delta
        yield self._checked(fold.finish(), request)

    def _params(self, request: Request, *, stream: bool = False) -> Json:
        """`params`, with the request's headers (`Request.headers`) when it has any."""
        params = self.params(request, stream=stream)
        if request.headers:
            params["extra_headers"] = {**params.get("extra_headers", {}), **request.headers}
        return params

    # -- the SDK clients ------------------------------------------------------------------

    def _client(self) -> Any:
        if self._sync_client is None:
            self._sync_client = self._new_client()
        return self._sync_client

    def _aclient(self) -> Any:
        loop = asyncio.get_running_loop()
        if self._async_client is None or self._async_loop is not loop:
            # The old client's connections belong to a loop that has ended: nothing to close.
            self._async_client, self._async_loop = self._new_async_client(), loop
        return self._async_client

    def close(self) -> None:
        """Release the sync SDK client's connections (if it was ever used)."""
        client, self._sync_client = self._sync_client, None
        if client is not None:
            self._close(client)

    async def aclose(self) -> None:
        """Release both SDK clients' connections (those that were used)."""
        self.close()
        client, self._async_client = self._async_client, None
        if client is not None and self._async_loop is asyncio.get_running_loop():
            await self._aclose(client)

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    async def __aenter__(self) -> Self:
        return self

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()


def _last(chunks: Iterator[StreamChunk] | Sequence[StreamChunk]) -> Response:
    """The Response that ends a stream (the deltas before it are folded into it)."""
    response = None
    for chunk in chunks:
        response = chunk
    assert isinstance(response, Response)  # a stream ends with exactly one Response
    return response

"""The proxy's ASGI app (Starlette): the routes, and one request from body to answer.

Routes: `POST /v1/chat/completions`, `POST /v1/responses` and `POST /v1/responses/compact`
(OpenAI; compaction: `chatcli.proxy.compaction_routes`), `POST /v1/messages` and
`POST /v1/messages/count_tokens` (Anthropic), `GET /v1/models`, `GET /healthz`,
`GET /metrics`. With client keys configured, every route but `GET /healthz` needs one
(`_KeyRequired`, a middleware in front of the routing, so a route added later is behind the
key too); `GET /metrics` is opened by `ProxyOptions.public_metrics`.

Each chat request is parsed by its dialect, sent through a `Client` built for it
(microcompaction, budget, pre-flight, recovery levels, escalation and continuation: all of
the library), over a `Forwarder` (what the client's request adds); a streamed request is
`Client.astream`, written as it comes (`chatcli.wire.items`). The client's messages are only
read: the proxy shapes what it forwards, never what the client holds.

With a `SessionRecorder` (`ProxyOptions.sessions`; `chatcli.proxy.sessions`), each request is
recorded in the session store before the end of its answer is sent, and a window another
replica learned pre-flights the request. A conversation a recovery level cut starts its next
requests from that cut (`Proxy.cuts`, a `StickyViews`: in memory, and with a recorder in
the store every replica reads), so the upstream's prompt cache keeps the cut prefix.

`Client` is built with `max_retries=0`: a rate limit or a transient upstream error goes back
to the client at once (with `Retry-After`), whose SDK retries on its own schedule, instead
of holding the connection while the proxy waits. One exception
(`chatcli.policy.retry.never_answered`): a request no upstream answered at all, on a
kept-alive connection it closed as the proxy reused it, is sent again at once, once: a
continuation in the middle of a stream has no one else to retry it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import time
from collections.abc import AsyncIterable, AsyncIterator, Awaitable, Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from starlette.applications import Starlette
from starlette.datastructures import Headers
from starlette.middleware import Middleware
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response, StreamingResponse
from starlette.routing import Route
from starlette.types import ASGIApp, Receive, Scope, Send

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.events import Event
from chatcli.history.scan import ScanMemos
from chatcli.history.sticky import StickyView
from chatcli.policy.prediction import tool_definitions
from chatcli.providers.base import Provider
from chatcli.providers.counting import PreflightCounts, counter_for, prompt_tokens
from chatcli.proxy.compaction_routes import CompactionRoutes
from chatcli.proxy.failures import failure_from
from chatcli.proxy.guard import Guard
from chatcli.proxy.keys import SealingConfig, SealingKeys
from chatcli.proxy.metrics import Metrics
from chatcli.proxy.sessions import ProxyRecord, SessionRecorder, StickyViews, session_key
from chatcli.recovery import Client, Reply
from chatcli.tokens.estimate import TokenEstimator
from chatcli.wire.anthropic import AnthropicDialect
from chatcli.wire.dialect import (
    ClientRequest,
    Dialect,
    Failure,
    FailureKind,
    Refused,
    RequestError,
)
from chatcli.wire.forwarding import Forwarder, Upstream, passed_headers, plan
from chatcli.wire.items import EventItem, FinalReply, StreamItem, stream_items
from chatcli.wire.known import KnownConversations
from chatcli.wire.openai_chat import OpenAIDialect
from chatcli.wire.responses import ResponsesDialect
from chatcli.wire.usage import RecoveryCalls, recovery_headers

__all__ = ["DEFAULT_MAX_BODY_BYTES", "HEALTH", "ProxyOptions", "create_app"]

logger = logging.getLogger("chatcli.proxy")

DEFAULT_MAX_BODY_BYTES = 32 * 1024 * 1024  # Anthropic's own request limit
DEFAULT_MAX_CONCURRENCY = 64  # requests in flight per client key

ANTHROPIC = AnthropicDialect()
RESPONSES = ResponsesDialect()
# The envelope of OpenAI's errors for a request refused before its route (the chat route's
# own dialect, `Proxy.openai`, remembers the conversations it parsed).
OPENAI_ERRORS = OpenAIDialect()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProxyOptions:
    """How the app serves: body limit, CORS origins (none: no CORS), library settings, where
    requests are recorded (None: nowhere), and whether an answer may be escalated past the
    max_tokens its client asked for."""

    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES
    cors_origins: tuple[str, ...] = ()
    recovery: RecoveryConfig = field(default_factory=RecoveryConfig)
    microcompact: MicrocompactConfig | None = field(default_factory=MicrocompactConfig)
    sessions: SessionRecorder | None = None
    # A client's explicit max_tokens is its ceiling: an answer cut there is returned as cut,
    # unless this lets the library escalate past it (`--escalate-past-client-limit`).
    escalate_past_client_limit: bool = False
    # `GET /metrics` without a client key (`--public-metrics`: a scraper on a private network).
    public_metrics: bool = False
    # The keys of the compaction items the proxy makes (`chatcli.proxy.keys`).
    sealing: SealingConfig = field(default_factory=SealingConfig)


class Proxy:
    """The state the routes share: upstream, guard, metrics, options."""

    def __init__(self, upstream: Upstream, guard: Guard, options: ProxyOptions) -> None:
        self.upstream = upstream
        self.guard = guard
        self.options = options
        self.metrics = Metrics()
        # The transforms' scans of the conversations it serves: its own, bounded
        # (`chatcli.history.scan`), shared by every request's Client, dropped with the app.
        self.memos = ScanMemos()
        # The conversations it parsed lately, so that a request reuses the message objects
        # of the conversation's previous one (and with them the scans above): by content.
        self.known = KnownConversations()
        self.openai = OpenAIDialect(known=self.known)
        # The upstream's exact counts, for the pre-flight of the requests near its window.
        self.counts = PreflightCounts(upstream.provider)
        self.sessions = options.sessions
        self.sealing = SealingKeys(options.sealing, self.sessions, on_error=self.store_failed)
        self.compactions = CompactionRoutes(self)
        self.cuts = StickyViews(self.sessions)
        if self.sessions is not None:
            self.sessions.on_error = self.store_failed

    async def chat(self, request: Request, dialect: Dialect) -> Response:
        started = time.perf_counter()
        endpoint = request.scope["path"]  # the route's (`request.url` parses a URL anew)
        try:
            client = self.admit(request)
        except Refused as refused:
            return self.answer_error(dialect, refused.failure, endpoint, started)
        try:
            await self.window_asked()
            made = await self.compactions.made(request, dialect, await self.body(request))
            if made.answer is not None:
                response = made.answer
            else:
                parsed, session = self.read(request, dialect, made.body)
                response = await self.answer(
                    replace(parsed, leading=made.leading), dialect, session
                )
        except Refused as refused:
            self.guard.release(client)
            return self.answer_error(dialect, refused.failure, endpoint, started)
        except BaseException:
            self.guard.release(client)
            raise
        if isinstance(response, StreamingResponse):
            response.body_iterator = self.released(
                response.body_iterator, client, endpoint, started
            )
        else:
            self.guard.release(client)
            self.metrics.record_request(
                endpoint, response.status_code, time.perf_counter() - started
            )
        return response

    def read(
        self, request: Request, dialect: Dialect, body: dict[str, Any]
    ) -> tuple[ClientRequest, str]:
        """A chat request's body, parsed by its dialect with the headers it passes on, and its
        conversation's key (`session_of`)."""
        parsed = passed_headers(dialect.parse(body), request.headers)
        return parsed, self.session_of(request, parsed)

    def admit(self, request: Request) -> str:
        client = self.guard.client(request.headers)
        if client is None:
            raise Refused(
                Failure(kind=FailureKind.AUTH, status=401, message="invalid proxy API key")
            )
        if not self.guard.acquire(client):
            message = f"more than {self.guard.max_concurrency} requests in flight for this key"
            raise Refused(
                Failure(kind=FailureKind.RATE_LIMIT, status=429, message=message, retry_after=1)
            )
        return client

    async def body(self, request: Request) -> dict[str, Any]:
        return _json_object(await self.raw_body(request))

    async def raw_body(self, request: Request) -> bytes:
        limit = self.options.max_body_bytes
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > limit:
            raise _too_large(limit)
        chunks: list[bytes] = []
        size = 0
        async for chunk in request.stream():
            size += len(chunk)
            if size > limit:
                raise _too_large(limit)
            chunks.append(chunk)
        return b"".join(chunks)

    async def answer(
        self,
        parsed: ClientRequest,
        dialect: Dialect,
        session: str | None = None,
        forwarder: Forwarder | None = None,
    ) -> Response:
        """The answer to a parsed request: JSON, or a stream once its answer has begun.
        `session`: the conversation's key (None: no sticky cut, nothing recorded);
        `forwarder`: the provider it is sent to (None: the upstream, as the request plans)."""
        if forwarder is None:
            forwarder = Forwarder(self.upstream, parsed, plan(parsed, self.upstream.dialect))
        window = await self.shared_window(forwarder)
        estimator = await self.preflight(parsed, forwarder, window)
        sticky = None if session is None else await self.cuts.get(session)
        events: list[Event] = []
        recovery = self.recovery_for(parsed)
        library = self.library_client(forwarder, window, events, sticky, recovery, estimator)
        max_tokens = parsed.max_tokens or self.upstream.max_tokens
        dropped = forwarder.forwarding.dropped
        headers = {"x-chatcli-dropped": ",".join(dropped)} if dropped else {}
        model = parsed.model or self.upstream.model
        if not parsed.stream:
            try:
                reply = await library.asend(
                    parsed.messages, max_tokens=max_tokens, tools=parsed.tools
                )
            except Exception as exc:
                await self.record(session, parsed, None, events)
                raise Refused(self.failed(exc)) from exc
            cut = self.new_cut(session, sticky, library)
            await self.record(session, parsed, reply, reply.events, cut)
            self.metrics.record_reply(reply)
            headers.update(recovery_headers(reply))
            return JSONResponse(dialect.reply(parsed, reply, model=model), headers=headers)
        cuts = _CutOf(self, session, sticky, library)
        engine = library.astream(parsed.messages, max_tokens=max_tokens, tools=parsed.tools)
        items = await self.started(self.recorded(cuts, parsed, stream_items(engine)))
        body = self.guarded(dialect, dialect.stream(parsed, items, model=model))
        return StreamingResponse(body, media_type="text/event-stream", headers=headers)

    async def guarded(self, dialect: Dialect, body: AsyncIterator[bytes]) -> AsyncIterator[bytes]:
        """`body`, ended by the dialect's error event if the request fails after its answer
        began (a continuation that cannot be sent, say): the client sees why it stopped."""
        try:
            async for chunk in body:
                yield chunk
        except Exception as exc:
            yield dialect.stream_error(self.failed(exc))

    def recovery_for(self, parsed: ClientRequest) -> RecoveryConfig:
        """The library's settings for `parsed`: no escalation past a max_tokens the client
        set, unless the proxy was started to (`escalate_past_client_limit`)."""
        recovery = self.options.recovery
        if parsed.max_tokens is None or self.options.escalate_past_client_limit:
            return recovery
        return replace(recovery, max_token_escalations=0)

    async def preflight(
        self, parsed: ClientRequest, forwarder: Forwarder, window: int | None
    ) -> TokenEstimator | None:
        """Pre-flight's estimator for `parsed`: calibrated on the upstream's exact count when
        the request is near the window (`PreflightCounts`; a server's tokenizer is asked in
        a worker thread); None: the library's default."""
        if forwarder.inner is not self.upstream.provider:
            return None  # another provider (OpenAI's own compaction): its own estimate
        prompt = (*tool_definitions(parsed.tools), *parsed.messages)
        if not self.counts.worth_counting(prompt, window or forwarder.context_window, self.memos):
            return None
        return await asyncio.to_thread(self.counts.estimator, parsed.messages, parsed.tools)

    def library_client(
        self,
        provider: Provider,
        window: int | None,
        events: list[Event],
        sticky: StickyView | None = None,
        recovery: RecoveryConfig | None = None,
        estimator: TokenEstimator | None = None,
    ) -> Client:
        """The library's Client for one request over `provider`, starting from the
        conversation's `sticky` cut, pre-flighted with `estimator` (None: the library's
        default); its events feed the metrics, the windows the replicas share, and `events`
        (the request's record if it fails)."""

        def hook(event: Event) -> None:
            self.metrics.record_event(event)
            if self.sessions is not None:
                self.sessions.learned(event, self.upstream.model)
            events.append(event)

        return Client(
            provider,
            self.options.recovery if recovery is None else recovery,
            hooks=(hook,),
            max_retries=0,
            microcompact=self.options.microcompact,
            context_window=window,
            sticky_view=sticky,
            memos=self.memos,
            estimator=estimator,
        )

    def new_cut(
        self, session: str | None, given: StickyView | None, library: Client
    ) -> StickyView | None:
        """The cut the request made, if any (kept for the conversation's next requests);
        its last request is kept too, which the conversation's compaction continues."""
        if session is not None:
            self.compactions.sent.keep(session, library.last_sent)
        return None if session is None else self.cuts.kept(session, given, library.sticky_view)

    # the session store (chatcli.proxy.sessions) ------------------------------------------

    def session_of(self, request: Request, parsed: ClientRequest) -> str:
        """The conversation's key: its sticky cut's and its session's."""
        return session_key(request.headers, parsed.messages)

    async def window_asked(self) -> None:
        """Ask the upstream its window again while it states none (`refresh_window` of an
        OpenAI-compatible server: one not up when the proxy started is asked again after
        `chatcli.providers.discovery.RETRY_S`, not left unknown until a restart)."""
        provider = self.upstream.provider
        refresh = getattr(provider, "refresh_window", None)
        if refresh is not None and not getattr(provider, "context_window", None):
            await asyncio.to_thread(refresh)

    async def shared_window(self, provider: Provider) -> int | None:
        """The window a replica learned, for an upstream that states none of its own."""
        if self.sessions is None or getattr(provider, "context_window", None):
            return None
        return await self.sessions.window(self.upstream.model)

    async def recorded(
        self, cuts: _CutOf, parsed: ClientRequest, items: AsyncIterator[StreamItem]
    ) -> AsyncIterator[StreamItem]:
        """`items`, with the request recorded before the final one (from which the dialect
        writes the answer's end), or when they fail. A client that goes away first ends
        this with GeneratorExit: nothing is recorded for an answer it did not get."""
        events: list[Event] = []
        session = cuts.session
        try:
            async for item in items:
                if isinstance(item, EventItem):
                    events.append(item.event)
                elif isinstance(item, FinalReply):
                    reply = item.reply
                    self.metrics.record_reply(reply)
                    await self.record(session, parsed, reply, reply.events, cuts.made())
                    if (told := RecoveryCalls.of(reply)) is not None:
                        yield EventItem(event=told)  # the recovery's calls, before the end
                yield item
        except Exception:
            await self.record(session, parsed, None, events)
            raise

    async def record(
        self,
        session: str | None,
        parsed: ClientRequest,
        reply: Reply | None,
        events: Sequence[Event],
        cut: StickyView | None = None,
    ) -> None:
        """Record the request in its session (nothing without a recorder)."""
        if self.sessions is None or session is None:
            return
        record = ProxyRecord(
            key=session,
            messages=parsed.messages,
            reply=reply,
            events=tuple(events),
            model=self.upstream.model,
            cut=cut,
        )
        await self.sessions.record(record)

    def store_failed(self, error: BaseException) -> None:
        self.metrics.store_errors += 1

    async def started(self, items: AsyncIterator[StreamItem]) -> AsyncIterator[StreamItem]:
        """`items`, once the answer has begun: a request that fails before any of its answer
        is sent is answered with an error status (not a 200 stream carrying an error)."""
        early: list[StreamItem] = []
        try:
            async for item in items:
                early.append(item)
                if not isinstance(item, EventItem):
                    break
        except Exception as exc:
            raise Refused(self.failed(exc)) from exc
        return _chained(early, items)

    def failed(self, error: BaseException) -> Failure:
        failure = failure_from(error)
        self.metrics.upstream_errors[failure.kind.value] += 1
        return failure

    async def released(
        self, body: AsyncIterable[Any], client: str, endpoint: str, started: float
    ) -> AsyncIterator[Any]:
        """`body`, releasing the client's slot however it ends: finished, failed, or closed by
        a client that went away, even before its first chunk (tests/test_proxy_slots.py)."""
        try:
            async for chunk in body:
                yield chunk
        finally:
            self.guard.release(client)
            self.metrics.record_request(endpoint, 200, time.perf_counter() - started)

    def answer_error(
        self, dialect: Dialect, failure: Failure, endpoint: str, started: float
    ) -> Response:
        self.metrics.record_request(endpoint, failure.status, time.perf_counter() - started)
        return JSONResponse(
            dialect.error(failure), status_code=failure.status, headers=failure.headers()
        )

    async def count_tokens(self, request: Request) -> Response:
        """`POST /v1/messages/count_tokens`: the prompt's tokens, tool definitions included,
        counted as the upstream counts them (a round trip for Anthropic): a request in flight
        like any other, under the key's concurrency limit."""
        started = time.perf_counter()
        endpoint = request.scope["path"]
        try:
            client = self.admit(request)
        except Refused as refused:
            return self.answer_error(ANTHROPIC, refused.failure, endpoint, started)
        try:
            body = await self.body(request)
            parsed = ANTHROPIC.parse({**body, "max_tokens": body.get("max_tokens") or 1})
            counter = counter_for(self.upstream.provider)
            tokens = await asyncio.to_thread(prompt_tokens, counter, parsed.messages, parsed.tools)
        except Refused as refused:
            return self.answer_error(ANTHROPIC, refused.failure, endpoint, started)
        finally:
            self.guard.release(client)
        self.metrics.record_request(endpoint, 200, time.perf_counter() - started)
        return JSONResponse({"input_tokens": tokens})

    async def models(self, request: Request) -> Response:
        model = self.upstream.model
        if "anthropic-version" in request.headers:
            entry = {
                "type": "model",
                "id": model,
                "display_name": model,
                "created_at": "1970-01-01T00:00:00Z",
            }
            return JSONResponse(
                {"data": [entry], "has_more": False, "first_id": model, "last_id": model}
            )
        listed = {"id": model, "object": "model", "created": 0, "owned_by": self.upstream.name}
        return JSONResponse({"object": "list", "data": [listed]})

    async def health(self, request: Request) -> Response:
        return JSONResponse(
            {"status": "ok", "upstream": self.upstream.name, "model": self.upstream.model}
        )

    @contextlib.asynccontextmanager
    async def lifespan(self, app: Starlette) -> AsyncIterator[dict[str, Any]]:
        """On shutdown, close the upstream's connections (its SDK clients' pools) and write
        what the session recorder holds."""
        yield {}
        for provider in (self.upstream.provider, self.upstream.native):
            aclose = getattr(provider, "aclose", None)
            if aclose is not None:
                await aclose()
        if self.sessions is not None:
            await asyncio.to_thread(self.sessions.close)

    async def metrics_text(self, request: Request) -> Response:
        return PlainTextResponse(self.metrics.render(), media_type="text/plain; version=0.0.4")


@dataclass(frozen=True, slots=True)
class _CutOf:
    """What a streamed request's record needs to tell the cut it made, once it has made it."""

    proxy: Proxy
    session: str | None
    given: StickyView | None
    library: Client

    def made(self) -> StickyView | None:
        return self.proxy.new_cut(self.session, self.given, self.library)


def _too_large(limit: int) -> Refused:
    """A body over `limit` bytes (made when one is: not for every request)."""
    message = f"request body over {limit} bytes"
    return Refused(Failure(kind=FailureKind.TOO_LARGE, status=413, message=message))


def _json_object(raw: bytes) -> dict[str, Any]:
    try:
        body = json.loads(raw)
    except (ValueError, RecursionError) as exc:  # RecursionError: nested too deeply
        raise RequestError(f"the body is not valid JSON: {exc}") from None
    if not isinstance(body, dict):
        raise RequestError("the body must be a JSON object")
    return body


async def _chained(
    early: Sequence[StreamItem], rest: AsyncIterator[StreamItem]
) -> AsyncIterator[StreamItem]:
    for item in early:
        yield item
    async for item in rest:
        yield item


HEALTH = "/healthz"  # the one route open without a client key (a load balancer's probe)


def create_app(upstream: Upstream, guard: Guard, options: ProxyOptions | None = None) -> Starlette:
    """The proxy's ASGI app in front of `upstream`."""
    proxy = Proxy(upstream, guard, options or ProxyOptions())
    routes = [
        Route("/v1/chat/completions", _bound(proxy.chat, proxy.openai), methods=["POST"]),
        Route("/v1/responses", _bound(proxy.chat, RESPONSES), methods=["POST"]),
        Route("/v1/responses/compact", proxy.compactions.compact, methods=["POST"]),
        Route("/v1/messages", _bound(proxy.chat, ANTHROPIC), methods=["POST"]),
        Route("/v1/messages/count_tokens", proxy.count_tokens, methods=["POST"]),
        Route("/v1/models", proxy.models, methods=["GET"]),
        Route(HEALTH, proxy.health, methods=["GET"]),
        Route("/metrics", proxy.metrics_text, methods=["GET"]),
    ]
    middleware = []
    if proxy.options.cors_origins:
        from starlette.middleware.cors import CORSMiddleware

        middleware.append(
            Middleware(
                CORSMiddleware,
                allow_origins=list(proxy.options.cors_origins),
                allow_methods=["GET", "POST"],
                allow_headers=["*"],
            )
        )
    open_paths = {HEALTH, "/metrics"} if proxy.options.public_metrics else {HEALTH}
    middleware.append(Middleware(_KeyRequired, proxy=proxy, open_paths=frozenset(open_paths)))
    app = Starlette(routes=routes, middleware=middleware, lifespan=proxy.lifespan)
    app.state.proxy = proxy
    return app


class _KeyRequired:
    """ASGI middleware in front of the routing: an HTTP request to any path but `open_paths`
    without a client key the guard takes (when keys are configured) is a 401 in its dialect's
    envelope, before any route runs. Being in front of every route, it covers the routes added
    later too (`tests/test_proxy_auth.py` checks the app's routing table)."""

    def __init__(self, app: ASGIApp, *, proxy: Proxy, open_paths: frozenset[str]) -> None:
        self.app = app
        self.proxy = proxy
        self.open_paths = open_paths

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in self.open_paths:
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        if self.proxy.guard.client(headers) is not None:
            await self.app(scope, receive, send)
            return
        failure = Failure(kind=FailureKind.AUTH, status=401, message="invalid proxy API key")
        dialect = _dialect_of(scope["path"], headers)
        await JSONResponse(dialect.error(failure), status_code=401)(scope, receive, send)


def _dialect_of(path: str, headers: Headers) -> Dialect:
    """The dialect whose envelope answers a request refused before its route: Anthropic's for
    its paths and for a client that says it speaks it, else OpenAI's."""
    if path.startswith("/v1/messages") or "anthropic-version" in headers:
        return ANTHROPIC
    return OPENAI_ERRORS


def _bound(
    handler: Callable[[Request, Dialect], Awaitable[Response]], dialect: Dialect
) -> Callable[[Request], Awaitable[Response]]:
    async def endpoint(request: Request) -> Response:
        return await handler(request, dialect)

    return endpoint

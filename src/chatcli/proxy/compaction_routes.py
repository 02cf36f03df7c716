"""The proxy's compaction routes: `POST /v1/responses/compact`, and what a `POST /v1/responses`
or `POST /v1/messages` request asks of compaction before it is answered.

`CompactionRoutes` serves them for the app (`chatcli.proxy.app`) on one of two paths, and the
proxy's log says which:

- **passed to OpenAI**, when the upstream is OpenAI with a model that compacts on its servers
  (`Upstream.native`, its Responses adapter): `POST /v1/responses/compact` is sent to OpenAI's
  (`OpenAI.aresponses_compact`) and its answer returned as OpenAI sent it; a request ending
  with a `compaction_trigger` is forwarded to OpenAI's `POST /responses` as the client sent it
  and OpenAI's answer, whole or streamed, passed on as it came (Codex's remote compaction
  sends the trigger there and reads the one compaction item the answer holds); a request with
  `context_management` or an OpenAI `compaction` item is answered
  through the Responses adapter (recovery and all), `context_management` sent as the client
  gave it and the item unchanged, so OpenAI makes and reads the real item, which the answer
  begins with. A chatcli item (made before the upstream was OpenAI) is expanded first.
- **chatcli's own compaction** against the upstream, for every other upstream, with the
  sealed tokens of `chatcli.proxy.compaction` (its summary asked for after the
  conversation's last request, on the upstream's prompt cache, when this replica answered
  it: `CompactionRoutes.sent`): a `compaction_trigger` is answered with the
  compaction item alone, `context_management` over its threshold compacts before the answer
  (which begins with the item), a chatcli item is expanded into the summary it stands for; in
  front of an upstream of another dialect an Anthropic `compact_20260112` edit is served the
  same way, with a `compaction` block.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncGenerator, AsyncIterator, Mapping
from dataclasses import dataclass, replace
from typing import Any, Protocol

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from chatcli.compaction import CompactionResult
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.errors import CompactionError, ErrorKind, ProviderError
from chatcli.events import Event
from chatcli.history.sticky import StickyView
from chatcli.messages import CompactionPart, Message, Role, StopReason, Usage
from chatcli.providers.base import Provider
from chatcli.providers.counting import counter_for, prompt_tokens
from chatcli.providers.openai import OpenAI
from chatcli.proxy.compaction import (
    OpenAICompaction,
    Sealed,
    Sealer,
    compact_edit,
    compact_threshold,
    compaction_block,
    compaction_item,
    concerns,
    expanded,
    expanded_blocks,
    openai_compaction,
    sealed_of,
    sealing_kid,
    told,
    triggered,
    user_messages,
)
from chatcli.proxy.guard import Guard
from chatcli.proxy.keys import SealingKeys
from chatcli.proxy.metrics import Metrics
from chatcli.proxy.sessions import SentRequests, SessionRecorder
from chatcli.recovery import Client, Reply
from chatcli.wire.anthropic import AnthropicDialect
from chatcli.wire.dialect import ClientRequest, Dialect, Failure, Refused, checked, sse
from chatcli.wire.forwarding import Forwarder, Upstream, passed_headers, plan
from chatcli.wire.items import FinalReply, StreamItem
from chatcli.wire.responses import ResponsesDialect
from chatcli.wire.schemas import ResponsesRequest

__all__ = ["CompactionRoutes", "Made", "NativeForwarder", "ProxyState"]

logger = logging.getLogger("chatcli.proxy")

# Failures of a summary call that are the upstream's state, not the conversation's: answered
# as errors (the client retries) rather than with a compaction that left the conversation whole.
_UPSTREAM_STATES = frozenset(
    {ErrorKind.RATE_LIMIT, ErrorKind.QUOTA, ErrorKind.AUTH, ErrorKind.TRANSIENT}
)

ANTHROPIC = AnthropicDialect()
RESPONSES = ResponsesDialect()


@dataclass(frozen=True, slots=True)
class Made:
    """What compaction made of a request: the body to read, the output items its answer
    begins with, or the whole answer (a `compaction_trigger`'s)."""

    body: dict[str, Any]
    leading: tuple[Any, ...] = ()
    answer: Response | None = None


class ProxyState(Protocol):
    """What the routes use of the app that serves them (`chatcli.proxy.app.Proxy`), named
    here so that the app imports the routes and never the other way round."""

    upstream: Upstream
    guard: Guard
    metrics: Metrics
    sessions: SessionRecorder | None
    sealing: SealingKeys

    def admit(self, request: Request) -> str: ...
    async def window_asked(self) -> None: ...
    async def body(self, request: Request) -> dict[str, Any]: ...
    async def answer(
        self,
        parsed: ClientRequest,
        dialect: Dialect,
        session: str | None = None,
        forwarder: Forwarder | None = None,
    ) -> Response: ...
    def library_client(
        self,
        provider: Provider,
        window: int | None,
        events: list[Event],
        sticky: StickyView | None = None,
        recovery: RecoveryConfig | None = None,
    ) -> Client: ...
    def session_of(self, request: Request, parsed: ClientRequest) -> str: ...
    async def shared_window(self, provider: Provider) -> int | None: ...
    def store_failed(self, error: BaseException) -> None: ...
    def failed(self, error: BaseException) -> Failure: ...
    def answer_error(
        self, dialect: Dialect, failure: Failure, endpoint: str, started: float
    ) -> Response: ...


class CompactionRoutes:
    """Compaction for the app `proxy` serves (see the module docstring)."""

    def __init__(self, proxy: ProxyState) -> None:
        self.proxy = proxy
        self.sent = SentRequests()  # each conversation's last request, which it continues

    async def made(self, request: Request, dialect: Dialect, body: dict[str, Any]) -> Made:
        """What compaction makes of a chat request's `body` before it is answered."""
        if dialect.name == RESPONSES.name:
            return await self.responses(request, body)
        if dialect.name == ANTHROPIC.name and self.proxy.upstream.dialect != ANTHROPIC.name:
            return await self.blocks(request, expanded_blocks(body))
        return Made(body)

    async def sealer(self, body: Mapping[str, Any]) -> Sealer:
        """The keys sealing compaction tokens (`chatcli.proxy.keys`), holding the one that
        sealed `body`'s compaction item if the proxy has it."""
        return await self.proxy.sealing.sealer(sealing_kid(body))

    async def responses(self, request: Request, body: dict[str, Any]) -> Made:
        """A Responses body with its chatcli compaction item expanded, compacted first when it
        asks (`compaction_trigger`: the compaction item is the whole answer;
        `context_management` over its threshold: the answer begins with the item); passed to
        OpenAI's own compaction when the upstream has it."""
        if not concerns(body):
            return Made(body)
        checked(ResponsesRequest, body)  # its items, before they are read here
        if self.proxy.upstream.native is not None:
            return await self.native(request, body, self.proxy.upstream.native)
        sealer = await self.sealer(body)
        body, trigger = triggered(expanded(body, sealer))
        threshold = compact_threshold(body)
        body.pop("context_management", None)  # done here: no upstream is sent it
        if not trigger and threshold is None:
            return Made(body)
        parsed = passed_headers(RESPONSES.parse(body), request.headers)
        if not trigger:
            tokens = await _prompt_tokens(self.proxy.upstream.provider, parsed)
            if tokens < threshold:  # type: ignore[operator]
                return Made(body)
        sealed, reply = await self.compacted(parsed, self.proxy.session_of(request, parsed))
        item = compaction_item(sealer.seal(sealed))
        how = "compaction_trigger" if trigger else f"context_management over {threshold} tokens"
        logger.info(
            "chatcli proxy: compacted (%s) with chatcli's own compaction: %s", how, told(sealed)
        )
        if trigger:
            answer = await self.items_answer(replace(parsed, leading=(item,)), reply)
            return Made(body, answer=answer)
        return Made(expanded({**body, "input": [*body["input"], item]}, sealer), leading=(item,))

    async def native(self, request: Request, body: dict[str, Any], native: OpenAI) -> Made:
        """A Responses body that concerns compaction, for an upstream that compacts on OpenAI's
        servers (module docstring): answered by OpenAI's own compaction."""
        body = await self.opened(body)
        if triggered(body)[1]:  # checked where it stands, then sent as it is
            return Made(body, answer=await self.native_trigger(request, body, native))
        taken = openai_compaction(body)
        body = taken.body if taken is not None else body
        management = body.pop("context_management", None)
        parsed = passed_headers(RESPONSES.parse(body), request.headers)
        if taken is not None:
            parsed = _anchored(parsed, taken, native)
        forwarding = plan(parsed, self.proxy.upstream.dialect)
        if management is not None:
            extra = {**forwarding.settings.extra, "context_management": management}
            forwarding = replace(forwarding, settings=replace(forwarding.settings, extra=extra))
        logger.info(
            "chatcli proxy: passed to OpenAI's compaction (context_management %s; %s) for %s",
            "sent" if management is not None else "absent",
            "its compaction item sent unchanged" if taken is not None else "no compaction item",
            native.model,
        )
        upstream = replace(self.proxy.upstream, provider=native)
        forwarder = NativeForwarder(upstream, parsed, forwarding)
        session = self.proxy.session_of(request, parsed)
        return Made(body, answer=await self.proxy.answer(parsed, RESPONSES, session, forwarder))

    async def native_trigger(
        self, request: Request, body: dict[str, Any], native: OpenAI
    ) -> Response:
        """A request ending with a `compaction_trigger` (`body`, as the client sent it) sent to
        OpenAI's `POST /responses`, its answer passed on as it came (module docstring); a
        failure before the answer began is the client's error."""
        headers = passed_headers(RESPONSES.parse({**body, "input": ""}), request.headers).headers
        logger.info(
            "chatcli proxy: passed to OpenAI's compaction (compaction_trigger, forwarded to "
            "/responses of %s)",
            native.model,
        )
        try:
            if not body.get("stream"):
                return JSONResponse(await native.aresponses_forward(body, headers=headers))
            events = native.aresponses_forward_events(body, headers=headers)
            first = await anext(events, None)
        except ProviderError as exc:
            raise Refused(self.proxy.failed(exc)) from exc
        return StreamingResponse(self.relayed(first, events), media_type="text/event-stream")

    async def relayed(
        self, first: dict[str, Any] | None, events: AsyncGenerator[dict[str, Any], None]
    ) -> AsyncIterator[bytes]:
        """OpenAI's stream events as they came (`first` already read); a failure after the
        stream began ends it with the dialect's error event."""
        try:
            for event in [first] if first is not None else []:
                yield sse(event, event["type"])
            async for event in events:
                yield sse(event, event["type"])
        except ProviderError as exc:
            yield RESPONSES.stream_error(self.proxy.failed(exc))
        finally:
            await events.aclose()

    async def opened(self, body: dict[str, Any]) -> dict[str, Any]:
        """`body` with its latest compaction item expanded when it is chatcli's (an OpenAI
        item is left as it is)."""
        if openai_compaction(body) is not None:
            return body
        return expanded(body, await self.sealer(body))

    async def openai_compact(
        self, native: OpenAI, body: dict[str, Any], headers: Mapping[str, str]
    ) -> tuple[dict[str, Any], Usage]:
        """OpenAI's `/responses/compact` of `body` (the fields of openai-python's
        `ResponseCompactParams`, imported here: older SDKs, which the rest of the proxy runs
        on, have no compaction), and its usage; a failure is the client's error."""
        from openai.types.responses import ResponseCompactParams

        fields = {k: v for k, v in body.items() if k in ResponseCompactParams.__annotations__}
        try:
            return await native.aresponses_compact(fields, headers=headers)
        except ProviderError as exc:
            raise Refused(self.proxy.failed(exc)) from exc

    async def compacted(self, parsed: ClientRequest, session: str) -> tuple[Sealed, Reply]:
        """chatcli's own compaction of `parsed` (conversation `session`) against the
        upstream, what it leaves, and a Reply that carries its usage. A conversation that
        cannot be compacted (too short, a summary that failed its checks or a summary call
        over the window) is left whole, so the client always gets its item (the next request
        is recovered like any other); an upstream that is down, out of quota or refusing the
        key is the client's error."""
        result = await self.compaction_result(parsed, session)
        usage = result.report.usage if result is not None else Usage()
        calls = result.report.calls if result is not None else 0
        return sealed_of(parsed, result), _reply(usage, calls=calls)

    async def compaction_result(
        self, parsed: ClientRequest, session: str
    ) -> CompactionResult | None:
        """chatcli's compaction of `parsed` against the upstream (None: left whole; see
        `compacted`), continuing conversation `session`'s last request where it is known."""
        proxy = self.proxy
        forwarder = Forwarder(proxy.upstream, parsed, plan(parsed, proxy.upstream.dialect))
        window = await proxy.shared_window(forwarder)
        library = proxy.library_client(forwarder, window, [])
        max_tokens = parsed.max_tokens or proxy.upstream.max_tokens
        previous = self.sent.previous(session, parsed.messages)
        try:
            return await library.acompact(parsed.messages, max_tokens=max_tokens, previous=previous)
        except CompactionError as exc:
            cause = exc.__cause__
            if isinstance(cause, ProviderError) and cause.info.kind in _UPSTREAM_STATES:
                raise Refused(proxy.failed(cause)) from exc
            logger.warning("chatcli proxy: compaction left the conversation whole: %s", exc)
            return None

    async def blocks(self, request: Request, body: dict[str, Any]) -> Made:
        """An Anthropic body's `compact_20260112` edit, for an upstream of another dialect:
        over its trigger (none: chatcli's own auto-compaction point of the upstream's window),
        compacted first, the answer beginning with the `compaction` block."""
        body, asked, trigger = compact_edit(body)
        if not asked:
            return Made(body)
        parsed = passed_headers(ANTHROPIC.parse(body), request.headers)
        provider = self.proxy.upstream.provider
        window = getattr(provider, "context_window", None)
        point = trigger if trigger is not None else CompactionConfig().trigger(window or None)
        tokens = await _prompt_tokens(provider, parsed)
        if point is None or tokens < point:
            return Made(body)
        session = self.proxy.session_of(request, parsed)
        block = compaction_block(await self.compaction_result(parsed, session))
        if block is None:
            return Made(body)
        logger.info(
            "chatcli proxy: compacted (compact_20260112 over %d tokens): a block of %d chars",
            point,
            len(block["content"]),
        )
        compacted = expanded_blocks(
            {**body, "messages": [{"role": "assistant", "content": [block]}]}
        )
        return Made(compacted, leading=(block,))

    async def items_answer(self, parsed: ClientRequest, reply: Reply) -> Response:
        """An answer of `parsed.leading` alone (no upstream call), whole or streamed."""
        model = parsed.model or self.proxy.upstream.model
        if not parsed.stream:
            return JSONResponse(RESPONSES.reply(parsed, reply, model=model))
        body = RESPONSES.stream(parsed, _only(FinalReply(reply=reply)), model=model)
        return StreamingResponse(body, media_type="text/event-stream")

    async def compact(self, request: Request) -> Response:
        """`POST /v1/responses/compact`: the user messages, then exactly one compaction item
        (openai-python's `CompactedResponse`): OpenAI's own, or chatcli's."""
        proxy = self.proxy
        started = time.perf_counter()
        endpoint = request.scope["path"]
        try:
            client = proxy.admit(request)
        except Refused as refused:
            return proxy.answer_error(RESPONSES, refused.failure, endpoint, started)
        try:
            await proxy.window_asked()
            body = await proxy.body(request)
            checked(ResponsesRequest, body)
            native = proxy.upstream.native
            if native is not None:
                compacted = await self.native_compact(request, body, native)
            else:
                compacted = await self.own_compact(request, body)
        except Refused as refused:
            return proxy.answer_error(RESPONSES, refused.failure, endpoint, started)
        finally:
            proxy.guard.release(client)
        proxy.metrics.record_request(endpoint, 200, time.perf_counter() - started)
        return JSONResponse(compacted)

    async def own_compact(self, request: Request, body: dict[str, Any]) -> dict[str, Any]:
        """A compact request's `CompactedResponse`, by chatcli's own compaction."""
        sealer = await self.sealer(body)
        body = expanded(body, sealer)
        parsed = passed_headers(RESPONSES.parse(body), request.headers)
        sealed, reply = await self.compacted(parsed, self.proxy.session_of(request, parsed))
        logger.info("chatcli proxy: compacted (/responses/compact): %s", told(sealed))
        return {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*user_messages(body["input"]), compaction_item(sealer.seal(sealed))],
            "usage": RESPONSES.reply(parsed, reply, model="")["usage"],
        }

    async def native_compact(
        self, request: Request, body: dict[str, Any], native: OpenAI
    ) -> dict[str, Any]:
        """A compact request passed to OpenAI's, its answer as OpenAI sent it (a chatcli item
        in the input expanded first; an OpenAI one sent unchanged)."""
        headers = passed_headers(RESPONSES.parse({**body, "input": ""}), request.headers).headers
        compacted, _ = await self.openai_compact(native, await self.opened(body), headers)
        logger.info(
            "chatcli proxy: passed to OpenAI's compaction (/responses/compact of %s)",
            native.model,
        )
        return compacted


class NativeForwarder(Forwarder):
    """A Forwarder to the upstream's Responses adapter that says whose compactions it reads
    and for which model, so the Client keeps OpenAI's item in the view and lets it replace
    the span before it (`chatcli.history.native`)."""

    @property
    def compaction_provider(self) -> str | None:
        return getattr(self.inner, "compaction_provider", None)

    @property
    def model(self) -> str:
        return str(getattr(self.inner, "model", ""))


def _anchored(parsed: ClientRequest, taken: OpenAICompaction, native: OpenAI) -> ClientRequest:
    """`parsed` with OpenAI's compaction item back in its place, as a message of its own (a
    `CompactionPart` of the adapter's provider and model, sent back verbatim)."""
    part = CompactionPart(
        provider=str(native.compaction_provider), model=native.model, provider_details=taken.item
    )
    at = sum(1 for origin in parsed.origins if origin is None) + taken.place
    anchor = Message(role=Role.ASSISTANT, compaction=part)
    return replace(
        parsed,
        messages=(*parsed.messages[:at], anchor, *parsed.messages[at:]),
        origins=(*parsed.origins[:at], None, *parsed.origins[at:]),
    )


async def _prompt_tokens(provider: Provider, parsed: ClientRequest) -> int:
    """What `parsed`'s prompt counts against a compaction threshold: its messages and its tool
    definitions, as pre-flight counts them (`chatcli.providers.counting.prompt_tokens`)."""
    counter = counter_for(provider)
    return await asyncio.to_thread(prompt_tokens, counter, parsed.messages, parsed.tools)


def _reply(usage: Usage, *, calls: int) -> Reply:
    """The Reply of an answer that is a compaction alone: no message, `usage` for its cost."""
    return Reply(
        message=Message(role=Role.ASSISTANT),
        usage=usage,
        events=(),
        truncated=False,
        view=(),
        stop_reason=StopReason.END_TURN,
        calls=calls,
    )


async def _only(item: StreamItem) -> AsyncIterator[StreamItem]:
    yield item

"""The proxy's compaction routes: `POST /v1/responses/compact`, and what a `POST /v1/responses`
or `POST /v1/messages` request asks of compaction before it is answered.

`CompactionRoutes` serves them for the app (`chatcli.proxy.app`), with chatcli's own
compaction against the upstream and the sealed tokens of `chatcli.proxy.compaction`: a
`compaction_trigger` is answered with the compaction item alone, `context_management` over
its threshold compacts before the answer (which begins with the item), a chatcli item is
expanded into the summary it stands for; in front of an upstream of another dialect an
Anthropic `compact_20260112` edit is served the same way, with a `compaction` block.
"""

from __future__ import annotations

import asyncio
import logging
import time
import uuid
from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from chatcli.compaction import CompactionResult
from chatcli.config import CompactionConfig
from chatcli.errors import CompactionError, ErrorKind, ProviderError
from chatcli.messages import Message, Role, StopReason, Usage
from chatcli.providers.counting import counter_for
from chatcli.proxy.anthropic_dialect import AnthropicDialect
from chatcli.proxy.compaction import (
    Sealed,
    Sealer,
    compact_edit,
    compact_threshold,
    compaction_block,
    compaction_item,
    concerns,
    expanded,
    expanded_blocks,
    new_key,
    sealed_of,
    told,
    triggered,
    user_messages,
)
from chatcli.proxy.dialect import ClientRequest, Dialect, Refused, checked
from chatcli.proxy.items import FinalReply, StreamItem
from chatcli.proxy.responses_dialect import ResponsesDialect
from chatcli.proxy.schemas import ResponsesRequest
from chatcli.proxy.upstream import Forwarder, passed_headers, plan
from chatcli.recovery import Reply

if TYPE_CHECKING:
    from chatcli.proxy.app import Proxy

__all__ = ["COMPACTION_KEY", "CompactionRoutes", "Made"]

logger = logging.getLogger("chatcli.proxy")

COMPACTION_KEY = "responses-compaction"  # the store's name of the compaction tokens' key
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


class CompactionRoutes:
    """Compaction for the app `proxy` serves (see the module docstring)."""

    def __init__(self, proxy: Proxy) -> None:
        self.proxy = proxy
        self._sealer: Sealer | None = None

    async def made(self, request: Request, dialect: Dialect, body: dict[str, Any]) -> Made:
        """What compaction makes of a chat request's `body` before it is answered."""
        if dialect.name == RESPONSES.name:
            return await self.responses(request, body)
        if dialect.name == ANTHROPIC.name and self.proxy.upstream.dialect != ANTHROPIC.name:
            return await self.blocks(request, expanded_blocks(body))
        return Made(body)

    async def sealer(self) -> Sealer:
        """The key sealing compaction tokens: the store's (shared by every replica, kept across
        restarts), else one made at start (its tokens do not survive a restart)."""
        if self._sealer is None:
            key = None
            sessions = self.proxy.sessions
            if sessions is not None:
                try:
                    key = await sessions.key(COMPACTION_KEY)
                except Exception as exc:  # the store failed: serve on, with this run's key
                    logger.error("chatcli proxy: reading the compaction key failed: %s", exc)
                    self.proxy.store_failed(exc)
            self._sealer = Sealer(key or new_key())
        return self._sealer

    async def responses(self, request: Request, body: dict[str, Any]) -> Made:
        """A Responses body with its chatcli compaction item expanded, compacted first when it
        asks (`compaction_trigger`: the compaction item is the whole answer;
        `context_management` over its threshold: the answer begins with the item)."""
        if not concerns(body):
            return Made(body)
        checked(ResponsesRequest, body)  # its items, before they are read here
        sealer = await self.sealer()
        body, trigger = triggered(expanded(body, sealer))
        threshold = compact_threshold(body)
        body.pop("context_management", None)  # done here: no upstream is sent it
        if not trigger and threshold is None:
            return Made(body)
        parsed = passed_headers(RESPONSES.parse(body), request.headers)
        if not trigger:
            counter = counter_for(self.proxy.upstream.provider)
            tokens = await asyncio.to_thread(counter.count, parsed.messages)
            if tokens < threshold:  # type: ignore[operator]
                return Made(body)
        sealed, reply = await self.compacted(parsed)
        item = compaction_item(sealer.seal(sealed))
        how = "compaction_trigger" if trigger else f"context_management over {threshold} tokens"
        logger.info("chatcli proxy: compacted (%s): %s", how, told(sealed))
        if trigger:
            answer = await self.items_answer(replace(parsed, leading=(item,)), reply)
            return Made(body, answer=answer)
        return Made(expanded({**body, "input": [*body["input"], item]}, sealer), leading=(item,))

    async def compacted(self, parsed: ClientRequest) -> tuple[Sealed, Reply]:
        """chatcli's own compaction of `parsed` against the upstream, what it leaves, and a
        Reply that carries its usage. A conversation that cannot be compacted (too short, a
        summary that failed its checks or a summary call over the window) is left whole, so
        the client always gets its item (the next request is recovered like any other); an
        upstream that is down, out of quota or refusing the key is the client's error."""
        result = await self.compaction_result(parsed)
        usage = result.report.usage if result is not None else Usage()
        calls = result.report.calls if result is not None else 0
        reply = Reply(
            message=Message(role=Role.ASSISTANT),
            usage=usage,
            events=(),
            truncated=False,
            view=(),
            stop_reason=StopReason.END_TURN,
            calls=calls,
        )
        return sealed_of(parsed, result), reply

    async def compaction_result(self, parsed: ClientRequest) -> CompactionResult | None:
        """chatcli's compaction of `parsed` against the upstream (None: left whole; see
        `compacted`)."""
        proxy = self.proxy
        forwarder = Forwarder(proxy.upstream, parsed, plan(parsed, proxy.upstream.dialect))
        window = await proxy.shared_window(forwarder)
        library = proxy.library_client(forwarder, window, [])
        max_tokens = parsed.max_tokens or proxy.upstream.max_tokens
        try:
            return await library.acompact(parsed.messages, max_tokens=max_tokens)
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
        point = trigger
        if point is None and window:
            point = window * CompactionConfig().auto_compact_pct // 100
        tokens = await asyncio.to_thread(counter_for(provider).count, parsed.messages)
        if point is None or tokens < point:
            return Made(body)
        block = compaction_block(await self.compaction_result(parsed))
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
        (openai-python's `CompactedResponse`)."""
        proxy = self.proxy
        started = time.perf_counter()
        endpoint = request.scope["path"]
        try:
            client = proxy.admit(request)
        except Refused as refused:
            return proxy.answer_error(RESPONSES, refused.failure, endpoint, started)
        try:
            sealer = await self.sealer()
            body = await proxy.body(request)
            checked(ResponsesRequest, body)
            body = expanded(body, sealer)
            parsed = passed_headers(RESPONSES.parse(body), request.headers)
            sealed, reply = await self.compacted(parsed)
        except Refused as refused:
            return proxy.answer_error(RESPONSES, refused.failure, endpoint, started)
        finally:
            proxy.guard.release(client)
        logger.info("chatcli proxy: compacted (/responses/compact): %s", told(sealed))
        usage = RESPONSES.reply(parsed, reply, model="")["usage"]
        compacted = {
            "id": f"resp_{uuid.uuid4().hex}",
            "object": "response.compaction",
            "created_at": int(time.time()),
            "output": [*user_messages(body["input"]), compaction_item(sealer.seal(sealed))],
            "usage": usage,
        }
        proxy.metrics.record_request(endpoint, 200, time.perf_counter() - started)
        return JSONResponse(compacted)


async def _only(item: StreamItem) -> AsyncIterator[StreamItem]:
    yield item

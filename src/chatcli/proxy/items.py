"""The typed items a streamed answer is written from, and the feed that makes them today.

A dialect's stream writer reads an async iterator of `StreamItem`: text deltas, tool-call
deltas, recovery events and, last, the final `Reply`. `stream_reply` is the one place that
produces them: it runs `Client.asend` with a `Tap` around the provider, which streams the
text of the first answer live; everything else the Reply holds (text after a continuation,
tool calls) is written when the Reply is there. Tool calls are written only from the Reply,
so a call whose arguments were cut off (dropped by recovery) never reaches the client.
`Client.astream` (`chatcli.streaming`) now streams continuations live; moving onto it is
still to do: its `Discard` (text a failed call showed) cannot be taken back from a client.

An answer with reasoning a client must send back (Anthropic thinking blocks and their
signatures, requested with `thinking`) is not streamed live: the adapters stream text only,
and the blocks must come before the text, so the whole answer is written at the end.

Why only the first answer is live: a continuation is stitched to the partial answer with
the text repeated at the seam removed, which a client that has already been sent the seam
cannot be asked to undo. So once an answer that streamed text has ended, the text of later
calls is held back and what the stitched answer adds is sent as one delta at the end.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from chatcli.events import Event
from chatcli.providers.base import Provider, Request, Response, TextDelta
from chatcli.recovery import Reply

__all__ = [
    "EventItem",
    "FinalReply",
    "ReasoningItem",
    "Sink",
    "StreamItem",
    "Tap",
    "TextDelta",
    "ToolCallDelta",
    "final_items",
    "stream_reply",
]

logger = logging.getLogger("chatcli.proxy")


@dataclass(frozen=True, slots=True, kw_only=True)
class ToolCallDelta:
    """A piece of tool call `index`: its id and name come with the first piece."""

    index: int
    id: str = ""
    name: str = ""
    arguments: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class ReasoningItem:
    """The answer's opaque reasoning (`Message.provider_details`: Anthropic thinking blocks
    with their signatures), which a client must be able to send back; before any text."""

    details: Mapping[str, Any]


@dataclass(frozen=True, slots=True, kw_only=True)
class EventItem:
    """Something recovery did (an overflow, a level, an escalation), as it happened."""

    event: Event


@dataclass(frozen=True, slots=True, kw_only=True)
class FinalReply:
    """The whole answer: always the last item."""

    reply: Reply


StreamItem = TextDelta | ToolCallDelta | ReasoningItem | EventItem | FinalReply
Sink = Callable[[StreamItem], None]


class Tap:
    """A Provider around `inner` that streams the first answer's text to `sink` (see the
    module docstring); `context_window` and `max_output_tokens` are the inner ones."""

    def __init__(self, inner: Provider, sink: Sink, *, live: bool = True) -> None:
        self.inner = inner
        self.sink = sink
        self.live = live
        self.context_window = getattr(inner, "context_window", None)
        self.max_output_tokens = getattr(inner, "max_output_tokens", None)

    def complete(self, request: Request) -> Response:
        return self.inner.complete(request)

    async def acomplete(self, request: Request) -> Response:
        """The call, streamed from the upstream when it can stream; its text goes to the
        sink while the answer is live."""
        astream: Any = getattr(self.inner, "astream", None)
        if astream is None:
            return await self.inner.acomplete(request)
        final: Response | None = None
        streamed = False
        try:
            async for chunk in astream(request):
                if not isinstance(chunk, TextDelta):
                    final = chunk
                elif self.live:
                    streamed = True
                    self.sink(chunk)
        finally:
            self.live = self.live and not streamed
        if final is None:
            raise RuntimeError("the stream ended without a response")
        return final


async def stream_reply(run: Callable[[Sink], Awaitable[Reply]]) -> AsyncIterator[StreamItem]:
    """The items of one answer: `run(sink)` sends the request (a Client built with a `Tap`
    and a hook, both feeding `sink`) and returns the Reply. Its exception is raised here.
    The request is cancelled if the reader stops early (the client went away)."""
    queue: asyncio.Queue[StreamItem | None] = asyncio.Queue()
    task = asyncio.ensure_future(run(queue.put_nowait))
    task.add_done_callback(lambda _: queue.put_nowait(None))
    streamed: list[str] = []
    try:
        while (item := await queue.get()) is not None:
            if isinstance(item, TextDelta):
                streamed.append(item.text)
            yield item
        reply = task.result()
    finally:
        if not task.done():
            task.cancel()
    for item in final_items(reply, "".join(streamed)):
        yield item


def final_items(reply: Reply, streamed: str) -> Iterator[StreamItem]:
    """What the client has not been sent yet: the rest of the text, the tool calls, the Reply."""
    details = reply.message.provider_details
    if details and not streamed:
        yield ReasoningItem(details=details)
    text = reply.message.text
    if text.startswith(streamed):
        if rest := text[len(streamed) :]:
            yield TextDelta(text=rest)
    else:  # a call failed after streaming (then retried): what was sent cannot be taken back
        logger.warning("the streamed text is not a prefix of the final answer")
    for index, call in enumerate(reply.message.tool_calls):
        yield ToolCallDelta(index=index, id=call.id, name=call.name, arguments=call.arguments_json)
    yield FinalReply(reply=reply)

"""The fast path's answer piped from callbacks: each read of the upstream's body goes to the
client's connection where it arrives, with no task woken and no generator resumed.

On the fast path (`chatcli.proxy.passthrough`) each upstream event woke a task (the
connection's reader), then went through a chain of async generators (the transport's body,
httpx, the judging, the piping, the guard, the response) and the server's `send` coroutine:
most of the proxy's CPU per event. Once the answer's head and first bytes went out through
the server, the rest of the body can go without them: the upstream connection's protocol is
replaced (`chatcli.providers.lean_http`, `_Body.detach`), and each read is judged
(`FastPath.judge`) and written to the client's transport in the chunked framing the server
chose for the response. Flow control goes both ways: the upstream's reading pauses while the
client's transport is over its high-water mark, and resumes when it drained. The async world
takes over again at the end of the body (the held events, `Client.resume_stream`, recording,
the handover, the terminating chunk through the server's own `send`), on a failure, or when
the client goes away (the response's task is cancelled, which releases the upstream).

The server does not show the client's transport to the app: `LinkedProtocol` (uvicorn's
httptools protocol, as `chatcli proxy` serves) puts a `ClientLink` in each request's scope
(`extensions`, under `CLIENT_LINK`). Under another server, or without it, the fast path
pipes through its generators as before.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

if TYPE_CHECKING:
    from chatcli.proxy.passthrough import FastPath

__all__ = ["CLIENT_LINK", "ClientLink", "LinkedProtocol", "piped_directly"]

CLIENT_LINK = "chatcli.client"


class ClientLink:
    """A client's connection, as the fast path writes to it directly: a response's body
    chunks, whether its transport is over its high-water mark, a callback for when it
    drained."""

    def __init__(self, transport: asyncio.Transport, flow: Any) -> None:
        self.transport, self.flow = transport, flow
        self.drained: list[Callable[[], None]] = []

    @property
    def paused(self) -> bool:
        """Whether the client cannot take more now (its transport over its high-water mark)."""
        return bool(self.flow.write_paused)

    @property
    def gone(self) -> bool:
        return self.transport.is_closing()

    def write(self, data: bytes) -> None:
        """`data` as one chunk of a chunked response body (the framing uvicorn writes)."""
        self.transport.write(b"%x\r\n%s\r\n" % (len(data), data))

    def when_drained(self, callback: Callable[[], None]) -> None:
        self.drained.append(callback)

    def resumed(self) -> None:
        """The transport drained: the callbacks waiting for it run, once."""
        drained, self.drained = self.drained, []
        for callback in drained:
            callback()


class LinkedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with its connection's `ClientLink` in each request's
    scope (`extensions[CLIENT_LINK]`)."""

    link: ClientLink

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.link = ClientLink(transport, self.flow)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {CLIENT_LINK: self.link}  # type: ignore[dict-item]

    def resume_writing(self) -> None:
        super().resume_writing()
        self.link.resumed()


async def piped_directly(fast: FastPath, body: Any, link: ClientLink) -> None:
    """The rest of the upstream's `body` (the lean transport's, `_Body.detach`) judged and
    written to the client read by read, until its end; a failure to read is the call's
    outcome (`fast.failure`), as on the generators' path. Cancelled (the client went away),
    the caller's closing of the upstream's response releases its connection."""
    ended: asyncio.Future[Exception | None] = asyncio.get_running_loop().create_future()

    def received(data: bytes) -> None:
        if link.gone:  # the client went away: its task is being cancelled
            body.pause()
            return
        if out := fast.judge(data):
            link.write(out)
            if link.paused:
                body.pause()
                link.when_drained(body.resume)

    def end(failure: Exception | None) -> None:
        if not ended.done():
            ended.set_result(failure)

    body.detach(received, end)
    failure = await ended
    if failure is not None:
        fast.failure = fast.provider.read_failure(failure)

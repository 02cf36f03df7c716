"""The fast path's answer piped from callbacks: each read of the upstream's body goes to the
client's connection where it arrives, with no task woken and no generator resumed, the first
one included.

On the fast path (`chatcli.proxy.passthrough`) each upstream event woke a task (the
connection's reader), then went through a chain of async generators (the transport's body,
httpx, the judging, the piping, the guard, the response) and the server's `send` coroutine:
most of the proxy's CPU per event. Once the upstream's head came, the body can go without
them: the upstream connection's protocol is replaced (`chatcli.providers.lean_http`,
`_Body.detach`), and each read is judged (`FastPath.judge`) and written to the client's
transport in the chunked framing of the response. The first bytes to pass on start the
response there and then: its head goes through the server's own `send` for this request,
run at once (it waits for nothing while the client's transport takes writes), so the first
token reaches the client in the read that brought it, not one turn of a busy event loop
later, when the request's task wakes. Flow control goes both ways: the upstream's reading
pauses while the client's transport is over its high-water mark, and resumes when it
drained. At the end of the body the response ends there too, when nothing in its end
waits (`FastPath.end_now`: no recorder, the library's verdict given with no wait, the answer
taken as it is): the held events and the terminating chunk go through the server's `send`,
and the request's task, woken after, only releases what it holds. The async world takes over
at the end of the body otherwise (the held events, `Client.resume_stream`, recording, the
handover, the terminating chunk through the server's `send`), on a failure, when the client
cannot take the first bytes at once (they go with the head from the request's task), or when
the client goes away (the response's task is cancelled, which releases the upstream).

The server does not show the client's transport to the app: `LinkedProtocol` (uvicorn's
httptools protocol, as `chatcli proxy` serves) puts a `ServerLink` in each request's scope
(`extensions`, under `CLIENT_LINK`): the connection's `ClientLink` and the server's `send`
for this request. Under another server, or without it, the fast path pipes through its
generators as before.

The request's way in has the same wait: uvicorn runs the app in a task of its own, which
starts one turn of the event loop after the request was read (behind every read of every
answer ready by then: ~0.2 ms at the median, 0.8 ms at the 90th percentile at 200 streams,
benchmarks/proxy.py --steps). So `LinkedProtocol` also hands each request's body, once it
came whole, to the app's `ON_BODY` callback (given in its lifespan state), in the callback
that read it, before the request's task runs: the proxy forwards the request from there
(`chatcli.proxy.app`), and the task goes on from what it did.
"""

from __future__ import annotations

import asyncio
import weakref
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, cast

from starlette.types import Message, Send
from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol

if TYPE_CHECKING:
    from chatcli.proxy.passthrough import FastPath

__all__ = [
    "CLIENT_LINK",
    "ON_BODY",
    "ClientLink",
    "LinkedProtocol",
    "Pipe",
    "ServerLink",
    "sent_at_once",
]

CLIENT_LINK = "chatcli.client"
# The lifespan state's key of the app's callback for a request whose body came whole:
# called as `callback(scope, body)` before the request's task runs (`LinkedProtocol`).
ON_BODY = "chatcli.on_body"


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


@dataclass(frozen=True, slots=True)
class ServerLink:
    """What a request's fast path needs of the server: the client's connection, and the
    server's own `send` for this request (no middleware around it), to start the response
    from a callback (`sent_at_once`)."""

    client: ClientLink
    send: Send


class LinkedProtocol(HttpToolsProtocol):
    """uvicorn's httptools protocol, with a `ServerLink` in each request's scope
    (`extensions[CLIENT_LINK]`), and each request's whole body handed to the app's
    `ON_BODY` callback, if its lifespan state has one, as soon as it came."""

    link: ClientLink

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self.link = ClientLink(transport, self.flow)

    def on_message_begin(self) -> None:
        super().on_message_begin()
        self.scope["extensions"] = {}

    def on_headers_complete(self) -> None:
        super().on_headers_complete()
        cycle = self.cycle
        if cycle is not None and cycle.scope is self.scope:  # not an upgrade
            link = ServerLink(self.link, _held_weakly(cycle.send))
            self.scope["extensions"][CLIENT_LINK] = link  # type: ignore[assignment]

    def on_message_complete(self) -> None:
        super().on_message_complete()
        cycle, callback = self.cycle, self.app_state.get(ON_BODY)
        if callback is None or cycle is None or cycle.scope is not self.scope:
            return
        if not cycle.more_body and not cycle.response_started:  # the body came whole
            callback(self.scope, bytes(cycle.body))

    def resume_writing(self) -> None:
        super().resume_writing()
        self.link.resumed()


def _held_weakly(send: Any) -> Send:
    """The request cycle's `send`, not keeping the cycle alive: the cycle's scope keeps the
    link, so a link that kept the cycle would make each request a reference cycle, freed only
    by a full collection (all of them at once, in one long pause of the event loop)."""
    method = weakref.WeakMethod(send)

    def sent(message: Message) -> Any:
        bound = method()
        if bound is None:
            raise RuntimeError("the request is over: its server's send is gone")
        return bound(message)

    return cast(Send, sent)


def sent_at_once(send: Send, message: Message) -> None:
    """`message` sent by the server's `send` now, from a callback. uvicorn's send waits only
    while the client's transport is over its high-water mark (the caller checks it is not:
    `ClientLink.paused`), so it ends at its first step; a send that waits is a bug here."""
    step = send(message)
    assert isinstance(step, Coroutine)
    try:
        step.send(None)
    except StopIteration:
        return
    step.close()
    raise RuntimeError("the server's send waited: it must be sent from a task")


class Pipe:
    """The rest of the upstream's `body` (the lean transport's, `_Body.detach`), from its
    head on, judged and written to the client read by read until its end.

    The first bytes to pass on start the response (`start`: its head sent at once) and go in
    its first chunk; `begun` is then True. If the client cannot take them at once (its
    transport paused) or went away, they are `early`, the body pauses, and `begun` is True:
    the request's task sends the head and them, then resumes the body. An answer that ends
    before any byte passed (held whole, or failed) leaves the response unstarted: `begun` is
    False, for the library to go on from the call's outcome. `ended`: the body's end (None)
    or the failure to read it, which is also the call's outcome (`fast.failure`).
    Cancelled (the client went away), the caller's closing of the upstream's response
    releases its connection."""

    def __init__(
        self, fast: FastPath, body: Any, link: ClientLink, start: Callable[[], None]
    ) -> None:
        self.fast, self.body, self.link, self.start = fast, body, link, start
        loop = asyncio.get_running_loop()
        self.begun: asyncio.Future[bool] = loop.create_future()
        self.ended: asyncio.Future[None] = loop.create_future()
        self.early = b""
        body.detach(self.received, self.end)

    def received(self, data: bytes) -> None:
        link, body = self.link, self.body
        if link.gone:  # the client went away: its task is (or will be) cancelled
            body.pause()
            self.began()
            return
        if not (out := self.fast.judge(data)):
            return
        if not self.begun.done():
            if link.paused:
                self.early = out
                body.pause()
                self.began()
                return
            try:
                self.start()
            except Exception as exc:  # a bug: the request's task fails with it
                body.pause()
                self.begun.set_exception(exc)
                return
            self.began()
        link.write(out)
        if link.paused:
            body.pause()
            link.when_drained(body.resume)

    def began(self) -> None:
        if not self.begun.done():
            self.begun.set_result(True)

    def end(self, failure: Exception | None) -> None:
        if failure is not None:
            self.fast.failure = self.fast.provider.read_failure(failure)
        if not self.ended.done():
            if failure is None:
                self.fast.end_now()  # the response's end sent from here, when it can be
            self.ended.set_result(None)
        if not self.begun.done():
            self.begun.set_result(False)

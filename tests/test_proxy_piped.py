"""`PipedResponse`'s watch for the client going away, driven at the ASGI interface: only the
server's `http.disconnect` ends the stream. A `receive` that fails says nothing about the
client (a server's receive channel can break, or be wrapped by middleware that raises): the
stream must go on to its end, not be cut short with no error and, before its first byte, no
response at all."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chatcli.proxy.passthrough import PipedResponse

SCOPE = {"type": "http", "asgi": {"version": "3.0", "spec_version": "2.4"}}
CHUNKS = [b"data: one\n\n", b"data: two\n\n", b"data: three\n\n"]


class Server:
    """What the ASGI server sees: the messages sent, and a client whose `receive` is scripted
    (`events`: each an ASGI message to return, or an exception to raise, once `go` is set)."""

    def __init__(self, events: list[dict[str, Any] | BaseException]) -> None:
        self.events = events
        self.sent: list[dict[str, Any]] = []
        self.go = asyncio.Event()

    async def receive(self) -> dict[str, Any]:
        await self.go.wait()
        if not self.events:
            await asyncio.Event().wait()  # the client stays: nothing more to receive
        event = self.events.pop(0)
        if isinstance(event, BaseException):
            raise event
        return event

    async def send(self, message: dict[str, Any]) -> None:
        self.sent.append(message)

    def body(self) -> bytes:
        return b"".join(m.get("body", b"") for m in self.sent[1:])

    def completed(self) -> bool:
        last = self.sent[-1] if self.sent else {}
        return last.get("type") == "http.response.body" and not last.get("more_body", False)


def streamed(server: Server) -> AsyncIterator[bytes]:
    """The answer: each chunk after a pause, the client's `receive` let go after the first
    (so whatever it returns or raises lands while the stream runs)."""

    async def chunks() -> AsyncIterator[bytes]:
        for i, chunk in enumerate(CHUNKS):
            yield chunk
            if i == 0:
                server.go.set()
            for _ in range(5):
                await asyncio.sleep(0)

    return chunks()


async def test_a_failing_receive_does_not_cut_the_stream() -> None:
    server = Server([OSError("receive channel broken")])
    response = PipedResponse(streamed(server), media_type="text/event-stream")
    await asyncio.wait_for(response(SCOPE, server.receive, server.send), 5)
    assert server.body() == b"".join(CHUNKS)
    assert server.completed()


async def test_request_messages_before_the_disconnect_are_ignored() -> None:
    server = Server([{"type": "http.request", "body": b"", "more_body": False}] * 3)
    response = PipedResponse(streamed(server), media_type="text/event-stream")
    await asyncio.wait_for(response(SCOPE, server.receive, server.send), 5)
    assert server.body() == b"".join(CHUNKS)
    assert server.completed()


async def test_a_disconnect_ends_the_stream_quietly() -> None:
    server = Server([{"type": "http.disconnect"}])
    closed = asyncio.Event()

    async def endless() -> AsyncIterator[bytes]:
        try:
            yield CHUNKS[0]
            server.go.set()
            while True:
                await asyncio.sleep(0.01)
                yield b": keep-alive\n\n"
        finally:
            closed.set()

    response = PipedResponse(endless(), media_type="text/event-stream")
    await asyncio.wait_for(response(SCOPE, server.receive, server.send), 5)
    assert closed.is_set()  # the stream (and so the upstream's response) was released
    assert server.body().startswith(CHUNKS[0])
    assert not server.completed()


async def test_a_cancellation_from_the_server_is_not_swallowed() -> None:
    server = Server([])
    response = PipedResponse(streamed(server), media_type="text/event-stream")
    task = asyncio.create_task(response(SCOPE, server.receive, server.send))
    while not server.go.is_set():
        await asyncio.sleep(0)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

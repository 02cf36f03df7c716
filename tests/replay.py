"""A local HTTP server that replays scripted responses, for testing adapters with real SDKs.

Each request takes the next `Scripted` answer from the queue (status, headers, and either a
body or a list of server-sent events, optionally cut off before the end) and is recorded, so a
test can assert what the SDK sent. `connections` counts the TCP connections accepted, so a test
can see whether an SDK client reuses its pooled connection. Binds 127.0.0.1 on a free port.

`serving` runs any standard-library server in a thread and stops it at once: `serve_forever`
looks for a shutdown request only between waits on its listening socket, so the socket is shut
down first, which wakes that wait (Linux); elsewhere the short poll bounds the wait.
"""

from __future__ import annotations

import contextlib
import json
import socket
import socketserver
import threading
import time
from collections import deque
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from contextlib import asynccontextmanager, contextmanager
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from chatcli.providers.adapter import Adapter


@dataclass(frozen=True, slots=True, kw_only=True)
class Scripted:
    """One scripted answer. `body` may be str, bytes or a JSON-able object.

    `events`: SSE data payloads (str, or objects dumped as JSON), sent as a stream instead of
    `body`; an `(event_name, data)` pair sends a named event. `close_early`: drop the
    connection after sending the events (a stream without its terminator). `drop`: close the
    connection without answering at all (a kept-alive connection the server closed as the
    client reused it: the client sees no byte of an answer).
    """

    status: int = 200
    body: Any = None
    events: Sequence[Any] | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    close_early: bool = False
    drop: bool = False
    event_pause: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Recorded:
    method: str
    path: str
    headers: Mapping[str, str]
    body: bytes

    def json(self) -> Any:
        return json.loads(self.body)


class ReplayServer:
    """Serves `Scripted` answers in order; an empty queue answers 599 (a test bug)."""

    def __init__(self) -> None:
        self.queue: deque[Scripted] = deque()
        self.requests: list[Recorded] = []
        self.connections = 0
        self.lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def add(self, *answers: Scripted) -> None:
        self.queue.extend(answers)


POLL_INTERVAL_S = 0.01  # serve_forever's wait where shutting the socket down does not wake it


@contextmanager
def serving(server: socketserver.TCPServer) -> Iterator[None]:
    """`server.serve_forever()` in a daemon thread while the block runs; on exit the server is
    shut down without waiting for its poll, and closed."""
    thread = threading.Thread(target=server.serve_forever, args=(POLL_INTERVAL_S,), daemon=True)
    thread.start()
    try:
        yield
    finally:
        with contextlib.suppress(OSError):  # "not connected" (macOS): the poll ends the wait
            server.socket.shutdown(socket.SHUT_RDWR)
        server.shutdown()
        server.server_close()


def _encode_body(body: Any) -> tuple[bytes, str]:
    if body is None:
        return b"", "application/json"
    if isinstance(body, bytes):
        return body, "application/octet-stream"
    if isinstance(body, str):
        return body.encode(), "text/plain; charset=utf-8"
    return json.dumps(body).encode(), "application/json"


def _encode_event(event: Any) -> bytes:
    name, data = event if isinstance(event, tuple) else (None, event)
    text = data if isinstance(data, str) else json.dumps(data)
    head = f"event: {name}\n" if name else ""
    return f"{head}data: {text}\n\n".encode()


def _handler_for(server: ReplayServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:  # quiet
            pass

        def setup(self) -> None:  # once per accepted connection, each in its own thread
            super().setup()
            with server.lock:
                server.connections += 1

        def _serve(self) -> None:
            length = int(self.headers.get("content-length") or 0)
            body = self.rfile.read(length) if length else b""
            server.requests.append(
                Recorded(method=self.command, path=self.path, headers=dict(self.headers), body=body)
            )
            answer = server.queue.popleft() if server.queue else Scripted(status=599, body={})
            if answer.drop:
                self.close_connection = True
            elif answer.events is not None:
                self._stream(answer)
            else:
                self._plain(answer)

        def _plain(self, answer: Scripted) -> None:
            payload, ctype = _encode_body(answer.body)
            self.send_response(answer.status)
            self.send_header("content-type", answer.headers.get("content-type", ctype))
            for k, v in answer.headers.items():
                if k.lower() != "content-type":
                    self.send_header(k, v)
            self.send_header("content-length", str(len(payload)))
            self.end_headers()
            self.wfile.write(payload)

        def _stream(self, answer: Scripted) -> None:
            self.send_response(answer.status)
            self.send_header("content-type", "text/event-stream")
            for k, v in answer.headers.items():
                self.send_header(k, v)
            if answer.close_early:
                self.send_header("connection", "close")
                self.close_connection = True
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            try:
                for event in answer.events or ():
                    time.sleep(answer.event_pause)
                    chunk = _encode_event(event)
                    self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                    self.wfile.flush()
                if not answer.close_early:
                    self.wfile.write(b"0\r\n\r\n")
            except (BrokenPipeError, ConnectionResetError):  # the client went away
                self.close_connection = True

        do_GET = do_POST = _serve

    return Handler


@contextmanager
def replay_server() -> Iterator[ReplayServer]:
    server = ReplayServer()
    with serving(server._server):
        yield server


@asynccontextmanager
async def adapters_closed() -> AsyncIterator[None]:
    """Close, at the end, every adapter whose SDK clients were used inside (an adapter keeps
    its clients, and their pooled connections, until closed)."""
    used: list[Adapter] = []
    sync_client, async_client = Adapter._client, Adapter._aclient

    def record_sync(self: Adapter) -> Any:
        used.append(self)
        return sync_client(self)

    def record_async(self: Adapter) -> Any:
        used.append(self)
        return async_client(self)

    Adapter._client, Adapter._aclient = record_sync, record_async  # type: ignore[method-assign]
    try:
        yield
    finally:
        Adapter._client, Adapter._aclient = sync_client, async_client  # type: ignore[method-assign]
        for adapter in dict.fromkeys(used):
            await adapter.aclose()

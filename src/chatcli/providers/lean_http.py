"""A lean HTTP/1.1 transport for httpx, for the proxy's passthrough (`OpenAIBase.apassthrough`).

The passthrough reads every event of every streamed answer, and under load that read was about
half of the proxy's CPU per event (benchmarks/proxy.py --profile): httpcore's connection (h11's
state machine, anyio's stream and locks) around each read. This transport does what that path
needs and no more, on a plain asyncio connection: the request written in one go, the status
line and headers read in one `readuntil`, the body decoded read by read (chunked, a length, or
until the connection closes), each read handed on as it comes (never held for more), and
connections kept alive per origin (bounded like httpx's pool: `httpx.Limits`). TLS is the ssl
module's, with httpx's own default context. httpx stays in front of it (`AsyncClient`: the
base URL, the headers, the timeouts; not proxies from the environment, which httpx takes only
with its own transport: behind one, the proxy's fast path is off,
`OpenAIBase.passthrough_direct`) and above it (`httpx.Response`), so the adapter's code is
the same with either transport. The client's per-request layers (building the request from
the base URL and its headers, auth, redirects, hooks: ~0.15 ms of CPU per request, more than
this transport's own send) are done once per client and URL by a `Route`, which then hands
each request straight to the transport. A response's body can also hand its reads to
callbacks where they arrive (`_Body.detach`, in the response's extensions under
`DETACHABLE`): the proxy pipes them to its client with no task woken per read
(`chatcli.proxy.pipe`). And a request can be written from a callback (`Route.send_now`, when
a connection is idle and a slot free: no wait), its answer read later by the task that
sends it (`Route.send(sent=)`): the proxy forwards a request from the server's callback
that read it, not one turn of a busy event loop later.

Its failures are httpx's exceptions, with httpcore's messages, so they are classified as they
were (`chatcli.errors`): a refused connection is `ConnectError`, a timeout `ConnectTimeout` /
`ReadTimeout` / `WriteTimeout` / `PoolTimeout`, a connection that closed before any answer is
the `RemoteProtocolError` "...without sending a response" that `chatcli.retry.never_answered`
recognises, one that closed inside the body says so too. A scheme other than http/https is
httpx's `UnsupportedProtocol`, as with httpx's own transport.
"""

from __future__ import annotations

import asyncio
import ssl
import time
from collections.abc import AsyncIterator, Callable, Coroutine, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

import httpx

__all__ = [
    "DETACHABLE",
    "NEVER_ANSWERED",
    "SENT",
    "Dechunker",
    "LeanTransport",
    "Route",
    "parse_head",
]

# The response extension holding its body, whose reads can be handed to callbacks (`detach`).
DETACHABLE = "chatcli.detachable"
# The request extension of a request already written (`LeanTransport.send_now`): its `_Sent`.
SENT = "chatcli.sent"
NEVER_ANSWERED = "Server disconnected without sending a response."
_CUT = "peer closed connection without sending complete message body"
_READ_SIZE = 65536
_HEAD_LIMIT = 1 << 20  # a response head beyond 1 MiB is not an HTTP server's
_NO_BODY = frozenset({204, 304})
_DEFAULT_PORTS = {"http": 80, "https": 443}

_T = TypeVar("_T")
Origin = tuple[str, str, int]


@dataclass(slots=True, eq=False)
class _Connection:
    """One kept-alive connection, with when it was last handed back (for the expiry)."""

    reader: asyncio.StreamReader
    writer: asyncio.StreamWriter
    idle_since: float = 0.0

    def reusable(self, now: float, expiry: float | None) -> bool:
        """Whether the server has not closed it (its end seen) and it has not idled too long."""
        if self.reader.at_eof() or self.writer.is_closing():
            return False
        return expiry is None or now - self.idle_since < expiry

    def close(self) -> None:
        self.writer.close()


@dataclass(slots=True, eq=False)
class _Sent:
    """A request written by `LeanTransport.send_now` on a kept-alive connection, its slot
    taken: its answer is `handle_async_request`'s to read."""

    connection: _Connection
    origin: Origin


@dataclass(slots=True)
class Dechunker:
    """The chunked transfer coding undone read by read (`feed` gives the payload `data`
    completes, as soon as it comes, part of a chunk included); `done` once the last chunk and
    its trailers came. A malformed size line raises httpx's RemoteProtocolError."""

    pending: bytes = b""  # an unfinished size line, chunk end or trailer line
    left: int = 0  # the current chunk's payload bytes still to come
    state: str = "size"  # size, data, end (its CRLF), trailer, done
    parts: list[bytes] = field(default_factory=list)

    @property
    def done(self) -> bool:
        return self.state == "done"

    def feed(self, data: bytes) -> bytes:
        if self.state == "size" and not self.pending and data.endswith(b"\r\n"):
            # The usual read of a stream: one whole chunk (one event, as a server writes
            # it), cut out of its framing with no loop; any other read goes through it.
            eol = data.find(b"\n")
            try:
                length = int(data[:eol], 16)  # int() ignores the CR (whitespace)
            except ValueError:
                length = 0  # an extension, or no size: the loop reads it, or refuses it
            if length > 0 and eol + length + 3 == len(data):
                return data[eol + 1 : -2]
        buffer = self.pending + data if self.pending else data
        parts, at, size = self.parts, 0, len(buffer)
        while at < size:
            if self.state == "data":
                part = buffer[at : at + self.left]
                parts.append(part)
                at += len(part)
                self.left -= len(part)
                if not self.left:
                    self.state = "end"
                continue
            end = buffer.find(b"\n", at)
            if end < 0:
                break
            line = buffer[at:end].rstrip(b"\r")
            at = end + 1
            if self.state == "size":
                self.left = _chunk_size(line)
                self.state = "data" if self.left else "trailer"
            elif self.state == "end":
                if line:
                    raise httpx.RemoteProtocolError("a chunk longer than its size line said")
                self.state = "size"
            elif self.state == "trailer" and not line:
                self.state = "done"
                break
        self.pending = buffer[at:] if at < size and self.state != "done" else b""
        out = parts[0] if len(parts) == 1 else b"".join(parts)
        parts.clear()
        return out


def _chunk_size(line: bytes) -> int:
    try:
        size = int(line.partition(b";")[0], 16)
    except ValueError:
        size = -1
    if size < 0:
        raise httpx.RemoteProtocolError(f"an invalid chunk size line: {line[:40]!r}")
    return size


@dataclass(frozen=True, slots=True)
class _Head:
    """A response's status line and headers, and how its body is framed: `length` bytes,
    chunked, or (None, not chunked) until the connection closes."""

    status: int
    reason: bytes
    headers: list[tuple[bytes, bytes]]
    chunked: bool
    length: int | None
    keep_alive: bool


def parse_head(raw: bytes, *, method: bytes) -> _Head:
    """A response head (status line and header lines, up to its blank line): its framing by
    RFC 9112 section 6.3 (no body for HEAD, 204 and 304; chunked wins over a length)."""
    lines = raw.rstrip(b"\r\n").split(b"\r\n")
    version, _, rest = lines[0].partition(b" ")
    code, _, reason = rest.partition(b" ")
    if not version.startswith(b"HTTP/1.") or not code.isdigit() or len(code) != 3:
        raise httpx.RemoteProtocolError(f"not an HTTP/1.1 status line: {lines[0][:80]!r}")
    headers: list[tuple[bytes, bytes]] = []
    coding = length = connection = b""
    for line in lines[1:]:
        name, colon, value = line.partition(b":")
        if not colon or not name or name != name.strip():
            raise httpx.RemoteProtocolError(f"an invalid header line: {line[:80]!r}")
        value = value.strip()
        headers.append((name, value))
        lower = name.lower()
        if lower == b"transfer-encoding":
            coding = value.lower()
        elif lower == b"content-length":
            length = value
        elif lower == b"connection":
            connection = value.lower()
    status = int(code)
    chunked = coding.rsplit(b",", 1)[-1].strip() == b"chunked"
    size: int | None = None
    if method == b"HEAD" or status in _NO_BODY or 100 <= status < 200:
        chunked, size = False, 0
    elif not chunked and length:
        if not length.isdigit():
            raise httpx.RemoteProtocolError(f"an invalid Content-Length: {length[:40]!r}")
        size = int(length)
    close = b"close" in connection or version == b"HTTP/1.0"
    keep_alive = not close and (chunked or size is not None)
    return _Head(status, reason, headers, chunked, size, keep_alive)


class LeanTransport(httpx.AsyncBaseTransport):
    """httpx's transport for the passthrough (see the module docstring): HTTP/1.1 over
    asyncio, connections kept alive per origin, `limits` as httpx's pool takes them."""

    def __init__(
        self,
        limits: httpx.Limits,
        ssl_context: Callable[[], ssl.SSLContext] = httpx.create_ssl_context,
    ) -> None:
        self.limits = limits
        self.idle: dict[Origin, list[_Connection]] = {}
        self._slots: asyncio.Semaphore | None = None
        self._ssl: ssl.SSLContext | None = None
        self._ssl_context = ssl_context

    @property
    def slots(self) -> asyncio.Semaphore:
        """The connections that may be open at once (`limits.max_connections`)."""
        if self._slots is None:
            self._slots = asyncio.Semaphore(self.limits.max_connections or 1 << 30)
        return self._slots

    def send_now(self, request: httpx.Request, body: bytes) -> bool:
        """`request` (whose body is `body`) written now, with no wait: when a slot is free
        and a kept-alive connection to its origin is idle. True: written, and marked so
        (`SENT`): `handle_async_request` must read its answer (sending it again on a new
        connection if the kept one turns out closed, as for any request). False: nothing
        was done."""
        url = request.url
        if url.scheme not in _DEFAULT_PORTS or self.slots.locked():
            return False
        origin = (url.scheme, url.host, url.port or _DEFAULT_PORTS[url.scheme])
        connection = self.kept(origin)
        if connection is None:
            return False
        try:
            connection.writer.writelines(_request_bytes(request, body))
        except OSError:
            connection.close()
            return False
        _at_once(self.slots.acquire())  # free (not `locked`): taken with no wait
        request.extensions = {**request.extensions, SENT: _Sent(connection, origin)}
        return True

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        url = request.url
        if url.scheme not in _DEFAULT_PORTS:
            raise httpx.UnsupportedProtocol(f"Request URL has an unsupported protocol '{url}'.")
        timeouts: dict[str, float | None] = request.extensions.get("timeout", {})
        origin = (url.scheme, url.host, url.port or _DEFAULT_PORTS[url.scheme])
        sent = request.extensions.get(SENT)
        if isinstance(sent, _Sent):  # written, its slot taken (`send_now`): read here, once
            request.extensions = {k: v for k, v in request.extensions.items() if k != SENT}
            origin = sent.origin
        else:
            await _within(timeouts.get("pool"), self.slots.acquire(), httpx.PoolTimeout)
            sent = None
        try:
            connection, head = await self.exchange(request, origin, timeouts, sent)
        except BaseException:
            self.slots.release()
            raise
        body = _Body(self, origin, connection, head, timeouts.get("read"))
        return httpx.Response(
            head.status,
            headers=head.headers,
            stream=body,
            extensions={
                "http_version": b"HTTP/1.1",
                "reason_phrase": head.reason,
                DETACHABLE: body,
            },
        )

    async def exchange(
        self,
        request: httpx.Request,
        origin: Origin,
        timeouts: Mapping[str, float | None],
        sent: _Sent | None = None,
    ) -> tuple[_Connection, _Head]:
        """The request sent and its response head read, on a kept-alive connection to
        `origin` if one is still open, else on a new one (`sent`: written already on a
        kept-alive one, `send_now`). A kept-alive connection that fails
        before any byte of an answer (the server closed it as it was reused: a race the
        server's close loses by microseconds, every time with llama-server, which closes after
        each streamed answer) is dropped and the request sent again on a new one, once, as
        browsers do: that server never took it. On a new connection that failure is raised
        (`chatcli.retry.never_answered` knows it)."""
        kept = self.kept(origin) if sent is None else sent.connection
        if kept is not None:
            try:
                return kept, await self.answered(kept, request, timeouts, sent is not None)
            except (httpx.RemoteProtocolError, httpx.WriteError, httpx.ReadError) as exc:
                kept.close()
                if isinstance(exc, httpx.RemoteProtocolError) and str(exc) != NEVER_ANSWERED:
                    raise
            except BaseException:
                kept.close()
                raise
        connection = await self.opened(origin, timeouts.get("connect"))
        try:
            return connection, await self.answered(connection, request, timeouts)
        except BaseException:
            connection.close()
            raise

    async def answered(
        self,
        connection: _Connection,
        request: httpx.Request,
        timeouts: Mapping[str, float | None],
        written: bool = False,
    ) -> _Head:
        """`request` written on `connection` (`written`: it was, `send_now`), and the head of
        its final response (any informational one skipped)."""
        await self.write(connection, request, timeouts.get("write"), written)
        method = request.method.encode()
        while True:
            raw = await _within(timeouts.get("read"), _read_head(connection), httpx.ReadTimeout)
            if not 100 <= (head := parse_head(raw, method=method)).status < 200:
                return head

    def kept(self, origin: Origin) -> _Connection | None:
        """The kept-alive connection to `origin` last handed back that is still usable."""
        idle, now = self.idle.get(origin), time.monotonic()
        while idle:
            connection = idle.pop()
            if connection.reusable(now, self.limits.keepalive_expiry):
                return connection
            connection.close()
        return None

    async def opened(self, origin: Origin, timeout: float | None) -> _Connection:
        """A new connection to `origin` (TLS for https)."""
        scheme, host, port = origin
        tls = self.tls() if scheme == "https" else None
        opened = asyncio.open_connection(
            host, port, ssl=tls, server_hostname=host if tls else None, limit=_HEAD_LIMIT
        )
        try:
            reader, writer = await _within(timeout, opened, httpx.ConnectTimeout)
        except OSError as exc:
            raise httpx.ConnectError(str(exc)) from exc
        return _Connection(reader, writer)

    def tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = self._ssl_context()
        return self._ssl

    async def write(
        self,
        connection: _Connection,
        request: httpx.Request,
        timeout: float | None,
        written: bool = False,
    ) -> None:
        """The request line, headers and body, in one write (`written`: done already, its
        end is waited for)."""
        try:
            if not written:
                connection.writer.writelines(_request_bytes(request, await request.aread()))
            await _within(timeout, connection.writer.drain(), httpx.WriteTimeout)
        except OSError as exc:
            raise httpx.WriteError(str(exc)) from exc

    def handed_back(self, origin: Origin, connection: _Connection) -> None:
        """A connection whose response was read to its end: kept for the next request to the
        same origin, up to `limits.max_keepalive_connections` in all, else closed."""
        kept = sum(map(len, self.idle.values()))
        limit = self.limits.max_keepalive_connections
        if (limit is not None and kept >= limit) or connection.writer.is_closing():
            connection.close()
            return
        connection.idle_since = time.monotonic()
        self.idle.setdefault(origin, []).append(connection)

    async def aclose(self) -> None:
        """Close the kept connections, and wait (a second at most, then abort them) for them
        to end: a TLS connection's close is an exchange with the server, and a loop closed
        before it ended holds an open transport (uvloop then refuses to close it: EBUSY)."""
        connections = [c for kept in self.idle.values() for c in kept]
        self.idle.clear()
        for connection in connections:
            connection.close()
        closed = (c.writer.wait_closed() for c in connections)
        try:
            await asyncio.wait_for(asyncio.gather(*closed, return_exceptions=True), 1.0)
        except TimeoutError:
            for connection in connections:
                connection.writer.transport.abort()


@dataclass(frozen=True, slots=True)
class Route:
    """An httpx client's POSTs to one URL, handed straight to its `LeanTransport`.

    What the client's layers do for such a request is done once (`Route.of`: the URL joined
    to the base URL, the client's headers and Host, the timeouts) or per request as the client
    does it: the response's `request`, the request on a failure (httpx's `request_context`:
    the same exceptions), cookies the server sets (kept in the client's jar). A request the
    layers would change goes through the client itself: always when `transport` is None (a
    transport mounted for this URL, credentials in the URL, the client's auth, hooks or
    redirects), and while the jar holds cookies (for the client to send them)."""

    client: httpx.AsyncClient
    url: httpx.URL
    headers: tuple[tuple[bytes, bytes], ...]  # the client's, Host first, no Content-Length
    extensions: Mapping[str, Any]  # the client's timeouts
    transport: LeanTransport | None

    @classmethod
    def of(cls, client: httpx.AsyncClient, url: str) -> Route:
        template = client.build_request("POST", url)
        transport = client._transport_for_url(template.url)
        direct = (
            not template.url.userinfo
            and client.auth is None
            and not any(client.event_hooks.values())
            and not client.follow_redirects
        )
        lean = transport if direct and isinstance(transport, LeanTransport) else None
        headers = tuple(p for p in template.headers.raw if p[0].lower() != b"content-length")
        return cls(client, template.url, headers, template.extensions, lean)

    def send_now(self, body: bytes) -> httpx.Request | None:
        """`body` POSTed now, from a callback, when the transport can write it with no wait
        (`LeanTransport.send_now`): the request, whose answer `send(sent=)` reads. None:
        nothing was sent (no idle connection or free slot, or the client's layers apply)."""
        transport = self.transport
        if transport is None or self.client.cookies:
            return None
        request = self.request(body)
        return request if transport.send_now(request, body) else None

    def request(self, body: bytes) -> httpx.Request:
        """The request POSTing `body`, as the client would build it."""
        return httpx.Request(
            "POST",
            self.url,
            headers=[*self.headers, (b"Content-Length", b"%d" % len(body))],
            stream=httpx.ByteStream(body),
            extensions=self.extensions,
        )

    async def send(self, body: bytes, sent: httpx.Request | None = None) -> httpx.Response:
        """`body` POSTed (`sent`: by `send_now` already, its answer read here): the
        response, its body still to be read (`AsyncClient.send`'s `stream=True`)."""
        client, transport = self.client, self.transport
        if sent is None and (transport is None or client.cookies):
            request = client.build_request("POST", self.url, content=body)
            return await client.send(request, stream=True)
        assert transport is not None
        request = self.request(body) if sent is None else sent
        try:
            response = await transport.handle_async_request(request)
        except httpx.RequestError as exc:
            exc.request = request
            raise
        response.request = request
        if "set-cookie" in response.headers:
            client.cookies.extract_cookies(response)
        return response


class _Body(httpx.AsyncByteStream):
    """A response's body, read by read; at its end (or when closed before it) the connection
    goes back to the pool if it can be reused, else it is closed, and its slot is freed.

    The read timeout is one timer per body, not one per read (arming and cancelling a timer
    for each of an answer's reads cost more than decoding it): a read notes when it began to
    wait; the timer, when it fires, fails the read that has waited `timeout` seconds (httpx's
    ReadTimeout, set on the connection's reader) or comes back when the one waiting now
    would have."""

    def __init__(
        self,
        transport: LeanTransport,
        origin: Origin,
        connection: _Connection,
        head: _Head,
        timeout: float | None,
    ) -> None:
        self.transport, self.origin, self.connection = transport, origin, connection
        self.head, self.timeout = head, timeout
        self.complete = head.length == 0
        self.closed = False
        self.chunks = Dechunker()
        self.got = 0  # the body's bytes come so far, when it has a length
        # While detached (`detach`): the callbacks, None once the body ended.
        self.received: Callable[[bytes], None] | None = None
        self.ended: Callable[[Exception | None], None] | None = None
        self.stream_protocol: asyncio.BaseProtocol | None = None
        self.loop = asyncio.get_running_loop()
        self.waiting_since: float | None = None  # when the read now waiting began
        self.timer: asyncio.TimerHandle | None = None

    async def __aiter__(self) -> AsyncIterator[bytes]:
        if self.timeout is not None:
            self.timer = self.loop.call_later(self.timeout, self.watch)
        try:
            while not self.complete:
                if data := await self.read(_READ_SIZE):
                    if out := self.payload(data):
                        yield out
                else:
                    self.closed_by_peer()
        finally:
            await self.aclose()

    def payload(self, data: bytes) -> bytes:
        """What of a read `data` is the body's, by its framing (chunked, a length, or until
        the connection closes); `complete` once it came whole."""
        head = self.head
        if head.chunked:
            out = self.chunks.feed(data)
            self.complete = self.chunks.done
            return out
        if head.length is not None:
            out = data[: head.length - self.got]
            self.got += len(out)
            self.complete = self.got == head.length
            return out
        return data

    def closed_by_peer(self) -> None:
        """The connection's end, read: the body's end when it runs until then, else a body
        cut short (httpx's RemoteProtocolError, with httpcore's message)."""
        head = self.head
        if head.chunked:
            raise httpx.RemoteProtocolError(f"{_CUT}: incomplete chunked read")
        if head.length is not None:
            raise httpx.RemoteProtocolError(
                f"{_CUT}: received {self.got} bytes, expected {head.length}"
            )
        self.complete = True

    def detach(
        self, received: Callable[[bytes], None], ended: Callable[[Exception | None], None]
    ) -> None:
        """The rest of the body handed to callbacks, read by read, in place of the reads of
        `__aiter__` (which must not be iterated again): the connection's protocol is replaced
        (`_Detached`), so each read of the body is `received` where it arrives, with no task
        woken, and `ended` once (None: the body came whole, and the connection is back on its
        stream, to be kept alive; else the failure a read would have raised). What the
        connection's reader already held is received first. `pause` and `resume` stop and
        restart the reading (the client's flow control); `aclose` before the end releases the
        connection, and calls nothing more."""
        reader, transport = self.connection.reader, self.socket
        self.stream_protocol = transport.get_protocol()
        self.received, self.ended = received, ended
        ahead: bytearray = reader._buffer  # type: ignore[attr-defined]  # no API gives it
        held = bytes(ahead)
        ahead.clear()
        at_end, failed = reader.at_eof(), reader.exception()
        transport.set_protocol(_Detached(self))
        transport.resume_reading()  # if the reader paused it (its buffer full)
        self.waiting_since = self.loop.time()
        if self.timeout is not None and self.timer is None:
            self.timer = self.loop.call_later(self.timeout, self.watch)
        if held:
            self.arrived(held)
        if (at_end or failed is not None) and self.ended is not None:
            self.lost(failed)

    @property
    def socket(self) -> asyncio.Transport:
        """The connection's transport (a read-write one: asyncio types it by its writer)."""
        return cast(asyncio.Transport, self.connection.writer.transport)

    def arrived(self, data: bytes) -> None:
        """A read of the detached body (`detach`)."""
        received = self.received
        if received is None:  # ended: `received` and `ended` are set and cleared together
            return
        self.waiting_since = self.loop.time()
        try:
            out = self.payload(data)
        except Exception as exc:
            self.finish(exc)
            return
        if out:
            received(out)
        if self.complete:
            self.finish(None)

    def lost(self, exc: BaseException | None) -> None:
        """The detached body's connection closed (`exc`: why, None for the peer's end)."""
        if self.ended is None:
            return
        try:
            if isinstance(exc, httpx.HTTPError):  # the read timeout, set on the reader
                raise exc
            if exc is not None:
                raise httpx.ReadError(str(exc)) from exc
            self.closed_by_peer()
        except httpx.HTTPError as error:
            self.finish(error)
            return
        self.finish(None)

    def finish(self, failure: Exception | None) -> None:
        """The detached body's end: its connection back on its stream when it came whole (and
        the connection is still open), `ended` told."""
        ended, self.ended, self.received = self.ended, None, None
        self.waiting_since = None
        transport = self.socket
        if failure is None and self.complete and not transport.is_closing():
            assert self.stream_protocol is not None
            transport.set_protocol(self.stream_protocol)
            transport.resume_reading()  # paused by the last read's client: kept, it reads
        elif failure is not None:
            self.complete = False
            self.connection.close()
        assert ended is not None
        ended(failure)

    def pause(self) -> None:
        """Stop reading the detached body (the client cannot take more yet): no read
        timeout while paused."""
        if self.ended is not None:
            self.waiting_since = None
            self.socket.pause_reading()

    def resume(self) -> None:
        if self.ended is not None:
            self.waiting_since = self.loop.time()
            self.socket.resume_reading()

    async def read(self, most: int) -> bytes:
        """What the connection has (at most `most` bytes; b"" at its end), waiting for it."""
        self.waiting_since = self.loop.time()
        try:
            return await self.connection.reader.read(most)
        except OSError as exc:
            raise httpx.ReadError(str(exc)) from exc
        finally:
            self.waiting_since = None

    def watch(self) -> None:
        """The read timeout's timer (see the class docstring)."""
        assert self.timeout is not None
        began = self.waiting_since
        if began is not None and self.loop.time() - began >= self.timeout:
            self.timer = None
            if self.ended is not None:
                self.finish(httpx.ReadTimeout("timed out"))
            else:
                self.connection.reader.set_exception(httpx.ReadTimeout("timed out"))
            return
        due = (self.loop.time() if began is None else began) + self.timeout
        self.timer = self.loop.call_at(due, self.watch)

    async def aclose(self) -> None:
        if self.closed:
            return
        self.closed = True
        self.ended = self.received = None  # detached: nothing more is told
        if self.timer is not None:
            self.timer.cancel()
        if self.complete and self.head.keep_alive:
            self.transport.handed_back(self.origin, self.connection)
        else:
            self.connection.close()
        self.transport.slots.release()


class _Detached(asyncio.Protocol):
    """A detached body's connection protocol (`_Body.detach`): each read goes to the body."""

    def __init__(self, body: _Body) -> None:
        self.body = body
        # Each read goes to the body with no call in between (the transport looks the
        # method up on the protocol): the method below is the protocol's type, not its path.
        self.data_received = body.arrived  # type: ignore[method-assign]

    def data_received(self, data: bytes) -> None:
        self.body.arrived(data)

    def eof_received(self) -> bool:
        return False  # the transport closes itself: `connection_lost` follows

    def connection_lost(self, exc: Exception | None) -> None:
        self.body.lost(exc)


def _request_bytes(request: httpx.Request, body: bytes) -> tuple[bytes, bytes, bytes]:
    """The request line and headers, their end, and `body`: the request as written."""
    lines = [b"%s %s HTTP/1.1" % (request.method.encode(), request.url.raw_path)]
    lines.extend(b"%s: %s" % pair for pair in request.headers.raw)
    return b"\r\n".join(lines), b"\r\n\r\n", body


def _at_once(step: Coroutine[Any, Any, Any]) -> None:
    """`step` run to its end now: it must not wait (its caller checked it would not)."""
    try:
        step.send(None)
    except StopIteration:
        return
    step.close()
    raise RuntimeError("a step that was not to wait waited")


async def _read_head(connection: _Connection) -> bytes:
    """A response head, up to its blank line; the connection closing before any of it is
    the server never answering (`NEVER_ANSWERED`)."""
    try:
        return await connection.reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError as exc:
        if not exc.partial:
            raise httpx.RemoteProtocolError(NEVER_ANSWERED) from exc
        raise httpx.RemoteProtocolError(f"{_CUT}: an unfinished response head") from exc
    except asyncio.LimitOverrunError as exc:
        raise httpx.RemoteProtocolError("a response head beyond 1 MiB") from exc
    except OSError as exc:
        raise httpx.ReadError(str(exc)) from exc


async def _within(
    timeout: float | None, work: Coroutine[Any, Any, _T], error: type[httpx.TimeoutException]
) -> _T:
    """`work`, or httpx's `error` if it takes longer than `timeout` seconds (None: no limit)."""
    if timeout is None:
        return await work
    try:
        async with asyncio.timeout(timeout):
            return await work
    except TimeoutError as exc:
        raise error("timed out") from exc

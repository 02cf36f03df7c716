"""The passthrough's lean HTTP/1.1 transport (`chatcli.providers.lean_http`) under
`OpenAIBase.apassthrough`: real recorded streams and errors from the replay server, a real
llama-server, and small asyncio servers for what neither can do on cue (a kept-alive
connection closed while idle, a stream left by its reader, TLS)."""

from __future__ import annotations

import asyncio
import json
import ssl
import subprocess
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import replace
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatcli.errors import ErrorKind, ProviderError
from chatcli.messages import Message
from chatcli.providers.base import Request
from chatcli.providers.lean_http import Dechunker, LeanTransport, Route, parse_head
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.retry import never_answered
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, replay_server

pytest_plugins = ("tests.servers",)

BODY = b'{"model":"gpt-4o","messages":[{"role":"user","content":"Say something."}],"stream":true}'
TEXT = [data for _, data in sse_events("openai-chat-text.txt")]
WIRE = b"".join(f"data: {data}\n\n".encode() for data in TEXT)  # as the replay server writes


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


def adapter_at(url: str) -> OpenAICompatible:
    return OpenAICompatible(url + "/v1", "gpt-4o", environ={})


async def passed(adapter: OpenAICompatible, body: bytes = BODY) -> bytes:
    async with adapter.apassthrough(body) as stream:
        return b"".join([chunk async for chunk in stream.chunks])


def transport_of(adapter: OpenAICompatible) -> LeanTransport:
    transport = adapter._passthrough_route().client._transport
    assert isinstance(transport, LeanTransport)
    return transport


def chunked(payload: bytes, sizes: int = 7) -> bytes:
    """`payload` in chunks of `sizes` bytes, with a chunk extension and a trailer."""
    parts = [payload[i : i + sizes] for i in range(0, len(payload), sizes)]
    body = b"".join(b"%x;ext=1\r\n%s\r\n" % (len(p), p) for p in parts)
    return body + b"0\r\nx-trailer: 1\r\n\r\n"


# --- the pure parts ------------------------------------------------------------------------


def test_a_chunked_body_is_decoded_however_its_reads_are_cut() -> None:
    wire = chunked(WIRE)
    for cut in range(1, 40):
        dechunker, out = Dechunker(), b""
        for at in range(0, len(wire), cut):
            assert not dechunker.done
            out += dechunker.feed(wire[at : at + cut])
        assert out == WIRE and dechunker.done


def test_reads_of_whole_chunks_are_decoded_as_reads_cut_anywhere() -> None:
    # A server writes one chunk per event: each read is one whole chunk (`feed`'s case with
    # no loop) and gives its event; or several, or a chunk and part of the next; or size
    # lines ended by LF alone: the same body.
    events = [f"data: {data}\n\n".encode() for data in TEXT]
    chunks = [b"%x\r\n%s\r\n" % (len(e), e) for e in events] + [b"0\r\n\r\n"]
    lf_only = [c.replace(b"\r\n", b"\n", 1) for c in chunks]
    for wire_chunks in (chunks, lf_only):
        one_by_one = Dechunker()
        assert [one_by_one.feed(chunk) for chunk in wire_chunks] == [*events, b""]
        assert one_by_one.done
        wire = b"".join(wire_chunks)
        pairs = [b"".join(wire_chunks[i : i + 2]) for i in range(0, len(wire_chunks), 2)]
        halves = [wire[: len(wire) // 2 + 1], wire[len(wire) // 2 + 1 :]]
        for reads in (pairs, halves):
            dechunker = Dechunker()
            assert b"".join(map(dechunker.feed, reads)) == WIRE and dechunker.done


def test_a_chunk_is_handed_on_before_it_ends() -> None:
    dechunker = Dechunker()
    assert dechunker.feed(b"10\r\ndata: ") == b"data: "  # 16 bytes said, 6 came: 6 go on
    assert dechunker.feed(b"0123456789\r\n0\r\n\r\n") == b"0123456789"
    assert dechunker.done


@pytest.mark.parametrize(
    "wire", [b"zz\r\n", b"-1\r\n", b"3\r\nabcdef\r\n", b"3\r\nabcd\r\n", b"-3\r\nabc\r\n"]
)
def test_a_malformed_chunked_body_is_a_protocol_error(wire: bytes) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        Dechunker().feed(wire)


@pytest.mark.parametrize(
    ("head", "method", "framing"),
    [
        (b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n", b"POST", (True, None, True)),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 12\r\n\r\n", b"POST", (False, 12, True)),
        (
            b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n",
            b"POST",
            (False, None, False),
        ),
        (
            b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\nConnection: close\r\n\r\n",
            b"POST",
            (False, 3, False),
        ),
        (b"HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\n", b"POST", (False, 3, False)),
        (b"HTTP/1.1 204 No Content\r\n\r\n", b"POST", (False, 0, True)),
        (b"HTTP/1.1 200 OK\r\nContent-Length: 9\r\n\r\n", b"HEAD", (False, 0, True)),
    ],
)
def test_a_response_head_says_how_its_body_ends(
    head: bytes, method: bytes, framing: tuple[bool, int | None, bool]
) -> None:
    parsed = parse_head(head, method=method)
    assert (parsed.chunked, parsed.length, parsed.keep_alive) == framing


@pytest.mark.parametrize(
    "head",
    [b"SSH-2.0-OpenSSH\r\n\r\n", b"HTTP/1.1 200 OK\r\nno colon\r\n\r\n", b"HTTP/1.1 2000\r\n\r\n"],
)
def test_a_head_that_is_not_http_is_a_protocol_error(head: bytes) -> None:
    with pytest.raises(httpx.RemoteProtocolError):
        parse_head(head, method=b"POST")


# --- the replay server: recorded streams and errors ----------------------------------------


async def test_a_chunked_stream_is_the_servers_bytes_over_one_kept_alive_connection(
    upstream: ReplayServer,
) -> None:
    upstream.add(*[Scripted(events=TEXT)] * 3)
    adapter = adapter_at(upstream.url)
    try:
        assert [await passed(adapter) for _ in range(3)] == [WIRE] * 3
        (request, *_) = upstream.requests
        assert request.body == BODY and request.path == "/v1/chat/completions"
        assert {k.lower(): v for k, v in request.headers.items()}["authorization"].startswith(
            "Bearer "
        )
        assert upstream.connections == 1
    finally:
        await adapter.aclose()


async def test_a_body_of_a_given_length_is_read_to_its_end_and_the_connection_kept(
    upstream: ReplayServer,
) -> None:
    upstream.add(*[Scripted(body=WIRE)] * 2)
    adapter = adapter_at(upstream.url)
    try:
        assert [await passed(adapter) for _ in range(2)] == [WIRE] * 2
        assert upstream.connections == 1
    finally:
        await adapter.aclose()


async def test_a_detached_body_is_its_reads_and_its_connection_is_kept_reading(
    upstream: ReplayServer,
) -> None:
    # Handed to callbacks before any read (`_Body.detach`), the body is the server's bytes;
    # a client that paused the reading at each read (the proxy's flow control) leaves the
    # connection paused at the end, and it is kept: the next request on it must be read.
    upstream.add(*[Scripted(events=TEXT)] * 2)
    adapter = adapter_at(upstream.url)
    loop = asyncio.get_running_loop()
    try:
        async with adapter.apassthrough(BODY) as stream:
            body, got = stream.detachable, []
            ended: asyncio.Future[Exception | None] = loop.create_future()

            def received(data: bytes) -> None:
                got.append(data)
                body.pause()
                loop.call_soon(body.resume)

            body.detach(received, ended.set_result)
            assert await asyncio.wait_for(ended, 5) is None
        async with asyncio.timeout(5):
            again = await passed(adapter)
        assert b"".join(got) == again == WIRE
        assert upstream.connections == 1
    finally:
        await adapter.aclose()


def errors_of(record: dict[str, Any]) -> tuple[Any, Any]:
    """The ProviderError of the passthrough and of the SDK's own call for one recorded error."""

    async def both() -> tuple[Any, Any]:
        with replay_server() as server:
            server.add(replayed_error(record), replayed_error(record))
            adapter = adapter_at(server.url)
            try:
                with pytest.raises(ProviderError) as lean:
                    await passed(adapter)
                with pytest.raises(ProviderError) as sdk:
                    async for _ in adapter.astream(Request(messages=(Message.user("Hi"),))):
                        pass
            finally:
                await adapter.aclose()
        return lean.value.info, sdk.value.info

    return asyncio.run(both())


@pytest.mark.parametrize(
    "record",
    [
        r
        for r in provider_errors("openai")
        if r["http_status"] in (400, 401, 403, 404, 429, 500, 503)
    ][:12],
    ids=lambda r: str(r["id"]),
)
def test_an_error_status_is_the_sdks_own_error(record: dict[str, Any]) -> None:
    # The message aside: for a body that is not JSON, `_status_error` (the passthrough's, with
    # either transport) puts the body after the status where the SDK states the status alone.
    lean, sdk = errors_of(record)
    assert replace(lean, message="") == replace(sdk, message="")
    assert lean.status == record["http_status"]


async def test_a_connection_closed_before_any_answer_is_never_answered(
    upstream: ReplayServer,
) -> None:
    upstream.add(Scripted(drop=True))
    adapter = adapter_at(upstream.url)
    try:
        with pytest.raises(ProviderError) as failed:
            await passed(adapter)
        assert never_answered(failed.value)
        assert failed.value.info.kind is ErrorKind.TRANSIENT
    finally:
        await adapter.aclose()


@pytest.mark.parametrize("at_once", [False, True], ids=["sent", "sent_at_once"])
async def test_a_kept_alive_connection_closed_as_it_is_reused_is_replaced_once(
    upstream: ReplayServer, at_once: bool
) -> None:
    # The server closes the kept-alive connection on the second request without answering
    # (llama-server's close after a stream, met by the next request): sent again, on a new
    # one; the same for a request sent at once on it (`passthrough_now`, from a callback).
    upstream.add(Scripted(events=TEXT), Scripted(drop=True), Scripted(events=TEXT))
    adapter = adapter_at(upstream.url)
    try:
        assert await passed(adapter) == WIRE
        early = adapter.passthrough_now(BODY) if at_once else None
        assert (early is not None) == at_once
        async with adapter.apassthrough(BODY, early) as stream:
            assert b"".join([chunk async for chunk in stream.chunks]) == WIRE
        assert len(upstream.requests) == 3 and upstream.connections == 2
    finally:
        await adapter.aclose()


async def test_a_stream_cut_mid_body_fails_its_read_and_is_not_reused(
    upstream: ReplayServer,
) -> None:
    upstream.add(Scripted(events=TEXT[:5], close_early=True), Scripted(events=TEXT))
    adapter = adapter_at(upstream.url)
    try:
        with pytest.raises(ProviderError) as failed:
            await passed(adapter)
        assert failed.value.info.kind is ErrorKind.TRANSIENT and not never_answered(failed.value)
        assert await passed(adapter) == WIRE
        assert upstream.connections == 2
    finally:
        await adapter.aclose()


async def test_a_refused_connection_is_a_transient_connect_error() -> None:
    adapter = adapter_at("http://127.0.0.1:9")
    try:
        with pytest.raises(ProviderError) as failed:
            await passed(adapter)
        assert isinstance(failed.value.__cause__, httpx.ConnectError)
        assert failed.value.info.kind is ErrorKind.TRANSIENT
    finally:
        await adapter.aclose()


# --- small servers for what the replay server cannot do on cue -----------------------------

Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


@asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[str]:
    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            await handler(reader, writer)
        finally:
            writer.close()

    server = await asyncio.start_server(closing, "127.0.0.1", 0, ssl=tls)
    port = server.sockets[0].getsockname()[1]
    async with server:
        yield f"{'https' if tls else 'http'}://127.0.0.1:{port}"


async def request_read(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
    return await reader.readexactly(length)


ANSWER = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ncontent-length: %d\r\n\r\n%s"


async def test_a_kept_alive_connection_the_server_closed_is_not_reused() -> None:
    accepted: list[int] = []

    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        accepted.append(1)
        await request_read(reader)
        writer.write(ANSWER % (len(WIRE), WIRE))  # kept alive by its framing, then closed
        await writer.drain()
        writer.close()

    async with serving(once) as url:
        adapter = adapter_at(url)
        try:
            assert await passed(adapter) == WIRE
            for _ in range(50):  # the server's close reaches the idle connection
                if transport_of(adapter).idle and all(
                    c.reader.at_eof() for cs in transport_of(adapter).idle.values() for c in cs
                ):
                    break
                await asyncio.sleep(0.01)
            assert await passed(adapter) == WIRE
            assert len(accepted) == 2
        finally:
            await adapter.aclose()


async def test_a_reader_that_goes_away_closes_the_upstream_connection_and_frees_its_slot() -> None:
    ended = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_read(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        event = b"data: " + TEXT[0].encode() + b"\n\n"
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
        assert await reader.read() == b""  # the proxy's side closed, nothing else came
        ended.set()
        writer.close()

    async with serving(slow) as url:
        adapter = adapter_at(url)
        try:
            transport = transport_of(adapter)
            free = transport.slots._value

            async def reads_one() -> None:
                async with adapter.apassthrough(BODY) as stream:
                    async for _ in stream.chunks:
                        await asyncio.Event().wait()  # a client that never reads on

            task = asyncio.create_task(reads_one())
            await asyncio.sleep(0.2)
            assert transport.slots._value == free - 1
            task.cancel()
            await asyncio.wait_for(ended.wait(), 5)
            assert transport.slots._value == free and not any(transport.idle.values())
        finally:
            await adapter.aclose()


async def test_a_stream_that_stalls_past_the_timeout_fails_its_read_as_httpx_would() -> None:
    async def stalls(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_read(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n")
        event = b"data: " + TEXT[0].encode() + b"\n\n"
        writer.write(b"%x\r\n%s\r\n" % (len(event), event))
        await writer.drain()
        await reader.read()  # until the proxy's side closes

    async with serving(stalls) as url:
        adapter = OpenAICompatible(url + "/v1", "gpt-4o", environ={}, timeout=0.5)
        try:
            async with adapter.apassthrough(BODY) as stream:
                reads = aiter(stream.chunks)
                assert (await anext(reads)).startswith(b"data: ")
                await asyncio.sleep(0.8)  # a slow reader: not the server's stall
                began = time.monotonic()
                with pytest.raises(ProviderError) as failed:
                    await anext(reads)
                assert time.monotonic() - began >= 0.45  # the read's own wait is timed
            assert isinstance(failed.value.__cause__, httpx.ReadTimeout)
            assert failed.value.info.kind is ErrorKind.TRANSIENT
            assert not any(transport_of(adapter).idle.values())
        finally:
            await adapter.aclose()


async def test_a_body_until_the_connection_closes_is_read_whole_and_not_kept() -> None:
    async def closing(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_read(reader)
        writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\r\n" + WIRE)
        await writer.drain()
        writer.close()

    async with serving(closing) as url:
        adapter = adapter_at(url)
        try:
            assert await passed(adapter) == WIRE
            assert not any(transport_of(adapter).idle.values())
        finally:
            await adapter.aclose()


def self_signed(directory: Path) -> tuple[Path, Path]:
    key, cert = directory / "key.pem", directory / "cert.pem"
    subprocess.run(
        [
            *("openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"),
            *("-subj", "/CN=127.0.0.1", "-addext", "subjectAltName=IP:127.0.0.1"),
            *("-keyout", str(key), "-out", str(cert)),
        ],
        check=True,
        capture_output=True,
    )
    return key, cert


async def test_https_goes_over_tls_with_the_servers_certificate_checked(tmp_path: Path) -> None:
    key, cert = self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_read(reader)
        writer.write(ANSWER % (len(WIRE), WIRE))
        await writer.drain()

    async with serving(answer, server_tls) as url:
        adapter = adapter_at(url)
        try:
            with pytest.raises(ProviderError) as failed:  # httpx's trust: not this certificate
                await passed(adapter)
            assert isinstance(failed.value.__cause__, httpx.ConnectError)
            transport_of(adapter)._ssl = ssl.create_default_context(cafile=cert)
            assert await passed(adapter) == WIRE
        finally:
            await adapter.aclose()


async def test_closing_waits_for_a_kept_tls_connection_to_end(tmp_path: Path) -> None:
    # A TLS close is an exchange with the server: `aclose` returns once it ended, so a loop
    # closed right after holds no open transport (uvloop would refuse to close it).
    key, cert = self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    ended = asyncio.Event()

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await request_read(reader)
        writer.write(ANSWER % (len(WIRE), WIRE))
        await writer.drain()
        if await reader.read() == b"":  # the client's close, seen
            ended.set()

    async with serving(answer, server_tls) as url:
        adapter = adapter_at(url)
        transport_of(adapter)._ssl = ssl.create_default_context(cafile=cert)
        assert await passed(adapter) == WIRE
        kept = [c for idle in transport_of(adapter).idle.values() for c in idle]
        await adapter.aclose()
        assert len(kept) == 1 and kept[0].writer.transport.is_closing()
        await asyncio.sleep(0)  # the server's reader, woken by the close, runs
        assert ended.is_set()


# --- the route: the client's per-request layers done once ---------------------------------


def recording(sent: list[bytes], cookie: bytes = b"") -> Handler:
    """A server that keeps each request's bytes (head and body) in `sent` and answers WIRE,
    setting `cookie` on its first answer."""

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        while True:
            try:
                head = await reader.readuntil(b"\r\n\r\n")
            except asyncio.IncompleteReadError:
                return
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            sent.append(head + await reader.readexactly(length))
            extra = b"set-cookie: %s\r\n" % cookie if cookie and len(sent) == 1 else b""
            writer.write(
                ANSWER.replace(b"\r\n\r\n", b"\r\n" + extra + b"\r\n", 1) % (len(WIRE), WIRE)
            )
            await writer.drain()

    return answer


def lean_client(url: str, **given: Any) -> httpx.AsyncClient:
    headers = {"authorization": "Bearer k", "x-stainless-lang": "python"}
    return httpx.AsyncClient(
        base_url=url, headers=headers, timeout=7, transport=LeanTransport(httpx.Limits()), **given
    )


async def read_whole(response: httpx.Response) -> bytes:
    try:
        return await response.aread()
    finally:
        await response.aclose()


async def test_a_route_sends_what_the_client_would_and_gives_its_response() -> None:
    sent: list[bytes] = []
    async with serving(recording(sent)) as url, lean_client(url + "/v1/") as client:
        route = Route.of(client, "chat/completions")
        assert route.transport is client._transport
        routed = await route.send(BODY)
        assert await read_whole(routed) == WIRE
        request = client.build_request("POST", "chat/completions", content=BODY)
        assert await read_whole(await client.send(request, stream=True)) == WIRE
    assert len(sent) == 2 and sent[0] == sent[1]
    assert sent[0].startswith(b"POST /v1/chat/completions HTTP/1.1\r\nHost: 127.0.0.1:")
    assert routed.request.headers.raw == request.headers.raw
    assert routed.request.extensions == request.extensions
    assert routed.status_code == 200 and routed.request.content == BODY


async def test_cookies_the_server_sets_are_sent_back_as_the_client_would() -> None:
    sent: list[bytes] = []
    cookie = b"lb=a1; Path=/"
    async with serving(recording(sent, cookie)) as url, lean_client(url + "/v1/") as client:
        route = Route.of(client, "chat/completions")
        for _ in range(2):
            assert await read_whole(await route.send(BODY)) == WIRE
    assert b"cookie" not in sent[0].lower()
    assert b"\r\nCookie: lb=a1\r\n" in sent[1]


async def test_what_would_change_the_request_is_left_to_the_client() -> None:
    sent: list[bytes] = []
    async with serving(recording(sent)) as url:
        async with lean_client(url.replace("//", "//u:p@") + "/v1/") as client:
            route = Route.of(client, "chat/completions")
            assert route.transport is None  # credentials in the URL: httpx's basic auth
            assert await read_whole(await route.send(BODY)) == WIRE
        mounts = {"all://": httpx.AsyncHTTPTransport()}  # a proxy's, say
        async with lean_client(url + "/v1/", mounts=mounts) as client:
            assert Route.of(client, "chat/completions").transport is None
    assert b"\r\nAuthorization: Basic dTpw\r\n" in sent[0]


async def test_a_routed_requests_failure_is_httpxs_with_its_request() -> None:
    async with lean_client("http://127.0.0.1:9/v1/") as client:
        route = Route.of(client, "chat/completions")
        with pytest.raises(httpx.ConnectError) as failed:
            await route.send(BODY)
    assert failed.value.request.url == route.url
    assert failed.value.request.headers["content-length"] == str(len(BODY))


async def until(done: Callable[[], bool]) -> None:
    """Turns of the event loop until `done()` (5 s at most)."""
    for _ in range(500):
        if done():
            return
        await asyncio.sleep(0.01)
    raise AssertionError("not done in 5 s")


async def test_a_request_sent_at_once_reaches_the_server_before_its_answer_is_awaited() -> None:
    sent: list[bytes] = []
    async with serving(recording(sent)) as url, lean_client(url + "/v1/") as client:
        route = Route.of(client, "chat/completions")
        transport = client._transport
        assert isinstance(transport, LeanTransport)
        free = transport.slots._value
        assert route.send_now(BODY) is None  # no kept-alive connection yet: nothing sent
        await asyncio.sleep(0.05)
        assert sent == [] and transport.slots._value == free
        assert await read_whole(await route.send(BODY)) == WIRE
        early = route.send_now(BODY)  # from a callback: no task needed, nothing awaited
        assert early is not None and transport.slots._value == free - 1
        await until(lambda: len(sent) == 2)  # the server has it before anyone reads
        answer = await route.send(BODY, early)
        assert await read_whole(answer) == WIRE and answer.request is early
        assert transport.slots._value == free
        assert sum(map(len, transport.idle.values())) == 1  # the one connection, kept
    assert sent[1] == sent[0]  # the same bytes as a request sent by `send`


# --- the real llama-server -----------------------------------------------------------------


@pytest.mark.llama_server
async def test_a_llama_server_stream_is_piped_whole_twice(llama_server: str) -> None:
    adapter = OpenAICompatible(llama_server + "/v1", "chatcli-tiny", environ={})
    body = json.dumps(
        {
            "model": "chatcli-tiny",
            "messages": [{"role": "user", "content": "Once upon a time"}],
            "stream": True,
            "max_tokens": 8,
            "stream_options": {"include_usage": True},
        }
    ).encode()
    try:
        for _ in range(2):  # llama-server closes after a streamed answer: a new connection
            wire = await passed(adapter, body)
            assert wire.rstrip().endswith(b"data: [DONE]")
            shown, outcome = adapter.folded(wire, b"", Request(messages=(Message.user("x"),)))
            assert not isinstance(outcome, Exception) and outcome.message.text == shown
    finally:
        await adapter.aclose()

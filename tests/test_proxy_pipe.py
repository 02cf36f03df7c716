"""The fast path's answer piped from callbacks (`chatcli.proxy.pipe`), on the wire: the proxy
served as `chatcli proxy` serves it (`LinkedProtocol`), in front of an upstream that writes
its answer in reads of its own choosing (the first event alone, then the rest), so that the
rest goes through the callbacks. What the client gets is what the fast path's generators give
it (`running_proxy(linked=False)`), and what they guarantee holds: flow control, the upstream
released when the client goes away, a failure mid-answer, the handover to the library, a tool
call cut by the limit never forwarded."""

from __future__ import annotations

import asyncio
import gc
import json
import socket
import socketserver
import ssl
import threading
import time
from collections import deque
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatcli.providers import lean_http
from chatcli.providers.lean_http import Dechunker
from chatcli.proxy import passthrough
from chatcli.proxy.app import ProxyOptions
from chatcli.proxy.guard import Guard
from chatcli.proxy.pipe import ClientLink, ServerLink, sent_at_once
from tests.proxy_harness import running_proxy, upstream_at
from tests.test_lean_http import self_signed
from tests.test_proxy_passthrough import ENV, URL_PATH, chat, cut_tool_calls, events, streamed

CUT = "cut"  # the upstream closes its connection here, the answer unfinished
HELD = "held"  # the upstream waits here until the proxy closes the connection (or 10 s)
Step = str | float  # an event's data, a pause in seconds, CUT or HELD


@dataclass
class RawUpstream:
    """An OpenAI-compatible upstream on a plain socket: each request gets the next script,
    each event written (and flushed) as one chunk of a chunked body; records the request
    bodies, the bytes of body it wrote, and whether the proxy closed the connection on it."""

    url: str = ""
    scripts: deque[list[Step]] = field(default_factory=deque)
    bodies: list[Any] = field(default_factory=list)
    written: int = 0
    connections: int = 0
    closed_by_proxy: threading.Event = field(default_factory=threading.Event)

    def serve(self, sock: socket.socket) -> None:
        """A connection's requests, kept alive until the proxy closes it (or a script ends
        with CUT or HELD)."""
        self.connections += 1
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, 16384)
        reader = sock.makefile("rb")
        while (line := reader.readline()) != b"":
            length = 0
            while (line := reader.readline()) not in (b"\r\n", b""):
                name, _, value = line.decode().partition(":")
                if name.lower() == "content-length":
                    length = int(value)
            self.bodies.append(json.loads(reader.read(length)))
            head = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            sock.sendall(head + b"transfer-encoding: chunked\r\n\r\n")
            if not self.answered(sock, self.scripts.popleft()):
                return

    def answered(self, sock: socket.socket, script: list[Step]) -> bool:
        """Whether the answer was written whole (the connection still usable)."""
        for step in script:
            if isinstance(step, float):
                time.sleep(step)
            elif step == CUT:
                return False
            elif step == HELD:
                sock.settimeout(10)
                if sock.recv(1) == b"":
                    self.closed_by_proxy.set()
                return False
            else:
                event = f"data: {step}\n\n".encode()
                sock.sendall(b"%x\r\n%s\r\n" % (len(event), event))
                self.written += len(event)
        sock.sendall(b"0\r\n\r\n")
        return True


@contextmanager
def raw_upstream(tls: ssl.SSLContext | None = None) -> Iterator[RawUpstream]:
    """A `RawUpstream` served on a free port, over TLS with `tls` (its URL then https)."""
    upstream = RawUpstream()

    class Handler(socketserver.BaseRequestHandler):
        def handle(self) -> None:
            if tls is None:
                upstream.serve(self.request)
                return
            with tls.wrap_socket(self.request, server_side=True) as sock:
                upstream.serve(sock)

    server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    upstream.url = f"{'https' if tls else 'http'}://127.0.0.1:{server.server_address[1]}"
    try:
        yield upstream
    finally:
        server.shutdown()
        server.server_close()


@pytest.fixture
def raw() -> Iterator[RawUpstream]:
    with raw_upstream() as upstream:
        yield upstream


@dataclass
class Calls:
    """How often the callbacks' path ran, and paused and resumed the upstream's reading."""

    piped: int = 0
    paused: int = 0
    resumed: int = 0


@pytest.fixture
def calls(monkeypatch: pytest.MonkeyPatch) -> Calls:
    seen = Calls()
    pause, resume = lean_http._Body.pause, lean_http._Body.resume

    class Counted(passthrough.Pipe):
        def __init__(self, *args: Any) -> None:
            seen.piped += 1
            super().__init__(*args)

    def paused(body: Any) -> None:
        seen.paused += 1
        pause(body)

    def resumed(body: Any) -> None:
        seen.resumed += 1
        resume(body)

    monkeypatch.setattr(passthrough, "Pipe", Counted)
    monkeypatch.setattr(lean_http._Body, "pause", paused)
    monkeypatch.setattr(lean_http._Body, "resume", resumed)
    return seen


@contextmanager
def proxy(raw: RawUpstream, *, linked: bool = True, **options: Any) -> Iterator[str]:
    up = upstream_at("openai", raw.url + "/v1", model="gpt-4o", environ=ENV)
    guard = options.pop("guard", None)
    with running_proxy(up, guard=guard, options=ProxyOptions(**options), linked=linked) as url:
        yield url


def split(recorded: list[str]) -> list[Step]:
    """The recorded events, the first alone (the fast path's first bytes, sent through the
    server), the rest after a pause (piped from the callbacks)."""
    return [recorded[0], 0.05, *recorded[1:]]


def eight_megabytes(recorded: list[str]) -> list[str]:
    """A recorded answer's text events repeated to ~8 MB (its first and last three kept): more
    than the kernel's buffers on both sides of the proxy hold."""
    words = recorded[1:-3]
    return [recorded[0], *words * (8_000_000 // sum(map(len, words))), *recorded[-3:]]


def request(**fields: Any) -> dict[str, Any]:
    return {"model": "gpt-4o", "messages": chat(1), "stream": True, **fields}


def test_the_answer_is_piped_from_callbacks_as_the_upstreams_events(
    raw: RawUpstream, calls: Calls
) -> None:
    recorded = events("openai-chat-text.txt")
    raw.scripts.append(split(recorded))
    with proxy(raw) as url:
        answer = httpx.post(url + URL_PATH, json=request(), timeout=30)
        again = httpx.get(url + "/metrics").text
    assert calls.piped == 1
    expected = [e for e in recorded if '"usage"' not in e]  # the client asked for none
    assert answer.content == b"".join(f"data: {e}\n\n".encode() for e in expected)
    assert f'chatcli_proxy_requests_total{{endpoint="{URL_PATH}",status="200"}} 1' in again


def one_write_post(url: str, body: Any) -> bytes:
    """The answer's body to `body` POSTed in one write of head and body together, so that
    the server reads the request whole at once (httpx and `http.client` write the head and
    the body apart: a busy machine may read them in two turns)."""
    host, port = url.removeprefix("http://").split(":")
    data = json.dumps(body).encode()
    head = (
        f"POST {URL_PATH} HTTP/1.1\r\nhost: {host}:{port}\r\ncontent-type: application/json"
        f"\r\ncontent-length: {len(data)}\r\nconnection: close\r\n\r\n"
    )
    with socket.create_connection((host, int(port)), timeout=30) as sock:
        sock.sendall(head.encode() + data)
        answer = b"".join(iter(lambda: sock.recv(65536), b""))
    status, _, chunked = answer.partition(b"\r\n\r\n")
    assert status.startswith(b"HTTP/1.1 200 ") and b"transfer-encoding: chunked" in status
    dechunker = Dechunker()
    out = dechunker.feed(chunked)
    assert dechunker.done
    return out


def test_a_request_is_forwarded_from_the_callback_that_read_it(
    raw: RawUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # uvicorn runs the app in a task, one turn of the event loop after the request was read:
    # the request is forwarded from the server's callback instead (`ON_BODY`), when a
    # kept-alive upstream connection is idle, and the task goes on from there.
    forwarded: list[tuple[bool, bool]] = []  # (sent at once, from a task)
    send_now = lean_http.LeanTransport.send_now

    def spied(transport: lean_http.LeanTransport, request: Any, body: bytes) -> bool:
        sent = send_now(transport, request, body)
        forwarded.append((sent, asyncio.current_task() is not None))
        return sent

    monkeypatch.setattr(lean_http.LeanTransport, "send_now", spied)
    recorded = events("openai-chat-text.txt")
    raw.scripts.extend([split(recorded), split(recorded)])
    guard = Guard((), host="127.0.0.1", max_concurrency=64)
    with proxy(raw, guard=guard) as url:
        answers = [one_write_post(url, request()) for _ in range(2)]
    expected = b"".join(f"data: {e}\n\n".encode() for e in recorded if '"usage"' not in e)
    assert answers == [expected] * 2
    # The first finds no connection to the upstream (its task opens one); the second goes
    # on the kept one, from the callback: no task had run for it.
    assert forwarded == [(False, False), (True, False)]
    assert raw.connections == 1 and len(raw.bodies) == 2
    assert guard._active == {}  # each request admitted once, released once


def test_a_request_the_callback_cannot_begin_is_its_tasks_as_before(raw: RawUpstream) -> None:
    # Not JSON, or not admitted: the callback leaves it, and its task answers as it would.
    guard = Guard(("k1",), host="127.0.0.1", max_concurrency=64)
    with proxy(raw, guard=guard) as url:
        bad = httpx.post(url + URL_PATH, content=b"{", headers={"authorization": "Bearer k1"})
        refused = httpx.post(url + URL_PATH, json=request())
    assert bad.status_code == 400 and "not valid JSON" in bad.json()["error"]["message"]
    assert refused.status_code == 401
    assert raw.bodies == [] and guard._active == {}


def test_a_tls_upstreams_answer_is_piped_and_its_connection_kept(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, calls: Calls
) -> None:
    # The cloud's upstreams are https: the detached body reads the TLS transport's decrypted
    # bytes, and the connection goes back to its stream, kept alive for the next request.
    key, cert = self_signed(tmp_path)
    server_tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_tls.load_cert_chain(cert, key)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the lean transport's trust (httpx's)
    recorded = events("openai-chat-text.txt")
    expected = b"".join(f"data: {e}\n\n".encode() for e in recorded if '"usage"' not in e)
    with raw_upstream(server_tls) as tls_raw:
        tls_raw.scripts.extend([split(recorded), split(recorded)])
        with proxy(tls_raw) as url:
            answers = [httpx.post(url + URL_PATH, json=request(), timeout=30) for _ in "12"]
    assert calls.piped == 2
    assert [a.content for a in answers] == [expected, expected]
    assert tls_raw.connections == 1 and len(tls_raw.bodies) == 2


def test_a_slow_client_pauses_the_upstream_and_loses_nothing(
    raw: RawUpstream, calls: Calls
) -> None:
    # ~8 MB of real events: more than the kernel's buffers on both sides of the proxy hold,
    # so the proxy must stop reading the upstream while its client reads nothing.
    many = eight_megabytes(events("openai-chat-text.txt"))
    raw.scripts.append(split(many))
    with proxy(raw) as url:
        port = int(url.rsplit(":", 1)[1])
        with socket.socket() as client:
            client.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8192)
            client.connect(("127.0.0.1", port))
            body = json.dumps(request()).encode()
            client.sendall(
                b"POST %s HTTP/1.1\r\nhost: proxy\r\ncontent-type: application/json\r\n"
                b"connection: close\r\ncontent-length: %d\r\n\r\n%s"
                % (URL_PATH.encode(), len(body), body)
            )
            deadline = time.monotonic() + 10
            while not calls.paused:
                assert time.monotonic() < deadline, "the upstream's reading was never paused"
                time.sleep(0.05)
            assert raw.written < sum(len(f"data: {e}\n\n") for e in many)  # the upstream waits
            received = bytearray()
            client.settimeout(30)
            while data := client.recv(1 << 16):
                received += data
    head, _, chunked = bytes(received).partition(b"\r\n\r\n")
    assert head.startswith(b"HTTP/1.1 200")
    body_read = Dechunker()
    content = body_read.feed(chunked)
    assert body_read.done
    expected = [e for e in many if '"usage"' not in e]
    assert content == b"".join(f"data: {e}\n\n".encode() for e in expected)
    assert calls.piped == 1 and calls.resumed >= calls.paused > 0


def test_the_upstream_connection_after_a_slow_client_is_kept_alive(
    raw: RawUpstream, calls: Calls
) -> None:
    # The slow client's answer came whole through the callbacks: its upstream connection is
    # kept, and the next request is answered on it.
    recorded = events("openai-chat-text.txt")
    many = eight_megabytes(recorded)
    raw.scripts.extend([split(many), split(recorded)])
    with proxy(raw) as url:
        with httpx.stream("POST", url + URL_PATH, json=request(), timeout=30) as slow:
            deadline = time.monotonic() + 10
            while not calls.paused:
                assert time.monotonic() < deadline, "the upstream's reading was never paused"
                time.sleep(0.05)
            first = slow.read()
        after = httpx.post(url + URL_PATH, json=request(), timeout=10)
    assert first.endswith(b"data: [DONE]\n\n") and len(first) > 8_000_000
    assert after.content.endswith(b"data: [DONE]\n\n")
    assert raw.connections == 1 and len(raw.bodies) == 2


def test_a_client_that_goes_away_closes_the_upstream_and_frees_its_slot(
    raw: RawUpstream, calls: Calls
) -> None:
    recorded = events("openai-chat-text.txt")
    raw.scripts.append([*split(recorded[:4]), HELD])
    raw.scripts.append(split(recorded))
    one = Guard((), host="127.0.0.1", max_concurrency=1)  # a second request needs the slot
    with proxy(raw, guard=one) as url:
        with httpx.stream("POST", url + URL_PATH, json=request(), timeout=30) as answer:
            read = ""
            for text in answer.iter_text():
                read += text
                if '" unable"' in read:  # the third event: piped from the callbacks
                    break
        assert raw.closed_by_proxy.wait(10), "the upstream's connection was not closed"
        deadline = time.monotonic() + 10
        counted = f'chatcli_proxy_requests_total{{endpoint="{URL_PATH}",status="200"}} 1'
        while counted not in httpx.get(url + "/metrics").text:
            assert time.monotonic() < deadline, "the request did not end when its client left"
            time.sleep(0.05)
        after = streamed(url, messages=chat(1))
    assert calls.piped == 2
    assert after["text"].startswith("I'm unable to provide real-time")


def test_an_upstream_that_dies_mid_answer_ends_as_on_the_generators_path(
    raw: RawUpstream, calls: Calls
) -> None:
    recorded = events("openai-chat-text.txt")
    seen = []
    for linked in (True, False):
        raw.scripts.clear()
        raw.bodies.clear()
        raw.scripts.extend([[*split(recorded[:6]), CUT]] * 3)
        with proxy(raw, linked=linked) as url:
            answer = httpx.post(url + URL_PATH, json=request(), timeout=30)
        seen.append((answer.status_code, _datas(answer.content), len(raw.bodies)))
    assert calls.piped == 1
    assert seen[0] == seen[1]
    status, datas, _ = seen[0]
    assert status == 200 and datas[:6] == recorded[:6]
    assert "error" in json.loads(datas[-1])  # the client is told, in its dialect's shape


def test_a_length_stop_after_piped_reads_is_handed_to_the_library(
    raw: RawUpstream, calls: Calls
) -> None:
    seen, continuations = [], []
    for linked in (True, False):
        raw.scripts.clear()
        raw.bodies.clear()
        raw.scripts.append(split(events("openai-chat-length.txt")))
        raw.scripts.append(split(events("openai-chat-text.txt")))
        with proxy(raw, linked=linked) as url:
            seen.append(streamed(url, messages=chat(1), max_tokens=1))
        assert len(raw.bodies) == 2
        continuations.append(raw.bodies[1])
    assert calls.piped == 1
    assert seen[0] == seen[1] and seen[0]["finishes"] == ["stop"]
    assert seen[0]["text"].startswith("{\"I'm unable to provide real-time")
    assert continuations[0] == continuations[1]
    assert continuations[0]["max_completion_tokens"] > 1


def test_a_tool_call_cut_by_the_limit_is_held_back_from_the_callbacks(
    raw: RawUpstream, calls: Calls
) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    seen = []
    for linked in (True, False):
        raw.scripts.clear()
        raw.scripts.append(split(cut_tool_calls()))
        raw.scripts.append(split(events("openai-chat-tool-calls.txt")))
        with proxy(raw, linked=linked) as url:
            seen.append(streamed(url, messages=chat(1), max_tokens=40, tools=tools))
    assert calls.piped == 1
    assert seen[0] == seen[1]
    calls_seen = seen[0]["calls"]
    assert [c["name"] for c in calls_seen.values()] == ["GetWeatherArgs"]
    assert any("get_stock_price" in e for e in cut_tool_calls())  # sent, never forwarded


def _datas(content: bytes) -> list[str]:
    return [
        line.removeprefix("data: ")
        for line in content.decode().split("\n")
        if line.startswith("data: ")
    ]


def test_a_piped_answer_leaves_no_cycle_holding_the_body_it_sent(
    raw: RawUpstream, calls: Calls
) -> None:
    # httpx's response and its stream refer to each other, and through the response its
    # request holds the body sent (~900 KB at 2,000 messages): the proxy breaks the cycle, so
    # reference counting frees them as the answer ends, not the collector's full collections
    # (rare in `chatcli proxy`: chatcli.proxy.main). Without it, 1 GB peak RSS at 200 streams.
    recorded = events("openai-chat-text.txt")
    raw.scripts.extend([split(recorded)] * 3)
    with proxy(raw) as url:
        httpx.post(url + URL_PATH, json=request(), timeout=30)  # what the process keeps
        gc.collect()
        gc.disable()
        gc.set_debug(gc.DEBUG_SAVEALL)
        try:
            for _ in range(2):
                httpx.post(url + URL_PATH, json=request(), timeout=30)
            gc.collect()
            sent = [
                o
                for o in gc.garbage
                if isinstance(o, httpx.Request) and str(o.url).startswith(raw.url)
            ]
            served = {type(o).__qualname__ for o in gc.garbage if _servers(o)}
        finally:
            gc.set_debug(0)
            gc.garbage.clear()
            gc.enable()
    assert calls.piped == 3
    assert sent == []
    # Nor does the server's side of a request (its cycle, whose scope holds the link to the
    # client's connection) or of a connection: each was a cycle, promoted to the oldest
    # generation during its answer, so they piled up there until a full collection freed
    # them all in one pause of the event loop (60-80 ms at 200 streams, benchmarks/proxy.py).
    assert served == set()


def _servers(thing: object) -> bool:
    """Whether `thing` is the server's (uvicorn's, uvloop's, the proxy's pipe's)."""
    return type(thing).__module__.split(".")[0] in {"uvicorn", "uvloop"} or isinstance(
        thing, (ClientLink, ServerLink)
    )


def test_the_first_token_reaches_the_client_from_the_callback_that_read_it(
    raw: RawUpstream, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The first bytes to pass on start the response from the callback that read them: under
    # load the request's task wakes a turn of the event loop later (here: a second later),
    # and the client's first token must not wait for it. The head is the server's own, as
    # when the task sends it: the same status and headers as the generators' path.
    opened = passthrough.FastPath.piped_from_callbacks

    async def late(fast: passthrough.FastPath, *args: Any) -> Any:
        outcome = await opened(fast, *args)
        await asyncio.sleep(1.0)  # the request's task, behind a busy loop
        return outcome

    monkeypatch.setattr(passthrough.FastPath, "piped_from_callbacks", late)
    recorded = events("openai-chat-text.txt")
    raw.scripts.extend([split(recorded)] * 2)
    answers = []
    for linked in (True, False):
        with proxy(raw, linked=linked) as url, httpx.Client(timeout=30) as client:
            began = time.monotonic()
            with client.stream("POST", url + URL_PATH, json=request()) as answer:
                lines = answer.iter_lines()
                first = next(line for line in lines if line.startswith("data: "))
                first_at = time.monotonic() - began
                rest = [line for line in lines if line.startswith("data: ")]
            answers.append((answer.status_code, drop_date(answer.headers), [first, *rest]))
        if linked:
            assert first_at < 0.5  # not the task's second
            assert time.monotonic() - began >= 1.0  # the task ended the answer
    assert answers[0] == answers[1]
    assert answers[0][2] == [f"data: {e}" for e in recorded if '"usage"' not in e]


def drop_date(headers: httpx.Headers) -> dict[str, str]:
    return {k: v for k, v in headers.items() if k != "date"}


@dataclass
class FakeLink:
    """A client connection as a `Pipe` sees it: what it wrote, whether it is paused/gone."""

    paused: bool = False
    gone: bool = False
    written: list[bytes] = field(default_factory=list)
    waiting: list[Any] = field(default_factory=list)

    def write(self, data: bytes) -> None:
        self.written.append(data)

    def when_drained(self, callback: Any) -> None:
        self.waiting.append(callback)


@dataclass
class FakeBody:
    """A detachable body as a `Pipe` drives it: its callbacks, and its pauses and resumes."""

    received: Any = None
    end: Any = None
    paused: int = 0
    resumed: int = 0

    def detach(self, received: Any, end: Any) -> None:
        self.received, self.end = received, end

    def pause(self) -> None:
        self.paused += 1

    def resume(self) -> None:
        self.resumed += 1


def piped(link: FakeLink, start: Any = None) -> tuple[Any, FakeBody, list[str]]:
    """A `Pipe` on a fast path whose judging passes every whole event on, and whose
    response start is recorded (or is `start`)."""
    body, starts = FakeBody(), []

    class Fast:
        failure: Exception | None = None
        provider = None
        ends_now = 0  # `end_now` called: the body's end, read whole

        def judge(self, data: bytes) -> bytes:
            return data if data.endswith(b"\n\n") else b""

        def end_now(self) -> None:
            self.ends_now += 1

    pipe = passthrough.Pipe(Fast(), body, link, start or (lambda: starts.append("head")))
    return pipe, body, starts


async def test_the_first_bytes_start_the_response_then_go_on_from_callbacks() -> None:
    link = FakeLink()
    pipe, body, starts = piped(link)
    body.received(b"data: {}")  # nothing whole to pass on: nothing starts
    assert starts == [] and not pipe.begun.done()
    body.received(b"data: 1\n\n")
    body.received(b"data: 2\n\n")
    assert starts == ["head"] and pipe.begun.result() is True
    assert link.written == [b"data: 1\n\n", b"data: 2\n\n"] and pipe.early == b""
    body.end(None)
    assert pipe.ended.done() and body.paused == 0
    assert pipe.fast.ends_now == 1  # the response's end tried from the callback, once
    body.end(None)
    assert pipe.fast.ends_now == 1


async def test_a_client_that_cannot_take_the_first_bytes_gets_them_from_the_task() -> None:
    # Its transport over its high-water mark: the server's send would wait, so the head and
    # the first bytes go from the request's task (`FastPath.piped`), which resumes the body.
    link = FakeLink(paused=True)
    pipe, body, starts = piped(link)
    body.received(b"data: 1\n\n")
    assert starts == [] and link.written == []
    assert pipe.early == b"data: 1\n\n" and body.paused == 1 and pipe.begun.result() is True


async def test_a_client_gone_before_the_first_bytes_lets_the_task_end() -> None:
    link = FakeLink(gone=True)
    pipe, body, starts = piped(link)
    body.received(b"data: 1\n\n")
    assert starts == [] and link.written == [] and body.paused == 1
    assert pipe.begun.result() is True  # the task goes on, and is cancelled as the client left


async def test_an_answer_held_whole_leaves_the_response_unstarted() -> None:
    link = FakeLink()
    pipe, body, starts = piped(link)
    body.received(b'data: {"tool_calls"')  # never a whole event passed on
    body.end(None)
    assert starts == [] and pipe.begun.result() is False and pipe.ended.done()


async def test_a_start_that_fails_fails_the_request_not_the_upstreams_reads() -> None:
    def broken() -> None:
        raise RuntimeError("the server's send waited")

    link = FakeLink()
    pipe, body, _ = piped(link, broken)
    body.received(b"data: 1\n\n")
    assert link.written == [] and body.paused == 1
    with pytest.raises(RuntimeError, match="waited"):
        pipe.begun.result()


async def test_a_send_that_would_wait_is_refused_not_left_half_done() -> None:
    sent = []

    async def send(message: Any) -> None:
        sent.append(message)

    async def waiting(message: Any) -> None:
        await asyncio.sleep(0)

    sent_at_once(send, {"type": "http.response.start"})
    assert sent == [{"type": "http.response.start"}]
    with pytest.raises(RuntimeError, match="waited"):
        sent_at_once(waiting, {"type": "http.response.start"})

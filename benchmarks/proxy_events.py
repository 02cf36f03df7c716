"""The proxy's CPU per streamed event on the piped path, in process: what each read of an
upstream answer costs, from the upstream connection's protocol to the client's socket.

At 200 streams the proxy relays ~10,000 upstream reads a second on one event loop, and every
microsecond spent per read lengthens every wake-up of that loop, so every request's first
token (issue 12's latency goal). This script measures that work alone: `--streams` real
fast-path requests (`chatcli.proxy.passthrough.FastPath`, opened through the lean transport
against an in-process upstream that answers the head and the first token, then holds the
connection), each piped to a real client connection (a `chatcli.proxy.pipe.Pipe` to a
`ClientLink` on a loopback TCP socket, with uvicorn's flow control), on uvloop as `chatcli
proxy` runs. The rest of each answer is `benchmarks/proxy.py`'s stub's own bytes
(`stub_token`/`stub_text`/`stub_end`, one chunk per read as it writes them at its token rate,
its end in one read), handed read by read to each upstream connection's protocol
(`_Detached.data_received`), streams taken in turn as a loop serving them all would: the
whole chain (`_Body.arrived`, the dechunking, the pipe's `received`, `FastPath.judge`,
`ClientLink.write`) runs for real, and the client's socket gets each chunk.

    python benchmarks/proxy_events.py [--streams 200] [--answers 10] [--answer-tokens 150]

Prints µs of CPU (this thread's, `time.thread_time`; the client sockets drained between
answers, not timed) per read: the whole chain; the same chain with its client transports
taking the writes and sending nothing (`Sink`: the Python per read, the proxy's own); and
`ClientLink.write` alone, the same chunks on the same connections in a tight loop (the
socket write below Python; in the chain it costs more: the Python between two writes
evicts what the kernel and uvloop had in the caches). Best of `--answers` rounds (each one
answer on every stream), after one not measured.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import socket
import sys
import time
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proxy import ROOT, _unchunked, conversation, stub_end, stub_text, stub_token
from uvicorn.protocols.http.flow_control import FlowControl

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.proxy.openai_dialect import OpenAIDialect
from chatcli.proxy.passthrough import FastPath, first_unchanged, passthrough_of
from chatcli.proxy.pipe import ClientLink, Pipe
from chatcli.proxy.upstream import Forwarder, open_upstream, plan
from chatcli.recovery import Client
from chatcli.settings import load_settings

HEAD = b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\ntransfer-encoding: chunked\r\n\r\n"


def answer_reads(tokens: int, body: dict[str, Any]) -> tuple[bytes, list[bytes]]:
    """The stub's answer of `tokens` tokens as the proxy reads it: its first token (sent with
    the head, so the request takes the piped path) and the rest, read by read."""
    now = time.monotonic()
    chunks = [stub_token(stub_text(i, tokens, now, now)) for i in range(tokens)]
    return chunks[0], [*chunks[1:], b"".join(stub_end(body, tokens))]


async def holding_upstream(first: bytes) -> tuple[asyncio.Server, int]:
    """An upstream that answers each request with the head and `first`, then sends nothing:
    the rest of each answer is handed to the proxy's side of the connection directly."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                if not head.startswith(b"POST "):  # the adapter's look for the model's window
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    continue
                length = re.search(rb"(?i)content-length:\s*(\d+)", head)
                assert length is not None
                await reader.readexactly(int(length.group(1)))
                writer.write(HEAD + first)
        except (asyncio.IncompleteReadError, ConnectionError):
            writer.close()

    server = await asyncio.start_server(serve, "127.0.0.1", 0, backlog=4096)
    return server, server.sockets[0].getsockname()[1]


class ClientSide(asyncio.Protocol):
    """The proxy's end of a client connection: uvicorn's flow control and a `ClientLink`, as
    `chatcli.proxy.pipe.LinkedProtocol` gives them."""

    link: ClientLink

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.flow = FlowControl(transport)  # type: ignore[arg-type]
        self.link = ClientLink(transport, self.flow)  # type: ignore[arg-type]

    def pause_writing(self) -> None:
        self.flow.pause_writing()

    def resume_writing(self) -> None:
        self.flow.resume_writing()
        self.link.resumed()


async def client_links(streams: int) -> tuple[list[ClientLink], list[socket.socket]]:
    """`streams` loopback TCP connections: the proxy's ends (`ClientLink`s) and the clients'
    (plain non-blocking sockets, drained between answers)."""
    loop = asyncio.get_running_loop()
    listener = socket.create_server(("127.0.0.1", 0), backlog=streams)
    links, clients = [], []
    for _ in range(streams):
        client = socket.create_connection(listener.getsockname())
        accepted, _ = listener.accept()
        _, side = await loop.create_connection(ClientSide, sock=accepted)
        client.setblocking(False)
        links.append(side.link)
        clients.append(client)
    listener.close()
    return links, clients


class Sink:
    """A client transport that takes every write and sends nothing: the chain's Python alone."""

    def write(self, data: bytes) -> None:
        pass

    def is_closing(self) -> bool:
        return False


def sink_links(streams: int) -> list[ClientLink]:
    return [ClientLink(Sink(), FlowControl(Sink())) for _ in range(streams)]  # type: ignore[arg-type]


def drained(clients: list[socket.socket]) -> int:
    """The bytes the clients had received (read and dropped)."""
    total = 0
    for client in clients:
        while True:
            try:
                got = client.recv(1 << 20)
            except BlockingIOError:
                break
            total += len(got)
    return total


async def settle(clients: list[socket.socket]) -> int:
    """The clients' bytes drained until none come any more (the transports' buffers sent)."""
    total = 0
    while True:
        await asyncio.sleep(0.01)
        if not (got := drained(clients)):
            return total
        total += got


class Bench:
    """The fast path's requests against the holding upstream, and their client links."""

    def __init__(self, port: int, messages: int) -> None:
        env = {"CHATCLI_HOME": str(ROOT / ".bench-home")}
        flags = {
            "provider": "openai-compatible",
            "model": "stub",
            "base_url": f"http://127.0.0.1:{port}/v1",
        }
        self.upstream = open_upstream(load_settings(flags, env), env)
        self.body = {"model": "stub", "messages": conversation(messages), "stream": True}
        self.raw = json.dumps(self.body).encode()

    async def opened(self) -> FastPath:
        """One request on the fast path, its first token read (`FastPath.open`)."""
        parsed = OpenAIDialect().parse(json.loads(self.raw))
        forwarder = Forwarder(self.upstream, parsed, plan(parsed, self.upstream.dialect))
        library = Client(
            forwarder, RecoveryConfig(), max_retries=0, microcompact=MicrocompactConfig()
        )
        start = library.start_stream(parsed.messages, max_tokens=None, tools=parsed.tools)
        first = first_unchanged(start, parsed, None)
        provider = passthrough_of(self.upstream, parsed)
        assert first is not None and provider is not None  # the fast path takes it
        fast = FastPath(provider, library, start, first, parsed)
        assert await fast.open(self.raw, self.body) is None and fast.early
        return fast


async def answer_round(
    bench: Bench, links: list[ClientLink], reads: list[bytes]
) -> tuple[float, list[FastPath]]:
    """One answer on every stream, its reads fed to the upstream connections in turn: the
    CPU it took (this thread's), and the fast paths (to check what they piped)."""
    fasts = await asyncio.gather(*(bench.opened() for _ in links))
    # The response started with the first token (`FastPath.open`): nothing to start.
    pipes = [
        Pipe(f, f.detachable, link, lambda: None) for f, link in zip(fasts, links, strict=True)
    ]
    protocols = [f.detachable.socket.get_protocol() for f in fasts]
    feeds = [p.data_received for p in protocols]
    started = time.thread_time()
    for data in reads:
        for feed in feeds:
            feed(data)
    spent = time.thread_time() - started
    await asyncio.gather(*(pipe.ended for pipe in pipes))
    for fast in fasts:
        await fast.stack.aclose()
    return spent, fasts


def written_alone(links: list[ClientLink], reads: list[bytes]) -> float:
    """The CPU of `ClientLink.write` alone for the payloads of `reads` (as the chain writes
    them: the events the judging lets through, the held end not written)."""
    payloads = [_unchunked(data) for data in reads[:-1]]
    writes = [link.write for link in links]
    started = time.thread_time()
    for data in payloads:
        for write in writes:
            write(data)
    return time.thread_time() - started


async def measure(streams: int, answers: int, tokens: int, messages: int) -> list[float]:
    """µs of CPU per read: the whole chain, its Python alone (writing to no socket), and
    `ClientLink.write` alone; each the best of `answers` rounds after one not measured. Every
    round checks what was piped: each fast path's events, each client's bytes."""
    first, reads = answer_reads(tokens, {"messages": conversation(messages)})
    server, port = await holding_upstream(first)
    bench = Bench(port, messages)
    links, clients = await client_links(streams)
    sinks = sink_links(streams)
    events = _unchunked(first) + b"".join(_unchunked(data) for data in reads[:-1])
    wire = sum(map(len, reads[:-1]))  # the stub's chunks, framed as ClientLink.write frames
    rounds: list[tuple[float, float, float]] = []
    try:
        for _ in range(answers + 1):
            chain, fasts = await answer_round(bench, links, reads)
            assert await settle(clients) == wire * streams  # each piped read reached its client
            for fast in fasts:
                assert fast.failure is None and b"".join(fast.sent) == events
                assert fast.held and b"[DONE]" in fast.held[-1]
            python, _ = await answer_round(bench, sinks, reads)
            alone = written_alone(links, reads)
            assert await settle(clients) == wire * streams
            rounds.append((chain, python, alone))
    finally:
        for client in clients:
            client.close()
        server.close()
        await bench.upstream.provider.aclose()
    per_read = 1e6 / (len(reads) * streams)
    return [min(spent) * per_read for spent in zip(*rounds[1:], strict=True)]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--streams", type=int, default=200, help="answers piped at once")
    parser.add_argument("--answers", type=int, default=10, help="rounds measured (best taken)")
    parser.add_argument("--answer-tokens", type=int, default=150, help="tokens per answer")
    parser.add_argument("--messages", type=int, default=100, help="the conversation's messages")
    args = parser.parse_args()
    figures = uvloop.run(measure(args.streams, args.answers, args.answer_tokens, args.messages))
    whole, python, write = figures
    print(
        f"{args.streams} streams, {args.answer_tokens}-token answers ({args.answer_tokens} reads "
        f"each after the first token, one event each but the end), µs of CPU per read, best "
        f"of {args.answers} rounds:"
    )
    print(f"  the whole chain (_Detached.data_received .. ClientLink.write)  {whole:6.2f}")
    print(f"  the same chain writing to no socket: its Python alone          {python:6.2f}")
    print(f"  ClientLink.write alone (the same chunks, the same sockets)     {write:6.2f}")


if __name__ == "__main__":
    main()

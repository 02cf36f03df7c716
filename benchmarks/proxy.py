"""The proxy's added latency under bounded loopback load.

Three processes on 127.0.0.1: an upstream stub that streams an OpenAI chat answer at a fixed
token rate, `chatcli proxy` in front of it, and this script, whose clients call the stub
directly and then through the proxy with the same conversations (real text: this
repository's README, cut into messages; as many distinct conversations as streams, each
asking again about one answer's length later) on the same arrival schedule. It prints, for each
conversation length, the p50/p99 time to first token and to the whole answer, direct and
through the proxy, and the difference (the proxy's added latency); the same with the stub's
own time taken out (see below); requests per second per worker; the CPU per request of the
proxy and of the stub (read from /proc, so it holds on a busy machine); how busy the machine
was and by whom; the load average; and the proxy's peak memory (RSS). The proxy runs with
`--no-sessions`: what recording each request adds is benchmarks/proxy_store.py's measure.

    python benchmarks/proxy.py [--streams 200] [--messages 100,2000] [--workers N]
                               [--token-rate 50] [--answer-tokens 150] [--warm-up 3]
                               [--window 20] [--seed 1] [--profile F]
                               [--litellm LITELLM] [--bare] [--bare-cost MS/US ...]
    python benchmarks/proxy.py --burst [--streams 200] [--requests 400] [--messages 100]

**Steady state** (the default): requests arrive as a Poisson process (open loop: an arrival
does not wait for an answer) at rate = streams / answer duration, so `--streams` are in
flight on average, as with that many users each asking again a while after an answer. The
first `--warm-up` seconds of arrivals are not measured; those of the next `--window` seconds
are. Direct and through the proxy run the same schedule (same `--seed`). The stub streams
`--answer-tokens` tokens at `--token-rate` tokens/s, one event per token, as OpenAI does
(50 tokens/s: between gpt-4-turbo's ~35 and gpt-4o's ~65 tokens/s medians measured by users
on OpenAI's forum; 150 tokens: a short chat answer; 3 s a stream).

**Burst** (`--burst`, the former mode): `--streams` clients start at once, each sending its
share of `--requests` back to back (a closed loop that measures the machine's queue as much
as the proxy).

**The stub's own time taken out.** The stub writes, in its first token, when it received the
request and when it sent that token, and in its last token when it sent it (CLOCK_MONOTONIC,
which all processes share). A request's time outside the stub is (stub received - client
sent) + (client got the token - stub sent it): on loopback direct, that is the network and
the clients' own queue; through the proxy, the proxy's work besides. Its percentiles do not
carry the stub's scheduling jitter, which a difference of two runs' end-to-end percentiles
does. The first token's is printed whole and in its two legs: the request's way to the stub
(through the proxy: its work before it forwards the request) and the token's way back (its
work to start the response and pass the token on).

The clients are plain asyncio streams on uvloop (keep-alive connections, chunked decoding,
no HTTP library), so that they cost the machine little next to the proxy; the stub likewise.

**The anchors**, each in front of the same stub, measured on the same schedule and reported
like chatcli's: `--litellm LITELLM` (the `litellm` command that
benchmarks/install-litellm-proxy.sh installs in a virtualenv of its own and prints):
LiteLLM's proxy, one worker; `--bare`: a bare forwarder on uvloop (`BareForwarder`: bytes
in, bytes out, nothing parsed but each request's length), the floor any Python proxy pays
per request and per event on this machine. `--bare-cost MS/US` (repeatable) adds the same
forwarder spending MS ms of CPU on each request and US µs on each read of the answer (a
busy loop on the thread's CPU clock), and nothing else: the latency a proxy of that cost
adds at that load on this machine, to set beside chatcli's (whose CPU per answer the
figures give).

`--workers N` runs `chatcli proxy --workers N`. `--profile FILE` runs the proxy under
cProfile and writes its profile to FILE (read it with `python -m pstats FILE`).

Bounded: a schedule of (warm-up + window) x rate requests, or `--requests`, a 300 s deadline
per run, loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 300.0
PATH = "/v1/chat/completions"
# The stub's stamps (see the module's docstring): in the first and the last token.
FIRST = re.compile(rb'"t0@([0-9.]+)@([0-9.]+) ')
LAST = re.compile(rb'"t[0-9]+#([0-9.]+) ')


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def sse_chunk(event: dict[str, object]) -> bytes:
    """One server-sent event as one HTTP/1.1 chunk."""
    data = f"data: {json.dumps(event)}\n\n".encode()
    return b"%x\r\n%s\r\n" % (len(data), data)


STUB_HEAD = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stub"}


def stub_text(i: int, tokens: int, received: float, now: float) -> str:
    """The stub's i-th token: its number; in the first, when the request was received and when
    the token left, in the last when it left (`FIRST`, `LAST`)."""
    if i == 0:
        return f"t0@{received:.6f}@{now:.6f} "
    if i == tokens - 1:
        return f"t{i}#{now:.6f} "
    return f"t{i} "


def stub_token(text: str) -> bytes:
    """One token of the stub's answer, as it writes it."""
    delta = {"index": 0, "delta": {"content": text}, "finish_reason": None}
    return sse_chunk({**STUB_HEAD, "choices": [delta]})


def stub_end(body: dict[str, Any], tokens: int) -> list[bytes]:
    """The end of the stub's answer to `body`, write by write: the finish, the usage (the
    prompt's size a real server would count: its text / 4), [DONE] and the body's end."""
    prompt = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4
    done = {"index": 0, "delta": {}, "finish_reason": "stop"}
    usage = {"prompt_tokens": prompt, "completion_tokens": tokens, "total_tokens": prompt + tokens}
    return [
        sse_chunk({**STUB_HEAD, "choices": [done]}),
        sse_chunk({**STUB_HEAD, "choices": [], "usage": usage}),
        b"e\r\ndata: [DONE]\n\n\r\n0\r\n\r\n",
    ]


def run_stub(port: int, tokens: int, rate: float) -> None:
    """The upstream: for each request, `tokens` chunks in OpenAI's shape, the i-th sent
    i/rate seconds after the request arrived (a fixed schedule, so a late token does not
    delay the next), then the finish, the usage and [DONE]. It reads and decodes the body as
    a real server would (its cost grows with the conversation)."""

    async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            while True:
                head = await reader.readuntil(b"\r\n\r\n")
                received = time.monotonic()
                if not head.startswith(b"POST /v1/chat/completions "):
                    writer.write(b"HTTP/1.1 404 Not Found\r\ncontent-length: 0\r\n\r\n")
                    continue
                length = re.search(rb"(?i)content-length:\s*(\d+)", head)
                body = json.loads(await reader.readexactly(int(length.group(1))))  # type: ignore[union-attr]
                writer.write(
                    b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
                    b"transfer-encoding: chunked\r\n\r\n"
                )
                for i in range(tokens):
                    await asyncio.sleep(max(0.0, received + (i + 1) / rate - time.monotonic()))
                    writer.write(stub_token(stub_text(i, tokens, received, time.monotonic())))
                for chunk in stub_end(body, tokens):
                    writer.write(chunk)
                await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def main() -> None:
        server = await asyncio.start_server(serve, "127.0.0.1", port, backlog=4096)
        await server.serve_forever()

    uvloop.run(main())


class BareForwarder(asyncio.Protocol):
    """A client connection of the bare forwarder (`--bare`): each request's bytes, as they
    came, to the stub on a connection of its own (opened at the first request, kept), and
    each read of the stub's answer to the client as it came. No parsing but the request's
    length, no judging, no recovery: what any Python proxy on uvloop pays per request and per
    event on this machine, the floor under chatcli's figures.

    `cost` (`--bare-cost`): CPU spent (`burn`) on each request before it is forwarded and on
    each read of the answer before it is passed on, in seconds: a forwarder of that cost per
    request and per event, with nothing else of a real proxy, to tell what latency a given
    cost adds on this machine at a given load."""

    def __init__(self, upstream_port: int, cost: tuple[float, float] = (0.0, 0.0)) -> None:
        self.upstream_port, self.cost = upstream_port, cost
        self.buffer = b""
        self.client: asyncio.Transport | None = None
        self.upstream: asyncio.Transport | None = None
        self.waiting: list[bytes] = []  # requests come before the upstream connection
        self.connecting: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.client = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        while (end := self.buffer.find(b"\r\n\r\n")) >= 0:
            length = re.search(rb"(?i)content-length:\s*(\d+)", self.buffer[:end])
            total = end + 4 + (int(length.group(1)) if length else 0)
            if len(self.buffer) < total:
                return
            request, self.buffer = self.buffer[:total], self.buffer[total:]
            burn(self.cost[0])
            if self.upstream is not None:
                self.upstream.write(request)
                continue
            if not self.waiting:
                self.connecting = asyncio.ensure_future(self.connect())
            self.waiting.append(request)

    async def connect(self) -> None:
        client, read_cost = self.client, self.cost[1]
        assert client is not None

        class Back(asyncio.Protocol):
            def data_received(self, data: bytes) -> None:
                burn(read_cost)
                client.write(data)

            def connection_lost(self, exc: Exception | None) -> None:
                client.close()

        loop = asyncio.get_running_loop()
        self.upstream, _ = await loop.create_connection(Back, "127.0.0.1", self.upstream_port)
        self.upstream.write(b"".join(self.waiting))
        self.waiting.clear()

    def connection_lost(self, exc: Exception | None) -> None:
        if self.upstream is not None:
            self.upstream.close()


def burn(seconds: float) -> None:
    """`seconds` of this thread's CPU spent (none for 0)."""
    if seconds > 0:
        end = time.thread_time() + seconds
        while time.thread_time() < end:
            pass


def bare_cost(text: str) -> tuple[float, float]:
    """`--bare-cost`'s "MS/US": CPU per request in ms, per read in µs; in seconds."""
    request, _, read = text.partition("/")
    return float(request) / 1e3, float(read or 0) / 1e6


def run_bare(port: int, upstream_port: int, cost: tuple[float, float] = (0.0, 0.0)) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        server = await loop.create_server(
            lambda: BareForwarder(upstream_port, cost), "127.0.0.1", port, backlog=4096
        )
        await server.serve_forever()

    uvloop.run(main())


def conversation(n: int, number: int | None = None) -> list[dict[str, str]]:
    """`n` messages of real text (this repository's README, 60 words a message), the same
    system prompt first; `number`: a conversation of its own, each message marked with it (so
    that no message is another conversation's)."""
    words = (ROOT / "README.md").read_text().split()
    size = 60
    mark = "" if number is None else f"(conversation {number}) "
    out = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(n - 1):
        chunk = mark + " ".join(words[(i * size) % (len(words) - size) :][:size])
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": chunk})
    if out[-1]["role"] != "user":
        out.append({"role": "user", "content": "Go on."})
    return out


@dataclass(frozen=True)
class Timing:
    """One answer, in seconds: to its first token and to its end, seen by the client; and
    the same outside the stub (the stub's own time, between its receiving the request and
    sending the token, taken out)."""

    first: float
    whole: float
    first_outside: float
    whole_outside: float
    to_stub_outside: float  # of first_outside: the request's way to the stub
    back_outside: float  # of first_outside: the first token's way back from it


class Pool:
    """Keep-alive HTTP/1.1 connections to one port, opened as needed (an open loop has no
    bound on connections but the number in flight). A connection idle for IDLE_S or closed
    by the server is not reused (uvicorn closes one idle for 5 s), as httpx's pool does."""

    IDLE_S = 4.0

    def __init__(self, port: int) -> None:
        self.port = port
        self.idle: list[tuple[asyncio.StreamReader, asyncio.StreamWriter, float]] = []

    async def request(self, payload: bytes) -> Timing:
        reader, writer = await self.take()
        sent = time.monotonic()
        writer.write(payload)
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
            writer.close()
            raise RuntimeError(head.split(b"\r\n", 1)[0].decode())
        received, first = bytearray(), 0.0
        while True:
            size = int((await reader.readline()).split(b";")[0], 16)
            if size == 0:
                await reader.readexactly(2)
                break
            start = max(0, len(received) - 4)
            received += (await reader.readexactly(size + 2))[:-2]
            if not first and received.find(b'"t0', start) >= 0:
                first = time.monotonic()
        whole = time.monotonic()
        self.idle.append((reader, writer, whole))
        stamp, last = FIRST.search(received), LAST.search(received)
        if stamp is None or last is None:
            raise RuntimeError("an answer without the stub's stamps")
        at_stub, first_sent = float(stamp.group(1)), float(stamp.group(2))
        up = at_stub - sent
        return Timing(
            first - sent,
            whole - sent,
            up + first - first_sent,
            up + whole - float(last.group(1)),
            up,
            first - first_sent,
        )

    async def take(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """The most recently used live connection, else a new one."""
        while self.idle:
            reader, writer, since = self.idle.pop()
            if not reader.at_eof() and time.monotonic() - since < self.IDLE_S:
                return reader, writer
            writer.close()
        return await asyncio.open_connection("127.0.0.1", self.port, limit=1 << 20)

    def close(self) -> None:
        for _, writer, _ in self.idle:
            writer.close()


def payloads(port: int, messages: int, conversations: int) -> list[bytes]:
    """The requests of `conversations` conversations of `messages` messages each, whole."""
    out = []
    for number in range(conversations):
        chat = conversation(messages, number)
        body = {"model": "stub", "messages": chat, "stream": True, "max_tokens": 512}
        data = json.dumps(body).encode()
        out.append((
            f"POST {PATH} HTTP/1.1\r\nhost: 127.0.0.1:{port}\r\ncontent-type: "
            f"application/json\r\ncontent-length: {len(data)}\r\n\r\n"
        ).encode() + data)  # fmt: skip
    return out


def arrivals(rate: float, until: float, seed: int) -> list[float]:
    """Poisson arrival times in [0, until): exponential gaps of mean 1/rate."""
    rng, times, at = random.Random(seed), [], 0.0
    while True:
        at += rng.expovariate(rate)
        if at >= until:
            return times
        times.append(at)


@dataclass(frozen=True)
class Run:
    """One path's measured requests, and what the processes spent meanwhile."""

    timings: list[Timing]
    failed: int
    served: int  # answers that ended in the window (any request's)
    window: float  # seconds measured
    cpu: dict[str, float]  # seconds of CPU in the window, per process (and the machine's)
    load: float  # 1-minute load average at the window's end


async def attempt(pool: Pool, body: bytes) -> Timing | None:
    try:
        return await pool.request(body)
    except (OSError, asyncio.IncompleteReadError, ValueError, RuntimeError) as exc:
        print(f"  failed: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
        return None


async def steady(
    port: int,
    bodies: list[bytes],
    schedule: list[float],
    measured: tuple[float, float],
    pids: dict[str, list[int]],
) -> Run:
    """Sends a request at each time of `schedule` (seconds from now), the i-th of the
    conversation i modulo their number (`bodies`: each conversation asks again about one
    answer's length later, as a user would); measures the requests sent in `measured` (from,
    to) and the CPU spent from its start to its end."""
    pool = Pool(port)
    await attempt(pool, bodies[0])  # one connection and one request before the clock starts
    origin = time.monotonic()

    ends: list[float] = []

    async def at(when: float, body: bytes) -> Timing | None:
        await asyncio.sleep(origin + when - time.monotonic())
        timing = await attempt(pool, body)
        ends.append(time.monotonic() - origin)
        return timing

    async def sample(when: float) -> dict[str, float]:
        await asyncio.sleep(origin + when - time.monotonic())
        return usage(pids)

    tasks = [
        asyncio.ensure_future(at(when, bodies[i % len(bodies)])) for i, when in enumerate(schedule)
    ]
    before = await sample(measured[0])
    after = await sample(measured[1])
    load = os.getloadavg()[0]
    results = await asyncio.wait_for(asyncio.gather(*tasks), DEADLINE_S)
    pool.close()
    kept = [
        r for when, r in zip(schedule, results, strict=True) if measured[0] <= when < measured[1]
    ]
    done = [r for r in kept if r is not None]
    spent = {name: after[name] - before[name] for name in after}
    served = sum(measured[0] <= end < measured[1] for end in ends)
    return Run(done, len(kept) - len(done), served, measured[1] - measured[0], spent, load)


async def burst(
    port: int, bodies: list[bytes], streams: int, requests: int, pids: dict[str, list[int]]
) -> Run:
    """`streams` clients at once, each sending its share of `requests` back to back (client
    i the conversation i modulo their number, `bodies`)."""
    pool = Pool(port)
    await attempt(pool, bodies[0])
    before, started = usage(pids), time.monotonic()

    async def client(share: int, body: bytes) -> list[Timing | None]:
        return [await attempt(pool, body) for _ in range(share)]

    shares = [requests // streams + (i < requests % streams) for i in range(streams)]
    clients = (client(share, bodies[i % len(bodies)]) for i, share in enumerate(shares))
    results = await asyncio.wait_for(asyncio.gather(*clients), DEADLINE_S)
    after, load = usage(pids), os.getloadavg()[0]
    pool.close()
    flat = [r for rs in results for r in rs]
    done = [r for r in flat if r is not None]
    spent = {name: after[name] - before[name] for name in after}
    return Run(done, len(flat) - len(done), len(flat), time.monotonic() - started, spent, load)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (the proxy's worker processes)."""
    parents: dict[int, int] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            parents[int(stat.parent.name)] = int(stat.read_text().rsplit(")", 1)[1].split()[1])
        except (OSError, ValueError):
            continue
    found, frontier = [pid], [pid]
    while frontier:
        frontier = [child for child, parent in parents.items() if parent in frontier]
        found += frontier
    return found


def cpu_seconds(pids: list[int]) -> float:
    """User + system CPU time of these processes so far (robust to a busy machine)."""
    total = 0
    for each in pids:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def usage(pids: dict[str, list[int]]) -> dict[str, float]:
    """CPU seconds so far of each named process tree, of this script (the clients), and of
    the whole machine (busy time of all cores, from /proc/stat: everyone's work), of which
    `stolen`: the time a virtual machine's cores waited while its hypervisor ran others
    (/proc/stat's steal: a run with much of it ran on a machine slowed from outside)."""
    spent = {name: cpu_seconds(each) for name, each in pids.items()}
    mine = os.times()
    spent["clients"] = mine.user + mine.system
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    idle, tick = fields[3] + fields[4], os.sysconf("SC_CLK_TCK")
    spent["machine"] = (sum(fields[:8]) - idle) / tick
    spent["stolen"] = fields[7] / tick
    return spent


def rss_kib(pid: int) -> int:
    """Peak RSS of `pid`'s worker processes, summed (itself when it has none)."""
    total = 0
    for each in tree(pid)[1:] or [pid]:
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    return total


def report(n: int, runs: dict[str, Run], workers: int, cores: int) -> None:
    """The figures of one conversation length: direct, through the proxy, and added."""
    direct = runs["direct"]
    print(f"\n{n} messages:")
    for title, field in (
        ("end to end (as the client sees it):", ""),
        ("outside the stub (the stub's own time taken out, per request):", "_outside"),
    ):
        print(f"  {title}")
        legs = (("  to the stub", "to_stub"), ("  and back", "back")) if field else ()
        for label, name in (("first token", "first"), *legs, ("whole answer", "whole")):
            d = [getattr(t, name + field) for t in direct.timings]
            for path in (k for k in runs if k != "direct"):
                p = [getattr(t, name + field) for t in runs[path].timings]
                print(f"    {label:12} direct p50 {pct(d, .5):7.1f} ms p99 {pct(d, .99):7.1f} ms | "
                      f"{path} p50 {pct(p, .5):7.1f} ms p99 {pct(p, .99):7.1f} ms | added p50 "
                      f"{pct(p, .5) - pct(d, .5):+7.1f} ms "
                      f"p99 {pct(p, .99) - pct(d, .99):+7.1f} ms")  # fmt: skip
    for name, run in runs.items():
        count, served = len(run.timings), run.served
        flight = sum(t.whole for t in run.timings) / run.window
        cpu = {k: v / run.window for k, v in run.cpu.items()}
        processes = [k for k in run.cpu if k not in ("machine", "stolen")]
        ours = sum(cpu[k] for k in processes)
        per_request = ", ".join(
            f"{k} {run.cpu[k] * 1000 / max(served, 1):.1f} ms" for k in processes
        )
        rate = served / run.window
        print(f"  {name}: {count} requests measured, {run.failed} failed, {flight:.0f} in flight "
              f"on average; {rate:.1f} answers/s served"
              f"{f' ({rate / workers:.1f} per worker)' if name == 'proxy' else ''}; CPU per "
              f"answer served: {per_request}")  # fmt: skip
        busy = ", ".join(f"{k} {cpu[k]:.2f}" for k in processes)
        other = max(0.0, cpu["machine"] - ours - cpu["stolen"])
        print(f"    machine: {cpu['machine']:.2f} of {cores} cores busy ({busy}, other "
              f"processes and the kernel {other:.2f}, stolen by the hypervisor "
              f"{cpu['stolen']:.2f}), load average {run.load:.1f}")  # fmt: skip


def litellm_proxy(command: str, stub_port: int, port: int) -> subprocess.Popen[bytes]:
    """LiteLLM's proxy, the anchor, in front of the same stub: as its users start it (one
    worker, its defaults), its one model named `stub` as the clients ask for it, its cost
    map read from its package (`LITELLM_LOCAL_MODEL_COST_MAP`: no download at startup); the
    config is JSON, which is YAML."""
    config = ROOT / ".bench-home" / "litellm-proxy.yaml"
    config.parent.mkdir(exist_ok=True)
    params = {"model": "openai/stub", "api_base": f"http://127.0.0.1:{stub_port}/v1"}
    models = [{"model_name": "stub", "litellm_params": {**params, "api_key": "none"}}]
    # No client keys, as chatcli's proxy on loopback (LiteLLM refuses that unless told).
    settings = {"dangerously_permit_weak_or_unset_master_key": True}
    config.write_text(json.dumps({"model_list": models, "general_settings": settings}))
    return subprocess.Popen(
        [command, "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
         "--num_workers", "1"],
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        stdout=subprocess.DEVNULL,
    )  # fmt: skip


def wait_listening(port: int) -> None:
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=200, help="in flight on average")
    parser.add_argument("--messages", default="100,2000")
    parser.add_argument("--token-rate", type=float, default=50.0, help="the stub's tokens/s")
    parser.add_argument("--answer-tokens", type=int, default=150, help="tokens per answer")
    parser.add_argument("--warm-up", type=float, default=3.0, help="seconds not measured")
    parser.add_argument("--window", type=float, default=20.0, help="seconds measured")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--burst", action="store_true", help="all streams at once, closed loop")
    parser.add_argument("--requests", type=int, help="--burst: requests per run (2x streams)")
    parser.add_argument("--workers", type=int, default=1, help="proxy worker processes")
    parser.add_argument(
        "--conversations",
        type=int,
        default=0,
        help="distinct conversations the requests take turns at (default: --streams)",
    )
    parser.add_argument("--profile", help="run the proxy under cProfile, writing its profile here")
    parser.add_argument(
        "--litellm",
        metavar="LITELLM",
        help="also measure LiteLLM's proxy in front of the same stub: its `litellm` command "
        "(benchmarks/install-litellm-proxy.sh prints it)",
    )
    parser.add_argument(
        "--bare", action="store_true", help="also measure a bare forwarder (the floor)"
    )
    parser.add_argument(
        "--bare-cost",
        action="append",
        default=[],
        metavar="MS/US",
        help="also measure a bare forwarder spending MS ms of CPU per request and US µs per "
        "read of the answer (repeatable)",
    )
    parser.add_argument("--stub", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bare-forwarder", nargs=3, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stub:
        run_stub(args.stub, args.answer_tokens, args.token_rate)
        return
    if args.bare_forwarder:
        port, upstream_port, cost = args.bare_forwarder
        run_bare(int(port), int(upstream_port), bare_cost(cost))
        return
    requests = args.requests or 2 * args.streams
    stub_port, proxy_port = free_port(), free_port()
    home = ROOT / ".bench-home"  # the proxy's CHATCLI_HOME
    home.mkdir(exist_ok=True)
    env = {**os.environ, "CHATCLI_HOME": str(home)}
    stub = subprocess.Popen(
        [sys.executable, __file__, "--stub", str(stub_port), "--answer-tokens",
         str(args.answer_tokens), "--token-rate", str(args.token_rate)]
    )  # fmt: skip
    code = "from chatcli.cli import main; raise SystemExit(main())"
    if args.profile:  # written when the proxy stops on SIGINT (see the end)
        code = f"import cProfile, chatcli.cli; cProfile.run('chatcli.cli.main()', {args.profile!r})"
    proxy = subprocess.Popen(
        [sys.executable, "-c", code, "proxy",
         "--provider", "openai-compatible", "--model", "stub", "--port", str(proxy_port),
         "--base-url", f"http://127.0.0.1:{stub_port}/v1", "--max-concurrency", "100000",
         "--no-sessions", "--workers", str(args.workers)],
        env=env,
    )  # fmt: skip
    anchors: dict[str, tuple[int, subprocess.Popen[bytes]]] = {}
    if args.litellm:
        port = free_port()
        anchors["litellm"] = (port, litellm_proxy(args.litellm, stub_port, port))
    costs = (["0/0"] if args.bare else []) + args.bare_cost
    for cost in costs:
        bare_cost(cost)  # a bad one fails here, before any run
        port = free_port()
        command = [sys.executable, __file__, "--bare-forwarder", str(port), str(stub_port), cost]
        name = "bare" if cost == "0/0" else f"bare+{cost}"
        anchors[name] = (port, subprocess.Popen(command))
    try:
        wait_listening(stub_port)
        wait_listening(proxy_port)
        for port, _ in anchors.values():
            wait_listening(port)
        time.sleep(1.0)  # the proxy's workers
        pids = {"proxy": tree(proxy.pid), "stub": [stub.pid]}
        pids.update((name, tree(process.pid)) for name, (_, process) in anchors.items())
        duration = args.answer_tokens / args.token_rate
        rate = args.streams / duration
        answer = (f"answers of {args.answer_tokens} tokens at {args.token_rate:.0f} tokens/s "
                  f"({duration:.1f} s)")  # fmt: skip
        if args.burst:
            print(f"burst: {args.streams} clients at once, {requests} requests back to back "
                  f"per run; {answer}")  # fmt: skip
        else:
            print(f"steady state: {args.streams} streams in flight on average, Poisson "
                  f"arrivals at {rate:.1f}/s (seed {args.seed}); {answer}; {args.warm_up:.0f} s "
                  f"warm-up, {args.window:.0f} s measured")  # fmt: skip
        print(f"{args.conversations or args.streams} distinct conversations, the requests "
              f"taking turns at them")  # fmt: skip
        print(f"proxy: {args.workers} worker(s); machine: {os.cpu_count()} cores, "
              f"load average {os.getloadavg()[0]:.1f} before")  # fmt: skip
        span = args.warm_up + args.window
        schedule = arrivals(rate, span, args.seed)
        for n in (int(x) for x in args.messages.split(",")):
            runs = {}
            paths = {"direct": stub_port, "proxy": proxy_port}
            paths.update((name, port) for name, (port, _) in anchors.items())
            for name, port in paths.items():
                bodies = payloads(port, n, args.conversations or args.streams)
                if args.burst:
                    load = burst(port, bodies, args.streams, requests, pids)
                else:
                    load = steady(port, bodies, schedule, (args.warm_up, span), pids)
                runs[name] = uvloop.run(load)
            report(n, runs, args.workers, os.cpu_count() or 1)
            print(f"  proxy peak RSS so far: {rss_kib(proxy.pid) / 1024:.0f} MiB")
            for name, (_, process) in anchors.items():
                print(f"  {name} peak RSS so far: {rss_kib(process.pid) / 1024:.0f} MiB")
    finally:
        proxy.send_signal(signal.SIGINT)  # a clean stop: the profile is written
        stub.terminate()
        for _, process in anchors.values():
            process.terminate()
        for process in (proxy, stub, *(process for _, process in anchors.values())):
            process.wait(30)


if __name__ == "__main__":
    main()

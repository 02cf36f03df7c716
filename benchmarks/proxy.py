"""The proxy's added latency, CPU and memory, side by side with a bare forwarder and LiteLLM;
and the upstream calls a first overflow costs in front of llama-server.

One run, one upstream stub, the same clients on the same arrival schedule, every path in turn
at every load: the stub called directly; a bare forwarder (a Starlette app on uvicorn passing
the request's and the answer's bytes through with httpx: the floor of any Python proxy on
these parts); `chatcli proxy` with one worker and with two (`--workers 2`, `--no-sessions`:
what recording adds is benchmarks/proxy_store.py's measure); LiteLLM's proxy (the real
package, in a virtualenv of its own: benchmarks/install-litellm-proxy.sh), one worker. All on
127.0.0.1. It prints one markdown table, a row per load and path, then the first-overflow
table, and the goals' verdicts.

    python benchmarks/proxy.py [--streams 20,50,200] [--messages 100,2000]
        [--paths direct,bare,chatcli-1,chatcli-2,litellm] [--litellm LITELLM]
        [--warm-up 3] [--window 12] [--token-rate 50] [--answer-tokens 150] [--seed 1]
        [--profile FILE] [--overflow-messages 40,75,150]
        [--overflow-paths bare,chatcli-declared,chatcli-props,litellm]

An empty `--messages` or `--overflow-messages` leaves that part out.

**Load.** For each `--messages` (conversations of that many messages of real text: this
repository's README cut into messages, one distinct conversation per stream) and each
`--streams`, requests arrive as a Poisson process (open loop: an arrival does not wait for an
answer) at rate = streams / answer duration, so that many answers are in flight on average.
The stub streams `--answer-tokens` tokens at `--token-rate` tokens/s, one event per token
(150 tokens at 50 tokens/s: a short chat answer at a common model's speed, 3 s). Arrivals of
the first `--warm-up` seconds are not measured, those of the next `--window` seconds are; every
path runs the same schedule (`--seed`).

**Added latency, the stub's own time taken out.** The stub writes in its first token when it
received the request and when it sent that token, and in its last token when it sent it
(CLOCK_MONOTONIC, shared by all processes). A request's time outside the stub is (stub
received - client sent) + (client got the token - stub sent it), for the first token and for
the whole answer: on the direct path the network and the clients' own queue, through a proxy
its work besides. A path's added latency is its percentile of that time minus the direct
path's (p50, p99); the direct row shows its own time outside the stub.

**CPU per answer**: the CPU time (user + system, from /proc, so it holds on a busy machine)
that the path's process tree (the stub's, for the direct path) spent in the window, over the
answers it finished in the window. **Peak memory**: the peak RSS of the path's process tree in
the run (each process's peak, summed; reset before each run through /proc/PID/clear_refs).

**Bounded.** At most 4 x streams requests in flight per run, and at least 100 (an arrival
beyond is dropped and counted); the answers still open `DRAIN_S` seconds after the answer
duration past the last arrival are abandoned (the client closes the connection) and counted;
then the run waits (15 s at most) for the servers to go quiet. Every other wait is bounded
too: a server's start (120 s), its first answer (`FIRST_S`), its stop (SIGINT, then after
`STOP_S` SIGKILL to its process group, its workers too: no server outlives the run, holding
its output open). A path *sustains* a load when none of its
requests failed, was dropped or abandoned, and it finished at least 90% as many answers in
the window as arrived.

**The goals**, as ratios in the same run: chatcli's added latency at most a fifth of
LiteLLM's (each of first token and whole answer, p50 and p99; the worst of the four is shown)
at every load LiteLLM sustains; chatcli's CPU per answer at most 4x the bare forwarder's.

**The first overflow** (the real llama-server of benchmarks/recovery.py, the tiny model, an
8,192-token window): conversations of `--overflow-messages` messages of the same README text,
1.7 to 6 times the window by the server's own template and tokenizer, each sent once, as its
first request, through each path just started: the bare forwarder; chatcli told the window
(`--context-window 8192`) and chatcli learning it from the server's `/props`; LiteLLM told
it (`model_info.max_input_tokens` with its router's pre-call checks). The upstream chat calls
and the rejected ones are counted by the server itself (its log: a slot launched per chat
request, an error line per prompt over the window), so a path's own account is not needed.
The goal: chatcli answers every first overflow with no rejected call.

The stub and the clients are plain asyncio streams on uvloop (keep-alive connections, chunked
decoding), the cheapest honest HTTP/1.1 there is here, so that they take little of the
machine from the proxies. `--profile FILE` runs the one-worker chatcli proxy under cProfile
(its process's CPU time) and writes its profile to FILE when it stops (`python -m pstats
FILE`).
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import json
import os
import random
import re
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import uvloop

ROOT = Path(__file__).resolve().parents[1]
DEADLINE_S = 300.0  # a whole run's bound (benchmarks/proxy_store.py's too)
STOP_S = 30.0  # a server's time to stop on SIGINT, after which it is killed
FIRST_S = 60.0  # a path's time to answer its first request, before the clock starts
DRAIN_S = 5.0  # past the last arrival and one answer's duration: open answers are abandoned
IN_FLIGHT_PER_STREAM = 4  # the open loop's bound, in streams
PATH = "/v1/chat/completions"
PATHS = {
    "direct": "direct (the stub)",
    "bare": "bare forwarder",
    "chatcli-1": "chatcli, 1 worker",
    "chatcli-2": "chatcli, 2 workers",
    "litellm": "LiteLLM, 1 worker",
}
LITELLM = ROOT / "benchmarks" / ".litellm-proxy" / "bin" / "litellm"
# The stub's stamps (see the module's docstring): in the first and the last token.
FIRST = re.compile(rb'"t0@([0-9.]+)@([0-9.]+) ')
LAST = re.compile(rb'"t[0-9]+#([0-9.]+) ')


Popen = subprocess.Popen[bytes]  # a server of the run
_GIVEN: set[int] = set()  # the ports this run handed out (a server may not be bound yet)


def free_port() -> int:
    """A free loopback port, never one this run handed out already: the OS may give a port
    back while the server it went to has not bound it yet (two servers on one port)."""
    while True:
        with socket.socket() as sock:
            sock.bind(("127.0.0.1", 0))
            port: int = sock.getsockname()[1]
        if port not in _GIVEN:
            _GIVEN.add(port)
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
                    if writer.is_closing():  # the client went away
                        return
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

    # Started as a shell's background job (a test suite's, say), the stub inherits SIGINT
    # ignored, which Python then leaves ignored: `stop` could not end it.
    signal.signal(signal.SIGINT, signal.default_int_handler)
    uvloop.run(main())


def bare_app(upstream: str) -> Any:
    """The bare forwarder: a Starlette app that sends each request's body to `upstream` with
    httpx and streams the answer's bytes back as they come, nothing parsed, judged or
    rewritten. httpx's pool takes the OpenAI SDK's limits (1,000 connections, 100 kept
    alive), as chatcli's upstream client does."""
    import httpx
    from starlette.applications import Starlette
    from starlette.background import BackgroundTask
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    limits = httpx.Limits(max_connections=1000, max_keepalive_connections=100)
    client = httpx.AsyncClient(base_url=upstream, timeout=None, limits=limits)

    async def forward(request: Request) -> StreamingResponse:
        sent = client.build_request(
            "POST",
            request.url.path,
            content=await request.body(),
            headers={"content-type": request.headers.get("content-type", "application/json")},
        )
        answer = await client.send(sent, stream=True)
        return StreamingResponse(
            answer.aiter_raw(),
            status_code=answer.status_code,
            media_type=answer.headers.get("content-type"),
            background=BackgroundTask(answer.aclose),
        )

    return Starlette(routes=[Route(PATH, forward, methods=["POST"])])


def run_bare(port: int, upstream_port: int) -> None:
    """The bare forwarder on uvicorn, as `chatcli proxy` serves (uvloop and httptools when
    installed)."""
    import uvicorn

    app = bare_app(f"http://127.0.0.1:{upstream_port}")
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def conversation(n: int, number: int | None = None) -> list[dict[str, str]]:
    """`n` messages of real text (this repository's README, 60 words a message), the same
    system prompt first; `number`: a conversation of its own, each message marked with it (so
    that no message is another conversation's)."""
    words = (ROOT / "README.md").read_text().split()
    size = 60
    mark = "" if number is None else f"(conversation {number}) "
    out = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(n - 1):
        start = (i * size) % (len(words) - size)
        chunk = mark + " ".join(words[start : start + size])
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
        try:
            return await self.timed(reader, writer, payload)
        except BaseException:  # failed or abandoned: the connection is not reused
            writer.close()
            raise

    async def timed(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, payload: bytes
    ) -> Timing:
        sent = time.monotonic()
        writer.write(payload)
        head = await reader.readuntil(b"\r\n\r\n")
        if not head.startswith(b"HTTP/1.1 200"):
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
        self.idle.clear()


def payloads(messages: int, conversations: int) -> list[bytes]:
    """The requests of `conversations` conversations of `messages` messages each, whole (the
    same bytes to every path: the host named without a port)."""
    out = []
    for number in range(conversations):
        chat = conversation(messages, number)
        body = {"model": "stub", "messages": chat, "stream": True, "max_tokens": 512}
        data = json.dumps(body).encode()
        out.append((
            f"POST {PATH} HTTP/1.1\r\nhost: 127.0.0.1\r\ncontent-type: "
            f"application/json\r\ncontent-length: {len(data)}\r\n\r\n"
        ).encode() + data)  # fmt: skip
    return out


def arrivals(rate: float, until: float, seed: int) -> list[float]:
    """Poisson arrival times in [0, until): exponential gaps of mean 1/rate."""
    rng, at = random.Random(seed), 0.0
    times: list[float] = []
    while True:
        at += rng.expovariate(rate)
        if at >= until:
            return times
        times.append(at)


@dataclass(frozen=True)
class Run:
    """One path's run at one load: its measured answers, what went wrong, what it spent."""

    timings: list[Timing]  # the answers to the requests that arrived in the window
    asked: int  # requests that arrived in the window
    failed: int  # of them: an error
    dropped: int  # of them: not sent, over the bound on requests in flight
    abandoned: int  # of them: still open at the drain's end
    served: int  # answers that ended in the window (any request's)
    window: float  # seconds measured
    cpu: float  # seconds of CPU of the path's processes in the window
    machine: float  # seconds of CPU of the whole machine in the window (all cores)
    peak_rss_kib: int

    @property
    def sustained(self) -> bool:
        clean = not (self.failed or self.dropped or self.abandoned)
        return clean and self.served >= 0.9 * self.asked


async def attempt(pool: Pool, body: bytes) -> Timing | None:
    try:
        return await pool.request(body)
    except (OSError, asyncio.IncompleteReadError, ValueError, RuntimeError) as exc:
        print(f"  failed: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
        return None


DROPPED, ABANDONED = "dropped", "abandoned"


def outcome(task: asyncio.Task[Timing | str | None]) -> Timing | str | None:
    """A request's end: its timing, DROPPED, ABANDONED, or None (it failed)."""
    if task.cancelled():
        return ABANDONED
    return None if task.exception() is not None else task.result()


async def steady(
    port: int,
    bodies: list[bytes],
    schedule: list[float],
    measured: tuple[float, float],
    pids: list[int],
    bound: tuple[int, float],
) -> Run:
    """Sends a request at each time of `schedule` (seconds from now), the i-th of the
    conversation i modulo their number (`bodies`); measures the requests sent in `measured`
    (from, to), and what `pids` and the machine spent in a window of that length from its
    start (as late as a busy machine wakes it). `bound`: the requests in flight at most
    (beyond, an arrival is dropped), and the seconds past the last arrival after which the
    answers still open are abandoned."""
    pool = Pool(port)
    try:  # one connection and one request before the clock starts
        await asyncio.wait_for(attempt(pool, bodies[0]), FIRST_S)
    except TimeoutError:
        raise RuntimeError(f"no answer from port {port} in {FIRST_S:.0f} s") from None
    reset_peak_rss(pids)
    origin = time.monotonic()
    ends: list[float] = []
    flight = [0]

    async def at(when: float, body: bytes) -> Timing | str | None:
        await asyncio.sleep(origin + when - time.monotonic())
        if flight[0] >= bound[0]:
            return DROPPED
        flight[0] += 1
        try:
            timing = await attempt(pool, body)
        finally:
            flight[0] -= 1
        if timing is not None:
            ends.append(time.monotonic() - origin)
        return timing

    async def sample(when: float) -> tuple[float, float, float]:
        """The time (a busy machine may wake this late), the CPU of `pids`, the machine's."""
        await asyncio.sleep(origin + when - time.monotonic())
        return time.monotonic() - origin, cpu_seconds(pids), machine_cpu_seconds()

    tasks = [
        asyncio.ensure_future(at(when, bodies[i % len(bodies)])) for i, when in enumerate(schedule)
    ]
    before = await sample(measured[0])
    after = await sample(before[0] + measured[1] - measured[0])  # a window of its length
    cutoff = origin + (schedule[-1] if schedule else 0.0) + bound[1]
    await asyncio.wait(tasks, timeout=min(DEADLINE_S, max(0.0, cutoff - time.monotonic())))
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)
    pool.close()
    kept = [
        outcome(task)
        for when, task in zip(schedule, tasks, strict=True)
        if measured[0] <= when < measured[1]
    ]
    return Run(
        timings=[r for r in kept if isinstance(r, Timing)],
        asked=len(kept),
        failed=sum(r is None for r in kept),
        dropped=sum(r == DROPPED for r in kept),
        abandoned=sum(r == ABANDONED for r in kept),
        served=sum(before[0] <= end < after[0] for end in ends),
        window=after[0] - before[0],
        cpu=after[1] - before[1],
        machine=after[2] - before[2],
        peak_rss_kib=peak_rss_kib(pids),
    )


def pct(values: list[float], p: float) -> float:
    """The `p` quantile of `values` (seconds), in ms."""
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(p * len(ordered)))] * 1000


def tree(pid: int) -> list[int]:
    """`pid` and its descendants (a server's worker processes)."""
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


def cpu_seconds(pids: Iterable[int]) -> float:
    """User + system CPU time of these processes so far (robust to a busy machine)."""
    total = 0
    for each in pids:
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def machine_cpu_seconds() -> float:
    """Busy time of all cores so far (/proc/stat: everyone's work, the hypervisor's steal
    included)."""
    fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    return (sum(fields[:8]) - fields[3] - fields[4]) / os.sysconf("SC_CLK_TCK")


def reset_peak_rss(pids: Iterable[int]) -> None:
    """Each process's peak RSS (VmHWM) set back to its RSS now (Linux's clear_refs)."""
    for each in pids:
        try:
            Path(f"/proc/{each}/clear_refs").write_text("5")
        except OSError:
            continue


def peak_rss_kib(pids: Iterable[int]) -> int:
    """The peak RSS of these processes, summed."""
    total = 0
    for each in pids:
        try:
            lines = Path(f"/proc/{each}/status").read_text().splitlines()
        except OSError:
            continue
        total += sum(int(line.split()[1]) for line in lines if line.startswith("VmHWM:"))
    return total


@dataclass(frozen=True)
class Row:
    """One path at one load, in the table's units: ms, MiB."""

    messages: int
    streams: int
    path: str
    run: Run
    added: tuple[float, float, float, float]  # first token p50, p99; whole answer p50, p99

    @property
    def cpu_ms(self) -> float:
        return self.run.cpu * 1000 / max(self.run.served, 1)


def outside(run: Run) -> tuple[float, float, float, float]:
    """A run's time outside the stub, ms: first token p50, p99; whole answer p50, p99."""
    first = [t.first_outside for t in run.timings]
    whole = [t.whole_outside for t in run.timings]
    if not first:
        return (float("nan"),) * 4
    return pct(first, 0.5), pct(first, 0.99), pct(whole, 0.5), pct(whole, 0.99)


def rows(messages: int, streams: int, runs: dict[str, Run]) -> list[Row]:
    """The rows of one load: each path's time outside the stub less the direct path's (the
    direct row: its own)."""
    base = outside(runs["direct"]) if "direct" in runs else (0.0,) * 4
    out = []
    for path, run in runs.items():
        own = outside(run)
        added = own if path == "direct" else tuple(a - b for a, b in zip(own, base, strict=True))
        out.append(Row(messages, streams, path, run, added))  # type: ignore[arg-type]
    return out


def latency_ratio(row: Row, litellm: Row | None) -> float | None:
    """The worst of chatcli's four added latencies over LiteLLM's (None: no LiteLLM row, or
    one whose added latency is not positive)."""
    if litellm is None or min(litellm.added) <= 0:
        return None
    return max(a / b for a, b in zip(row.added, litellm.added, strict=True))


def cpu_ratio(row: Row, bare: Row | None) -> float | None:
    if bare is None or bare.cpu_ms <= 0:
        return None
    return row.cpu_ms / bare.cpu_ms


def fmt(value: float | None, form: str = "{:.1f}", absent: str = "-") -> str:
    return absent if value is None or value != value else form.format(value)


HEADER = (
    "| messages | streams | path | answers/s (asked) | measured (failed, dropped, abandoned) "
    "| first token +p50 | +p99 | whole answer +p50 | +p99 | CPU ms/answer | peak RSS MiB "
    "| machine busy (cores) | added / LiteLLM's | CPU / bare's |"
)


def table_line(row: Row, same_load: dict[str, Row]) -> str:
    run = row.run
    lost = f"{len(run.timings)} ({run.failed}, {run.dropped}, {run.abandoned})"
    sustained = "" if run.sustained else " (not sustained)"
    rate = f"{run.served / run.window:.1f} ({run.asked / run.window:.1f}){sustained}"
    if row.path == "direct":  # its own time outside the stub, not an addition
        figures = [f"({fmt(v)})" for v in row.added]
    else:
        figures = [fmt(v, "{:+.1f}") for v in row.added]
    ratios = ["", ""]
    if row.path.startswith("chatcli"):
        ratios = [
            fmt(latency_ratio(row, same_load.get("litellm")), "{:.2f}"),
            fmt(cpu_ratio(row, same_load.get("bare")), "{:.1f}x"),
        ]
    cells = [
        str(row.messages), str(row.streams), PATHS[row.path], rate, lost, *figures,
        f"{row.cpu_ms:.1f}", f"{run.peak_rss_kib / 1024:.0f}", f"{run.machine / run.window:.2f}",
        *ratios,
    ]  # fmt: skip
    return "| " + " | ".join(cells) + " |"


def table(all_rows: Sequence[Row]) -> list[str]:
    lines = [HEADER, "|" + "---|" * HEADER.count(" | ") + "---|"]
    for row in all_rows:
        same_load = {
            r.path: r for r in all_rows if (r.messages, r.streams) == (row.messages, row.streams)
        }
        lines.append(table_line(row, same_load))
    return lines


def goals(all_rows: Sequence[Row]) -> list[str]:
    """The two goals' verdicts, per chatcli path, with every load's ratio; the latency ratio
    at the loads LiteLLM does not sustain is shown apart, and not judged."""
    out = []
    at = {(r.messages, r.streams, r.path): r for r in all_rows}
    for path in (p for p in ("chatcli-1", "chatcli-2") if any(r.path == p for r in all_rows)):
        judged: list[Ratio] = []
        beyond: list[Ratio] = []
        cpu: list[Ratio] = []
        for row in (r for r in all_rows if r.path == path):
            name = f"{row.messages} msgs x {row.streams}"
            litellm = at.get((row.messages, row.streams, "litellm"))
            bare = at.get((row.messages, row.streams, "bare"))
            if litellm is not None:
                ratio = latency_ratio(row, litellm)
                ok = ratio is not None and ratio <= 0.2
                (judged if litellm.run.sustained else beyond).append((name, ratio, ok))
            if bare is not None:
                ratio = cpu_ratio(row, bare)
                cpu.append((name, ratio, ratio is not None and ratio <= 4.0))
        latency = verdict("added latency <= 1/5 of LiteLLM's where it sustains the load", judged)
        if beyond:
            latency += "; where LiteLLM does not sustain the load: " + listed(beyond)
        out.append(f"- {PATHS[path]}: {latency}")
        cpu_line = verdict("CPU per answer <= 4x the bare forwarder's", cpu, "{:.1f}x")
        out.append(f"- {PATHS[path]}: {cpu_line}")
    return out


Ratio = tuple[str, float | None, bool]  # a load, its ratio (None: none), the goal met


def listed(ratios: list[Ratio], form: str = "{:.2f}") -> str:
    return "; ".join(f"{name} {fmt(ratio, form)}" for name, ratio, _ in ratios)


def verdict(goal: str, ratios: list[Ratio], form: str = "{:.2f}") -> str:
    if not ratios:
        return f"{goal}: no load to judge"
    met = all(ok for _, _, ok in ratios)
    return f"{goal}: {'met' if met else 'MISSED'} ({listed(ratios, form)})"


def litellm_proxy(
    command: str, api_base: str, port: int, *, model: str = "stub", window: int | None = None
) -> Popen:
    """LiteLLM's proxy in front of the server at `api_base` (the stub): as its users start it
    (one worker, its defaults), its one model named `model` as the clients ask for it, its
    cost map read from its package (`LITELLM_LOCAL_MODEL_COST_MAP`: no download at startup);
    `window`: the model's input limit declared to it, as chatcli's `--context-window`
    (`model_info.max_input_tokens`, with the router's pre-call checks that read it). The
    config is JSON, which is YAML."""
    config = ROOT / ".bench-home" / f"litellm-proxy-{port}.yaml"
    config.parent.mkdir(exist_ok=True)
    params = {"model": f"openai/{model}", "api_base": api_base, "api_key": "none"}
    entry: dict[str, Any] = {"model_name": model, "litellm_params": params}
    body: dict[str, Any] = {"model_list": [entry]}
    if window is not None:
        entry["model_info"] = {"max_input_tokens": window}
        body["router_settings"] = {"enable_pre_call_checks": True}
    # No client keys, as chatcli's proxy on loopback (LiteLLM refuses that unless told).
    body["general_settings"] = {"dangerously_permit_weak_or_unset_master_key": True}
    config.write_text(json.dumps(body))
    return spawn(
        [command, "--config", str(config), "--host", "127.0.0.1", "--port", str(port),
         "--num_workers", "1"],
        env={**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True"},
        stdout=subprocess.DEVNULL,
    )  # fmt: skip


def chatcli_proxy(
    base_url: str,
    port: int,
    workers: int = 1,
    profile: str | None = None,
    *,
    flags: Sequence[str] = ("--model", "stub"),
) -> Popen:
    """`chatcli proxy` in front of the server at `base_url` (the stub), recording nothing;
    `flags`: its model and window; under cProfile if `profile` (written when it stops on
    SIGINT)."""
    code = "from chatcli.__main__ import main; raise SystemExit(main())"
    if profile:  # CPU time, not wall time: a coroutine's waits are not its cost
        code = (
            "import cProfile, time\n"
            "from chatcli.__main__ import main\n"
            "profile = cProfile.Profile(time.process_time)\n"
            "try:\n    profile.runcall(main)\n"
            f"finally:\n    profile.dump_stats({profile!r})"
        )
    home = ROOT / ".bench-home"  # the proxy's CHATCLI_HOME
    home.mkdir(exist_ok=True)
    return spawn(
        [sys.executable, "-c", code, "proxy",
         "--provider", "openai-compatible", *flags, "--port", str(port),
         "--base-url", base_url, "--max-concurrency", "100000",
         "--no-sessions", "--workers", str(workers)],
        env={**os.environ, "CHATCLI_HOME": str(home)},
    )  # fmt: skip


def wait_listening(port: int, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.1)
    raise RuntimeError(f"nothing listening on {port}")


def settle(pids: list[int], limit: float = 15.0) -> None:
    """Waits (at most `limit` s) until these processes spend under 5% of a core: an
    overloaded server's backlog is not the next run's."""
    deadline = time.monotonic() + limit
    while time.monotonic() < deadline:
        before = cpu_seconds(pids)
        time.sleep(0.25)
        if cpu_seconds(pids) - before < 0.0125:
            return


# -- the first overflow in front of llama-server -----------------------------------------

OVERFLOW_WINDOW = 8_192  # llama-server's window (the tiny model serves it quickly)
OVERFLOW_MODEL = "chatcli-tiny"  # the alias it serves the tiny model under
OVERFLOW_PATHS = {
    "bare": "bare forwarder",
    "chatcli-declared": "chatcli, --context-window 8192",
    "chatcli-props": "chatcli, window from /props",
    "litellm": "LiteLLM, max_input_tokens 8192",
}
# llama-server's log lines (llama.cpp as vendored in llama-cpp-python 0.3.36): a chat request
# given a slot (a rejected one too), and one rejected for its size.
TASK_LINE = b"launch_slot_"
REJECTED_LINE = b"exceeds the available context size"


OVERFLOW_INTRO = (
    "\nFirst overflow: a conversation over the window, its first request, through each path "
    f"just started, in front of llama-server ({OVERFLOW_WINDOW:,}-token window, the tiny "
    "model); upstream calls and rejections by the server's log.\n"
)


@dataclass(frozen=True)
class FirstOverflow:
    """A conversation over the window sent once through a path just started: the upstream
    chat calls it made (by the server's log) and how the client was answered."""

    path: str
    messages: int
    tokens: int  # the conversation's prompt by the server's own template and tokenizer
    calls: int
    rejected: int
    status: int
    prompt_tokens: int | None  # the answer's (None: no answer)


def server_tokens(base_url: str, messages: list[dict[str, str]]) -> int:
    """The prompt tokens of `messages` by llama-server's chat template and tokenizer."""
    import httpx

    prompt = httpx.post(f"{base_url}/apply-template", json={"messages": messages}).json()
    counted = httpx.post(
        f"{base_url}/tokenize", json={"content": prompt["prompt"], "add_special": True}
    ).json()
    return len(counted["tokens"])


def overflow_server(path: str, base_url: str, args: argparse.Namespace) -> tuple[int, Popen]:
    """A first-overflow path's server in front of llama-server, started: its port and process."""
    port = free_port()
    if path == "bare":
        upstream = base_url.rpartition(":")[2]
        return port, spawn([sys.executable, __file__, "--bare-forwarder", str(port), upstream])
    if path == "litellm":
        return port, litellm_proxy(
            args.litellm, base_url + "/v1", port, model=OVERFLOW_MODEL, window=OVERFLOW_WINDOW
        )
    declared = ("--context-window", str(OVERFLOW_WINDOW)) if path == "chatcli-declared" else ()
    flags = ("--model", OVERFLOW_MODEL, *declared)
    return port, chatcli_proxy(base_url + "/v1", port, flags=flags)


def first_overflow(path: str, port: int, messages: int, base_url: str, log: Path) -> FirstOverflow:
    """One conversation of `messages` messages of its own sent whole through `path`."""
    import httpx

    chat = conversation(messages, number=1000 + messages)
    since = log.stat().st_size
    body = {"model": OVERFLOW_MODEL, "messages": chat, "max_tokens": 16}
    answer = httpx.post(f"http://127.0.0.1:{port}{PATH}", json=body, timeout=600)
    time.sleep(0.5)  # the server's log is written by a thread of its own
    written = log.read_bytes()[since:]
    usage = answer.json().get("usage") if answer.status_code == 200 else None
    return FirstOverflow(
        path=path,
        messages=messages,
        tokens=server_tokens(base_url, chat),
        calls=written.count(TASK_LINE),
        rejected=written.count(REJECTED_LINE),
        status=answer.status_code,
        prompt_tokens=usage["prompt_tokens"] if usage else None,
    )


def first_overflows(args: argparse.Namespace) -> list[FirstOverflow]:
    """Every first-overflow path on every conversation length, in front of one llama-server
    (nothing when it is not built: said on stderr)."""
    sys.path.insert(0, str(ROOT))  # when run as a script: benchmarks.recovery and tests
    from benchmarks.recovery import llama_server, llama_server_command

    launcher = llama_server_command()
    if launcher is None:
        print("first overflow: not run, xllamacpp is not installed", file=sys.stderr)
        return []
    log = ROOT / ".bench-home" / "llama-server.log"
    log.parent.mkdir(exist_ok=True)
    paths = [p for p in OVERFLOW_PATHS if p in args.overflow_paths.split(",")]
    out = []
    # `-lv 3`: llama-server's own log, whose lines count the calls and the rejections.
    with llama_server([*launcher, "-lv", "3"], OVERFLOW_WINDOW, log) as base_url:
        servers: dict[str, tuple[int, Popen]] = {}
        try:
            for path in paths:
                servers[path] = overflow_server(path, base_url, args)
            for port, _ in servers.values():
                wait_listening(port, 120.0)
            for messages in (int(x) for x in args.overflow_messages.split(",")):
                for path, (port, _) in servers.items():
                    out.append(first_overflow(path, port, messages, base_url, log))
        finally:
            stop(servers.values())
    return out


def overflow_table(results: Sequence[FirstOverflow]) -> list[str]:
    header = (
        "| messages | tokens (x window) | path | upstream calls | rejected | client got "
        "| answer's prompt tokens |"
    )
    lines = [header, "|" + "---|" * header.count(" | ") + "---|"]
    for r in results:
        got = "an answer" if r.status == 200 else f"HTTP {r.status}"
        cells = [
            str(r.messages), f"{r.tokens:,} ({r.tokens / OVERFLOW_WINDOW:.1f}x)",
            OVERFLOW_PATHS[r.path], str(r.calls), str(r.rejected), got,
            "-" if r.prompt_tokens is None else f"{r.prompt_tokens:,}",
        ]  # fmt: skip
        lines.append("| " + " | ".join(cells) + " |")
    return lines


def overflow_goal(results: Sequence[FirstOverflow]) -> str:
    """The goal's verdict: chatcli answers every first overflow with no rejected call."""
    ours = [r for r in results if r.path.startswith("chatcli")]
    met = bool(ours) and all(r.status == 200 and r.rejected == 0 for r in ours)
    return "- first overflow in front of llama-server answered with no rejected call: " + (
        "met" if met else "MISSED" if ours else "not run"
    )


def spawn(command: Sequence[str], **options: Any) -> Popen:
    """A server of the run, in a process group of its own, which `stop` ends whole: its
    worker processes too."""
    return subprocess.Popen(command, start_new_session=True, **options)


def stop(servers: Iterable[tuple[int, Popen]]) -> None:
    """Stop these servers: SIGINT (a clean stop, a profile written), then SIGKILL to what is
    left of each one's process group after STOP_S seconds (said on stderr); each one reaped.
    A server left running would hold this run's stdout and stderr open after it ends, and a
    caller reading them to their end would wait for ever."""
    processes = [process for _, process in servers]
    for process in processes:
        process.send_signal(signal.SIGINT)
    deadline = time.monotonic() + STOP_S
    for process in processes:
        try:
            process.wait(max(0.0, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            print(
                f"not stopped by SIGINT in {STOP_S:.0f} s, killed: {process.args!r}",
                file=sys.stderr,
            )
        with contextlib.suppress(ProcessLookupError):  # none left: the usual case
            os.killpg(process.pid, signal.SIGKILL)
        process.wait()


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--streams", default="20,50,200", help="loads: answers in flight")
    parser.add_argument("--messages", default="100,2000", help="conversation lengths")
    parser.add_argument("--paths", default=",".join(PATHS), help="paths measured")
    parser.add_argument("--litellm", default=str(LITELLM), help="LiteLLM's `litellm` command")
    parser.add_argument("--warm-up", type=float, default=3.0, help="seconds not measured")
    parser.add_argument("--window", type=float, default=12.0, help="seconds measured")
    parser.add_argument("--token-rate", type=float, default=50.0, help="the stub's tokens/s")
    parser.add_argument("--answer-tokens", type=int, default=150, help="tokens per answer")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--profile", help="run chatcli's 1-worker proxy under cProfile")
    parser.add_argument(
        "--overflow-messages", default="40,75,150", help="first-overflow conversation lengths"
    )
    parser.add_argument(
        "--overflow-paths", default=",".join(OVERFLOW_PATHS), help="first-overflow paths"
    )
    parser.add_argument("--stub", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--bare-forwarder", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    unknown = set(args.paths.split(",")) - set(PATHS)
    if unknown:
        parser.error(f"unknown paths {sorted(unknown)}; known: {', '.join(PATHS)}")
    unknown = set(args.overflow_paths.split(",")) - set(OVERFLOW_PATHS)
    if unknown:
        parser.error(
            f"unknown overflow paths {sorted(unknown)}; known: {', '.join(OVERFLOW_PATHS)}"
        )
    serving = args.stub or args.bare_forwarder  # one server of the run: no anchor needed
    anchored = (args.messages and "litellm" in args.paths.split(",")) or (
        args.overflow_messages and "litellm" in args.overflow_paths.split(",")
    )
    if not serving and anchored and not Path(args.litellm).exists():
        parser.error(
            f"no LiteLLM at {args.litellm}: run benchmarks/install-litellm-proxy.sh, "
            "or leave litellm out of --paths and --overflow-paths"
        )
    return args


def start(path: str, stub_port: int, args: argparse.Namespace) -> tuple[int, Popen]:
    """A load path's server in front of the stub (the stub itself for "direct"), started: its
    port and its process."""
    if path == "direct":
        return stub_port, spawn(
            [sys.executable, __file__, "--stub", str(stub_port), "--answer-tokens",
             str(args.answer_tokens), "--token-rate", str(args.token_rate)]
        )  # fmt: skip
    port = free_port()
    stub = f"http://127.0.0.1:{stub_port}/v1"
    if path == "bare":
        return port, spawn(
            [sys.executable, __file__, "--bare-forwarder", str(port), str(stub_port)]
        )
    if path == "litellm":
        return port, litellm_proxy(args.litellm, stub, port)
    workers = int(path.rpartition("-")[2])
    return port, chatcli_proxy(stub, port, workers, args.profile if workers == 1 else None)


def loads(args: argparse.Namespace) -> list[Row]:
    """Every load path at every load (`--messages`, `--streams`): the table's rows."""
    paths = [p for p in PATHS if p in args.paths.split(",")]
    stub_port = free_port()
    servers: dict[str, tuple[int, Popen]] = {}  # the stub as "direct", whether measured or not
    try:
        for path in ["direct", *(p for p in paths if p != "direct")]:
            servers[path] = start(path, stub_port, args)
        for port, _ in servers.values():
            wait_listening(port, 120.0)  # LiteLLM takes its time
        time.sleep(2.0)  # the workers of `--workers 2`
        ports = {p: port for p, (port, _) in servers.items()}
        processes = {p: process for p, (_, process) in servers.items()}
        duration = args.answer_tokens / args.token_rate
        span = args.warm_up + args.window
        print(f"Answers of {args.answer_tokens} tokens at {args.token_rate:.0f} tokens/s "
              f"({duration:.1f} s); Poisson arrivals (seed {args.seed}), {args.warm_up:.0f} s "
              f"not measured, then {args.window:.0f} s measured; one distinct conversation per "
              f"stream. Machine: {os.cpu_count()} cores, load average "
              f"{os.getloadavg()[0]:.1f} before.\n")  # fmt: skip
        all_rows: list[Row] = []
        for messages in (int(x) for x in args.messages.split(",")):
            for streams in (int(x) for x in args.streams.split(",")):
                schedule = arrivals(streams / duration, span, args.seed)
                bound = (max(100, IN_FLIGHT_PER_STREAM * streams), duration + DRAIN_S)
                runs, bodies = {}, payloads(messages, streams)
                for path in paths:
                    pids = tree(processes[path].pid)
                    load = steady(ports[path], bodies, schedule, (args.warm_up, span), pids, bound)
                    runs[path] = uvloop.run(load)
                    settle([pid for p in processes.values() for pid in tree(p.pid)])
                all_rows += rows(messages, streams, runs)
                print("\n".join(table(all_rows)[-len(runs) :]), file=sys.stderr)  # progress
        return all_rows
    finally:
        stop(servers.values())


def main(argv: Sequence[str] | None = None) -> None:
    args = parse_args(argv)
    if args.stub:
        run_stub(args.stub, args.answer_tokens, args.token_rate)
        return
    if args.bare_forwarder:
        run_bare(*args.bare_forwarder)
        return
    all_rows = loads(args) if args.messages else []
    overflows = first_overflows(args) if args.overflow_messages else []
    if all_rows:
        print("\n".join(table(all_rows)))
    if overflows:
        print(OVERFLOW_INTRO)
        print("\n".join(overflow_table(overflows)))
    print(f"\nGoals (load average {os.getloadavg()[0]:.1f} after):")
    print("\n".join([*goals(all_rows), *([overflow_goal(overflows)] if overflows else [])]))


if __name__ == "__main__":
    main()

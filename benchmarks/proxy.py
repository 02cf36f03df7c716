"""The proxy's added latency under bounded loopback load.

Three processes on 127.0.0.1: an upstream stub that streams an OpenAI chat answer at a fixed
token rate, `chatcli proxy` in front of it, and this script, which runs N concurrent streaming
clients against the stub directly and then through the proxy, with the same conversations
(real text: this repository's README, cut into messages). It prints, for each conversation
length, the p50/p99 time to first token and to the whole answer, direct and through the
proxy, the difference (the proxy's added latency), requests per second, and the proxy's
peak memory (RSS). The proxy runs with `--no-sessions`: what recording each request in the
session store adds is benchmarks/proxy_store.py's measure.

    python benchmarks/proxy.py [--clients 200] [--requests 400] [--messages 100,2000]
                               [--workers N] [--no-fast-path] [--profile proxy.prof]
    python benchmarks/proxy.py --breakdown [--messages 100,2000]

`--workers N` runs `chatcli proxy --workers N` (requests/s per worker is printed);
`--no-fast-path` sends every request through the library's path (`chatcli.proxy.passthrough`
is the fast path), to compare the two on the same machine. The load average is printed with
each run: the machine's other work shows in every latency here, the stub's included.

`--breakdown` times, in process, the proxy's own work per request (decoding, parsing, the
Client, the fast path's verdict, the forwarded body): what the fast path still pays.
`--profile FILE` runs the proxy under cProfile and writes its profile to FILE (read it with
`python -m pstats FILE`): where the proxy's CPU goes.

Bounded: `--requests` per run (default 2x clients), a 120 s deadline per run, loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
TOKENS = 20  # tokens per streamed answer
TOKEN_DELAY = 0.005  # seconds between tokens (200 tokens/s per stream)
DEADLINE_S = 120.0


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def run_stub(port: int) -> None:
    """The upstream: streams TOKENS chunks, TOKEN_DELAY apart, in OpenAI's chunk shape."""
    import uvicorn
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import StreamingResponse
    from starlette.routing import Route

    async def completions(request: Request) -> StreamingResponse:
        body = await request.json()
        prompt = sum(len(str(m.get("content") or "")) for m in body["messages"]) // 4

        async def events():  # type: ignore[no-untyped-def]
            head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stub"}
            for i in range(TOKENS):
                await asyncio.sleep(TOKEN_DELAY)
                delta = {"index": 0, "delta": {"content": f"t{i} "}, "finish_reason": None}
                yield f"data: {json.dumps({**head, 'choices': [delta]})}\n\n"
            done = {"index": 0, "delta": {}, "finish_reason": "stop"}
            yield f"data: {json.dumps({**head, 'choices': [done]})}\n\n"
            usage = {
                "prompt_tokens": prompt,
                "completion_tokens": TOKENS,
                "total_tokens": prompt + TOKENS,
            }
            yield f"data: {json.dumps({**head, 'choices': [], 'usage': usage})}\n\n"
            yield "data: [DONE]\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    app = Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"])])
    uvicorn.run(app, host="127.0.0.1", port=port, log_level="warning", backlog=4096)


def conversation(n: int) -> list[dict[str, str]]:
    words = (ROOT / "README.md").read_text().split()
    size = 60
    out = [{"role": "system", "content": "You are a helpful assistant."}]
    for i in range(n - 1):
        chunk = " ".join(words[(i * size) % (len(words) - size) :][:size])
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": chunk})
    if out[-1]["role"] != "user":
        out.append({"role": "user", "content": "Go on."})
    return out


async def one(client: httpx.AsyncClient, url: str, body: dict[str, object]) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    async with client.stream("POST", url, json=body) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {(await response.aread())[:300]!r}")
        async for line in response.aiter_lines():
            if first is None and '"content"' in line and '"t0' in line:
                first = time.perf_counter() - started
    return first if first is not None else float("nan"), time.perf_counter() - started


async def load(
    url: str, messages: int, clients: int, requests: int
) -> tuple[list[float], list[float], float, int]:
    body = {"model": "stub", "messages": conversation(messages), "stream": True, "max_tokens": 64}
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    gate = asyncio.Semaphore(clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        await one(client, url, body)  # warm-up

        async def bounded() -> tuple[float, float] | None:
            async with gate:
                try:
                    return await one(client, url, body)
                except (httpx.HTTPError, RuntimeError) as exc:  # counted and reported
                    print(f"  failed: {type(exc).__name__}: {str(exc)[:120]}", file=sys.stderr)
                    return None

        started = time.perf_counter()
        results = await asyncio.wait_for(
            asyncio.gather(*(bounded() for _ in range(requests))), DEADLINE_S
        )
        elapsed = time.perf_counter() - started
    done = [r for r in results if r is not None]
    failed = len(results) - len(done)
    return [r[0] for r in done], [r[1] for r in done], len(done) / elapsed, failed


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


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of process `pid` and its descendants so far (robust to a busy
    machine)."""
    total = 0
    for each in tree(pid):
        try:
            fields = Path(f"/proc/{each}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])
    return total / os.sysconf("SC_CLK_TCK")


def rss_kib(pid: int) -> int:
    """Peak RSS of `pid`'s worker processes, summed (itself when it has none)."""
    total = 0
    for each in tree(pid)[1:] or [pid]:
        for line in Path(f"/proc/{each}/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                total += int(line.split()[1])
    return total


def breakdown(sizes: list[int]) -> None:
    """The proxy's own work per request, in process (CPU time, mean of several): decoding the
    body, parsing its messages, building the library's Client, the fast path's verdict (the
    library's first request: `Client.start_stream`) and the body it forwards."""
    from chatcli.config import MicrocompactConfig, RecoveryConfig
    from chatcli.proxy.openai_dialect import OpenAIDialect
    from chatcli.proxy.passthrough import first_unchanged, forwarded_body, passthrough_of
    from chatcli.proxy.upstream import Forwarder, open_upstream, plan
    from chatcli.recovery import Client
    from chatcli.settings import load_settings

    env = {"CHATCLI_HOME": str(ROOT / ".bench-home")}
    flags = {"provider": "openai-compatible", "model": "stub", "base_url": "http://127.0.0.1:9/v1"}
    upstream = open_upstream(load_settings(flags, env), env)
    dialect = OpenAIDialect()
    print("\nthe proxy's own work per request (in process, no HTTP):")
    for n in sizes:
        body = {"model": "stub", "messages": conversation(n), "stream": True, "max_tokens": 64}
        raw = json.dumps(body).encode()
        rounds = max(5, 20_000 // n)
        spent: dict[str, float] = {}
        timed = functools.partial(_spent, spent)
        for _ in range(rounds):
            started = time.process_time()
            decoded = json.loads(raw)
            timed("decode", started)
            started = time.process_time()
            parsed = dialect.parse(decoded)
            timed("parse", started)
            started = time.process_time()
            forwarder = Forwarder(upstream, parsed, plan(parsed, upstream.dialect))
            library = Client(
                forwarder, RecoveryConfig(), max_retries=0, microcompact=MicrocompactConfig()
            )
            timed("client", started)
            started = time.process_time()
            start = library.start_stream(parsed.messages, max_tokens=64, tools=parsed.tools)
            first = first_unchanged(start, parsed, 64)
            timed("verdict", started)
            provider = passthrough_of(upstream, parsed)
            assert first is not None and provider is not None  # the fast path takes it
            started = time.process_time()
            forwarded_body(raw, decoded, provider.passthrough_fields(first, decoded))
            timed("body", started)
        steps = ", ".join(f"{k} {v / rounds * 1000:.2f}" for k, v in spent.items())
        print(f"  {n} messages, ms: {steps}")


def _spent(totals: dict[str, float], step: str, started: float) -> None:
    totals[step] = totals.get(step, 0.0) + time.process_time() - started


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
    parser.add_argument("--clients", type=int, default=200)
    parser.add_argument("--requests", type=int)
    parser.add_argument("--messages", default="100,2000")
    parser.add_argument("--workers", type=int, default=1, help="proxy worker processes")
    parser.add_argument("--no-fast-path", action="store_true", help="the library's path only")
    parser.add_argument("--profile", help="run the proxy under cProfile, writing its profile here")
    parser.add_argument(
        "--breakdown", action="store_true", help="only the proxy's own work, in process"
    )
    parser.add_argument("--stub", type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.stub:
        run_stub(args.stub)
        return
    if args.breakdown:
        breakdown([int(x) for x in args.messages.split(",")])
        return
    requests = args.requests or 2 * args.clients
    stub_port, proxy_port = free_port(), free_port()
    env = {**os.environ, "CHATCLI_HOME": str(ROOT / ".bench-home")}
    stub = subprocess.Popen([sys.executable, __file__, "--stub", str(stub_port)])
    code = "from chatcli.cli import main; raise SystemExit(main())"
    if args.profile:  # written when the proxy stops on SIGINT (see the end)
        code = f"import cProfile, chatcli.cli; cProfile.run('chatcli.cli.main()', {args.profile!r})"
    proxy = subprocess.Popen(
        [sys.executable, "-c", code, "proxy",
         "--provider", "openai-compatible", "--model", "stub", "--port", str(proxy_port),
         "--base-url", f"http://127.0.0.1:{stub_port}/v1", "--max-concurrency", str(requests),
         "--no-sessions", "--workers", str(args.workers),
         *(["--no-fast-path"] if args.no_fast_path else [])],
        env=env,
    )  # fmt: skip
    try:
        wait_listening(stub_port)
        wait_listening(proxy_port)
        path = "library path only" if args.no_fast_path else "fast path on"
        print(f"{args.clients} concurrent streaming clients, {requests} requests per run, "
              f"{TOKENS} tokens at {1 / TOKEN_DELAY:.0f} tokens/s per answer; proxy: "
              f"{args.workers} worker(s), {path}")  # fmt: skip
        for n in (int(x) for x in args.messages.split(",")):
            runs, cpu_ms = {}, {}
            for name, port, pid in (
                ("direct", stub_port, stub.pid),
                ("proxy", proxy_port, proxy.pid),
            ):
                url = f"http://127.0.0.1:{port}/v1/chat/completions"
                cpu = cpu_seconds(pid)
                runs[name] = asyncio.run(load(url, n, args.clients, requests))
                cpu_ms[name] = (cpu_seconds(pid) - cpu) * 1000 / (requests + 1)
            (df, dt, drps, dfail), (pf, pt, prps, pfail) = runs["direct"], runs["proxy"]
            print(f"\n{n} messages (load average {os.getloadavg()[0]:.1f}):")
            for label, d, p in (("first token", df, pf), ("whole answer", dt, pt)):
                print(f"  {label:13} direct p50 {pct(d, .5):7.1f} ms p99 {pct(d, .99):7.1f} ms | "
                      f"proxy p50 {pct(p, .5):7.1f} ms p99 {pct(p, .99):7.1f} ms | added p50 "
                      f"{pct(p, .5) - pct(d, .5):+7.1f} ms "
                      f"p99 {pct(p, .99) - pct(d, .99):+7.1f} ms")  # fmt: skip
            print(
                f"  requests/s: direct {drps:.0f}, proxy {prps:.0f} "
                f"({prps / args.workers:.0f} per worker); failed: direct {dfail}, "
                f"proxy {pfail}"
            )
            print(f"  CPU per request: proxy {cpu_ms['proxy']:.1f} ms (the stub, which only "
                  f"writes the answer: {cpu_ms['direct']:.1f} ms)")  # fmt: skip
        print(f"\nproxy peak RSS: {rss_kib(proxy.pid) / 1024:.0f} MiB")
    finally:
        proxy.send_signal(signal.SIGINT)  # a clean stop: the profile is written
        stub.terminate()
        for process in (proxy, stub):
            process.wait(30)


if __name__ == "__main__":
    main()

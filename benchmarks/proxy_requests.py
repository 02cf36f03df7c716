"""The proxy's CPU per request, through its ASGI app in process: before the first byte, and
for the whole request.

The app (`chatcli.proxy.app.create_app`, fast path on, no session store: as
`benchmarks/proxy.py` runs `chatcli proxy --no-sessions`) is called directly, one request at
a time, with the ASGI messages uvicorn would give it: no HTTP server, no client, only the
proxy's own work (Starlette's routing, the body, the parse, the library's verdict, the
forwarded request over httpx to the upstream, the answer) and the event loop's. The upstream
is `benchmarks/proxy.py`'s stub in its own process, streaming `--answer-tokens` tokens at
`--token-rate` tokens/s (by default 3 at 500/s: the first comes alone, so the answer takes
the fast path's piped stream, as a real one does). The stub's CPU is not this process's, so
`time.process_time()` from the call to the app to its first body bytes is the request's
work before its first byte; to the app's return, the whole request's.

    python benchmarks/proxy_requests.py [--messages 100,2000] [--requests 400]
        [--conversations 1] [--profile F]

Prints, per conversation length, the median and the 90th percentile of each figure over
`--requests` requests (after 50 not measured, and each conversation's first). The requests
take `--conversations` distinct conversations in turn (benchmarks/proxy.py's steady state
has 200: one per stream), each asking again, as in that benchmark. `--profile F` runs one
more round of each under cProfile and writes it to F (the last length's; `python -m pstats
F`).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import multiprocessing
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import uvloop

sys.path.insert(0, str(Path(__file__).resolve().parent))
from proxy import ROOT, conversation, free_port, run_stub, wait_listening
from starlette.applications import Starlette

from chatcli.chat.settings import load_settings
from chatcli.proxy.app import ProxyOptions, create_app
from chatcli.proxy.guard import Guard
from chatcli.proxy.upstream import open_upstream

WARM_UP = 50
App = Callable[[dict[str, Any], Any, Any], Awaitable[None]]


def proxy_app(port: int) -> Starlette:
    """The app `chatcli proxy --no-sessions` serves in front of the stub at `port`."""
    env = {"CHATCLI_HOME": str(ROOT / ".bench-home")}
    flags = {
        "provider": "openai-compatible",
        "model": "stub",
        "base_url": f"http://127.0.0.1:{port}/v1",
    }
    upstream = open_upstream(load_settings(flags, env), env)
    guard = Guard((), host="127.0.0.1", max_concurrency=64)
    return create_app(upstream, guard, ProxyOptions(sessions=None))


async def one(app: App, body: bytes) -> tuple[float, float]:
    """One request's CPU (seconds): to its first body bytes, and to its end."""
    headers = [
        (b"host", b"127.0.0.1:8787"),
        (b"content-type", b"application/json"),
        (b"content-length", str(len(body)).encode()),
    ]
    scope = {
        "type": "http",
        "asgi": {"version": "3.0", "spec_version": "2.3"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/chat/completions",
        "raw_path": b"/v1/chat/completions",
        "root_path": "",
        "query_string": b"",
        "headers": headers,
        "client": ("127.0.0.1", 50000),
        "server": ("127.0.0.1", 8787),
        "state": {},
    }
    done = asyncio.Event()
    unread = [{"type": "http.request", "body": body, "more_body": False}]
    first: list[float] = []
    status: list[int] = []

    async def receive() -> dict[str, Any]:
        if unread:
            return unread.pop()
        await done.wait()
        return {"type": "http.disconnect"}

    async def send(message: dict[str, Any]) -> None:
        if message["type"] == "http.response.start":
            status.append(message["status"])
        elif message.get("body") and not first:
            first.append(time.process_time())

    started = time.process_time()
    await app(scope, receive, send)
    ended = time.process_time()
    done.set()
    if status != [200] or not first:
        raise RuntimeError(f"the proxy answered {status}")
    return first[0] - started, ended - started


async def measure(app: App, body: bytes, requests: int) -> list[tuple[float, float]]:
    return await in_turn(app, [body], requests)


async def in_turn(app: App, bodies: list[bytes], requests: int) -> list[tuple[float, float]]:
    """`requests` requests measured, the i-th of `bodies` i modulo their number, after each
    body was sent once and `WARM_UP` more were (the conversations' first requests, cold, not
    measured)."""
    for i in range(WARM_UP + len(bodies)):
        await one(app, bodies[i % len(bodies)])
    return [await one(app, bodies[i % len(bodies)]) for i in range(requests)]


async def rounds(
    app: Starlette, sizes: list[int], requests: int, conversations: int, profile: str | None
) -> None:
    """Print each conversation length's figures, inside the app's lifespan (which closes
    the upstream's connections at its end)."""
    async with app.router.lifespan_context(app):
        for n in sizes:
            bodies = [body_of(n, number) for number in range(conversations)]
            timings = await in_turn(app, bodies, requests)
            before = summary("before the first byte", [t[0] for t in timings])
            whole = summary("whole request", [t[1] for t in timings])
            print(f"  {n} messages: {before}; {whole}")
            if profile:
                profiler = cProfile.Profile()
                profiler.enable()
                await in_turn(app, bodies, requests)
                profiler.disable()
                profiler.dump_stats(profile)


def body_of(n: int, number: int) -> bytes:
    """A request of conversation `number` of `n` messages (0: `conversation(n)`'s own, as
    the runs of one conversation send)."""
    chat = conversation(n, number or None)
    return json.dumps(
        {"model": "stub", "messages": chat, "stream": True, "max_tokens": 64}
    ).encode()


def summary(label: str, seconds: list[float]) -> str:
    ms = sorted(s * 1000 for s in seconds)
    return f"{label} p50 {statistics.median(ms):.3f} ms p90 {ms[int(len(ms) * 0.9)]:.3f} ms"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--messages", default="100,2000")
    parser.add_argument("--requests", type=int, default=400)
    parser.add_argument("--answer-tokens", type=int, default=3)
    parser.add_argument("--token-rate", type=float, default=500.0)
    parser.add_argument(
        "--conversations",
        type=int,
        default=1,
        help="distinct conversations the requests take turns at (benchmarks/proxy.py's: 200)",
    )
    parser.add_argument("--profile", help="write a cProfile of one more round here")
    args = parser.parse_args()
    port = free_port()
    stub = multiprocessing.Process(
        target=run_stub, args=(port, args.answer_tokens, args.token_rate), daemon=True
    )
    stub.start()
    wait_listening(port)
    try:
        print("the proxy's CPU per request, through its ASGI app in process (median, p90):")
        sizes = [int(x) for x in args.messages.split(",")]
        app = proxy_app(port)
        uvloop.run(rounds(app, sizes, args.requests, args.conversations, args.profile))
    finally:
        stub.terminate()
        stub.join()


if __name__ == "__main__":
    main()

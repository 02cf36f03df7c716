"""What recording proxy traffic in the session store adds to each request's latency.

An upstream stub streaming an OpenAI answer at a fixed token rate (benchmarks/proxy.py's),
then `chatcli proxy` in front of it three times, side by side: with `--no-sessions` (the
anchor), recording into SQLite (the default store), and into PostgreSQL (a throwaway server
started with Debian's postgresql-15 binaries, as the tests do; skipped without them). Each run
sends the same 100-message conversations of real text (this repository's README) from N
concurrent streaming clients, each request its own conversation (`x-chatcli-session`), so each
record appends 101 messages and a request with its view: the worst case for a writer, since a
conversation that continues appends only its new turn and answer. It prints the p50/p99 time
to the first token and to the whole answer (which now waits for the record's commit), and
what each store adds to the anchor, and the proxy process's CPU time per request (user +
system: on a busy machine the latencies are mostly waiting for a core; the CPU is not).

    python benchmarks/proxy_store.py [--clients 20] [--requests 200] [--messages 100]

Bounded: `--requests` per run, a 120 s deadline per run, loopback only.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from benchmarks.proxy import (  # noqa: E402
    DEADLINE_S,
    conversation,
    cpu_seconds,
    free_port,
    pct,
    wait_listening,
)


async def one(
    client: httpx.AsyncClient, url: str, body: object, session: str
) -> tuple[float, float]:
    started = time.perf_counter()
    first = None
    headers = {"x-chatcli-session": session}
    async with client.stream("POST", url, json=body, headers=headers) as response:
        if response.status_code != 200:
            raise RuntimeError(f"{response.status_code}: {(await response.aread())[:300]!r}")
        async for line in response.aiter_lines():
            if first is None and '"t0' in line:
                first = time.perf_counter() - started
    return first if first is not None else float("nan"), time.perf_counter() - started


async def load(
    url: str, run: str, messages: int, clients: int, requests: int
) -> tuple[list[float], list[float]]:
    body = {"model": "stub", "messages": conversation(messages), "stream": True, "max_tokens": 64}
    gate = asyncio.Semaphore(clients)
    limits = httpx.Limits(max_connections=clients, max_keepalive_connections=clients)
    async with httpx.AsyncClient(limits=limits, timeout=60) as client:
        await one(client, url, body, f"{run}-warm")

        async def bounded(i: int) -> tuple[float, float]:
            async with gate:
                return await one(client, url, body, f"{run}-{i}")

        results = await asyncio.wait_for(
            asyncio.gather(*(bounded(i) for i in range(requests))), DEADLINE_S
        )
    return [r[0] for r in results], [r[1] for r in results]


@contextmanager
def proxy(stub_port: int, env: Mapping[str, str], *flags: str) -> Iterator[tuple[str, int]]:
    """A `chatcli proxy` process in front of the stub: its URL and pid."""
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, "-m", "chatcli", "proxy",
         "--provider", "openai-compatible", "--model", "stub", "--port", str(port),
         "--base-url", f"http://127.0.0.1:{stub_port}/v1", "--max-concurrency", "10000", *flags],
        env={**os.environ, **env},
    )  # fmt: skip
    try:
        wait_listening(port)
        yield f"http://127.0.0.1:{port}/v1/chat/completions", process.pid
    finally:
        process.terminate()
        process.wait(30)


def stores(stack: ExitStack, home: Path) -> Iterator[tuple[str, dict[str, str], tuple[str, ...]]]:
    yield "no store", {"CHATCLI_HOME": str(home / "none")}, ("--no-sessions",)
    yield "SQLite", {"CHATCLI_HOME": str(home / "sqlite")}, ()
    from tests.postgres import create_database, running_postgres

    try:
        server = stack.enter_context(running_postgres())
    except FileNotFoundError as exc:
        print(f"(PostgreSQL skipped: {exc})")
        return
    url = create_database(server)
    yield "PostgreSQL", {"CHATCLI_HOME": str(home / "pg"), "CHATCLI_DATABASE_URL": url}, ()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=20)
    parser.add_argument("--requests", type=int, default=200)
    parser.add_argument("--messages", type=int, default=100)
    args = parser.parse_args()
    stub_port = free_port()
    stub = subprocess.Popen(
        [sys.executable, str(ROOT / "benchmarks" / "proxy.py"), "--stub", str(stub_port)]
    )
    print(f"{args.clients} concurrent streaming clients, {args.requests} requests per run, "
          f"{args.messages}-message conversations, each request a new session")  # fmt: skip
    try:
        wait_listening(stub_port)
        anchor: tuple[list[float], list[float]] | None = None
        with tempfile.TemporaryDirectory() as home, ExitStack() as stack:
            for name, env, flags in stores(stack, Path(home)):
                with proxy(stub_port, env, *flags) as (url, pid):
                    cpu = cpu_seconds(pid)
                    first, whole = asyncio.run(
                        load(url, name.replace(" ", ""), args.messages, args.clients, args.requests)
                    )
                    cpu_ms = (cpu_seconds(pid) - cpu) * 1000 / (args.requests + 1)
                anchor = anchor or (first, whole)
                line = [f"{name:>10}:"]
                for label, values, base in (
                    ("first token", first, anchor[0]),
                    ("whole answer", whole, anchor[1]),
                ):
                    p50, p99 = pct(values, 0.5), pct(values, 0.99)
                    added = p50 - pct(base, 0.5), p99 - pct(base, 0.99)
                    line.append(
                        f"{label} p50 {p50:6.1f} ms p99 {p99:6.1f} ms"
                        f" (added p50 {added[0]:+5.1f} p99 {added[1]:+5.1f})"
                    )
                line.append(f"proxy CPU per request {cpu_ms:.1f} ms")
                print(" | ".join(line))
    finally:
        stub.terminate()
        stub.wait(10)


if __name__ == "__main__":
    main()

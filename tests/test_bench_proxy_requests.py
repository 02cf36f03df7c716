"""`benchmarks/proxy_requests.py` times real requests through the proxy's app: each one is
answered 200 by the stub's stream, and its CPU before the first byte is part of its whole."""

from __future__ import annotations

import json
import multiprocessing

import uvloop
from benchmarks.proxy import conversation, free_port, run_stub, wait_listening
from benchmarks.proxy_requests import measure, proxy_app


async def timed(port: int, body: bytes) -> list[tuple[float, float]]:
    app = proxy_app(port)
    async with app.router.lifespan_context(app):
        return await measure(app, body, 5)


def test_each_request_is_answered_and_timed() -> None:
    port = free_port()
    stub = multiprocessing.Process(target=run_stub, args=(port, 3, 500.0), daemon=True)
    stub.start()
    try:
        wait_listening(port)
        body = json.dumps({"messages": conversation(10), "stream": True}).encode()
        timings = uvloop.run(timed(port, body))
    finally:
        stub.terminate()
        stub.join()
    assert len(timings) == 5
    assert all(0 < before <= whole for before, whole in timings)

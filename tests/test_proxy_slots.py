"""A key's concurrency slots all come back, however its clients leave: a client that gives up
before the answer starts (while the upstream has not sent its first token) and one that
closes the stream mid-answer, many times, against the real app under uvicorn (served as
`chatcli proxy` serves it) in front of an upstream that streams a recorded answer slowly.

The slot of a streamed answer is released in the `finally` of its body's generator
(`Proxy.released`). The worry was a client gone before Starlette starts iterating the body:
the generator would never start, so never run its `finally`. It does not happen here: uvicorn
(ASGI spec 2.3) makes Starlette race the body against `http.disconnect`, and the body's task
is started, and its generator entered, before the disconnect cancels it (anyio cancels only
started tasks; uvicorn's `send` returns at once once the client is gone)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor

import httpx
import pytest

from chatcli.proxy.guard import Guard
from tests.proxy_harness import running_proxy, upstream_at
from tests.recorded import sse_events
from tests.replay import ReplayServer, Scripted, replay_server

SLOTS = 4
ROUNDS = 12  # of each way of leaving: three times the key's slots
PAUSE_S = 0.03  # before each of the recorded stream's events
BODY = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


def slow_answer() -> Scripted:
    events = [data for _, data in sse_events("openai-chat-text.txt")]
    return Scripted(events=events, event_pause=PAUSE_S)


def leave_before_the_answer(url: str) -> None:
    """Post, then give up before the first byte of the answer (the upstream's first event
    comes after PAUSE_S): httpx closes the connection on the timeout."""
    with pytest.raises(httpx.ReadTimeout):
        httpx.post(url + "/v1/chat/completions", json=BODY, timeout=PAUSE_S / 3)


def leave_mid_answer(url: str) -> None:
    """Read the answer's first bytes, then close the connection."""
    with (
        httpx.Client(timeout=10) as client,
        client.stream("POST", url + "/v1/chat/completions", json=BODY) as response,
    ):
        assert response.status_code == 200
        next(response.iter_raw())


def wait_until_free(guard: Guard, seconds: float) -> int:
    """The slots still held after up to `seconds` (the answers the clients left run out)."""
    deadline = time.monotonic() + seconds
    while guard.in_flight("") and time.monotonic() < deadline:
        time.sleep(0.05)
    return guard.in_flight("")


@pytest.mark.parametrize("leave", [leave_before_the_answer, leave_mid_answer])
def test_every_slot_is_free_again_after_clients_leave(
    upstream: ReplayServer, leave: Callable[[str], None]
) -> None:
    guard = Guard((), host="127.0.0.1", max_concurrency=SLOTS)
    up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=32_000)
    upstream.add(*(slow_answer() for _ in range(ROUNDS)))
    with running_proxy(up, guard=guard) as url:
        for _ in range(ROUNDS):
            leave(url)
        held = wait_until_free(guard, 60 * PAUSE_S + 5)
        assert held == 0, f"{held} of {SLOTS} slots leaked"
        upstream.add(*(slow_answer() for _ in range(SLOTS)))
        with ThreadPoolExecutor(SLOTS) as pool:  # the key's whole limit at once is served
            answers = list(pool.map(lambda _: post(url), range(SLOTS)))
    assert answers == [200] * SLOTS


def post(url: str) -> int:
    return httpx.post(url + "/v1/chat/completions", json=BODY, timeout=30).status_code

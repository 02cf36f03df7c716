"""The proxy benchmark's parts that decide its figures: the arrival schedule, and the stub and
clients that time each answer.

The benchmark itself is not run here (a minute of both cores); these keep its clock honest:
the same seed must give the same Poisson schedule at the rate asked, and an answer's times,
end to end and with the stub's own time taken out, must agree with the stub's fixed token
schedule.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import re
import statistics
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from benchmarks.proxy import (
    Pool,
    Timing,
    arrivals,
    bare_cost,
    burn,
    free_port,
    payloads,
    wait_listening,
)

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "proxy.py"
TOKENS, RATE = 10, 100.0  # the i-th token 10 ms x (i + 1) after the request arrives
TICK = 0.002  # uvloop's timers have a resolution of 1 ms: a token may leave that much early


def test_arrivals_are_the_seeds_poisson_schedule() -> None:
    schedule = arrivals(rate=50.0, until=200.0, seed=7)
    assert schedule == arrivals(rate=50.0, until=200.0, seed=7)
    assert schedule != arrivals(rate=50.0, until=200.0, seed=8)
    assert schedule == sorted(schedule) and schedule[0] > 0 and schedule[-1] < 200.0
    gaps = [b - a for a, b in itertools.pairwise(schedule)]
    assert len(schedule) == pytest.approx(50.0 * 200.0, rel=0.05)
    # Exponential gaps: the mean and the standard deviation are both 1/rate.
    assert statistics.fmean(gaps) == pytest.approx(1 / 50.0, rel=0.05)
    assert statistics.pstdev(gaps) == pytest.approx(1 / 50.0, rel=0.05)


@pytest.fixture(scope="module")
def stub() -> Iterator[int]:
    port = free_port()
    process = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--stub", str(port), "--answer-tokens", str(TOKENS),
         "--token-rate", str(RATE)]
    )  # fmt: skip
    try:
        wait_listening(port)
        yield port
    finally:
        process.terminate()
        process.wait(10)


def timed(port: int, requests: int) -> list[Timing]:
    async def run() -> list[Timing]:
        pool = Pool(port)
        try:
            return [await pool.request(payloads(port, 5, 1)[0]) for _ in range(requests)]
        finally:
            pool.close()

    return asyncio.run(run())


def test_an_answer_is_timed_on_the_stubs_schedule(stub: int) -> None:
    for timing in timed(stub, 3):  # one keep-alive connection, reused
        assert 1 / RATE - TICK <= timing.first < timing.whole
        assert TOKENS / RATE - TICK <= timing.whole < TOKENS / RATE + 0.5
        # Outside the stub: loopback and the clients' own work, far below a token's interval.
        assert 0 <= timing.first_outside < timing.first - 0.5 / RATE
        assert timing.first_outside == pytest.approx(timing.to_stub_outside + timing.back_outside)
        assert timing.to_stub_outside > 0 and timing.back_outside > 0
        assert 0 <= timing.whole_outside < timing.whole - (TOKENS - 1) / RATE


def test_a_request_the_stub_does_not_serve_fails(stub: int) -> None:
    async def run() -> None:
        pool = Pool(stub)
        wrong = payloads(stub, 5, 1)[0].replace(b"/v1/chat/completions", b"/v1/completions", 1)
        with pytest.raises(RuntimeError, match="404"):
            await pool.request(wrong)

    asyncio.run(run())


def test_each_conversation_is_its_own_but_for_the_system_prompt() -> None:
    """The benchmark's conversations share no message but the system prompt, so the proxy's
    prompt caches and sticky cuts gain only within a conversation, as with real users."""
    bodies = payloads(8787, 20, 3)
    chats = [json.loads(body.partition(b"\r\n\r\n")[2])["messages"] for body in bodies]
    assert [len(chat) for chat in chats] == [20, 20, 20]
    texts = [{m["content"] for m in chat[1:]} for chat in chats]
    assert all(len(t) == 19 for t in texts)
    assert not (texts[0] & texts[1]) and not (texts[0] & texts[2]) and not (texts[1] & texts[2])
    assert {chat[0]["content"] for chat in chats} == {"You are a helpful assistant."}


def _bench(*flags: str) -> str:
    """The benchmark's output for `flags` (a short run: seconds, not its minute)."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *flags], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_short_run_reports_every_figure_of_every_path() -> None:
    # The whole benchmark end to end, small: the stub, the proxy, the bare forwarder, the
    # clients: a change elsewhere must not break it unseen.
    out = _bench(
        "--messages", "20", "--streams", "2", "--answer-tokens", "2", "--token-rate", "40",
        "--warm-up", "0.5", "--window", "2", "--bare", "--bare-cost", "0.5/10",
    )  # fmt: skip
    for path in ("direct", "proxy", "bare", "bare\\+0.5/10"):
        served = re.search(rf"\n  {path}: (\d+) requests measured, 0 failed", out)
        assert served is not None and int(served.group(1)) > 0, out


def test_a_bare_forwarders_cost_is_cpu_spent_per_request_and_per_read() -> None:
    assert bare_cost("4.5/16") == pytest.approx((0.0045, 0.000016))
    assert bare_cost("2") == (0.002, 0.0)
    with pytest.raises(ValueError):
        bare_cost("fast/16")
    started = time.thread_time()
    burn(0.005)
    assert time.thread_time() - started >= 0.005

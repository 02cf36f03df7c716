"""The proxy benchmark's parts that decide its figures: the arrival schedule, the stub, the
clients that time each answer, the bare forwarder, the run's bounds and the goals' verdicts;
and the whole benchmark, small.

The benchmark itself is not run here at its size (minutes of both cores); these keep its clock
honest: the same seed must give the same Poisson schedule at the rate asked, and an answer's
times, end to end and with the stub's own time taken out, must agree with the stub's fixed
token schedule, directly and through the bare forwarder.
"""

from __future__ import annotations

import asyncio
import itertools
import json
import os
import re
import select
import signal
import statistics
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from benchmarks import proxy
from benchmarks.proxy import (
    Pool,
    Row,
    Run,
    Timing,
    arrivals,
    free_port,
    goals,
    payloads,
    spawn,
    steady,
    stop,
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


def serve(flags: Callable[[int], list[str]]) -> Iterator[int]:
    """The benchmark script serving on a free port with `flags(port)`."""
    port = free_port()
    process = subprocess.Popen([sys.executable, str(SCRIPT), *flags(port)])
    try:
        wait_listening(port)
        yield port
    finally:
        process.terminate()
        process.wait(10)


@pytest.fixture(scope="module")
def stub() -> Iterator[int]:
    yield from serve(
        lambda port: [
            "--stub",
            str(port),
            "--answer-tokens",
            str(TOKENS),
            "--token-rate",
            str(RATE),
        ]
    )


@pytest.fixture(scope="module")
def bare(stub: int) -> Iterator[int]:
    """The bare forwarder in front of the stub."""
    yield from serve(lambda port: ["--bare-forwarder", str(port), str(stub)])


def timed(port: int, requests: int) -> list[Timing]:
    async def run() -> list[Timing]:
        pool = Pool(port)
        try:
            return [await pool.request(payloads(5, 1)[0]) for _ in range(requests)]
        finally:
            pool.close()

    return asyncio.run(run())


@pytest.mark.parametrize("path", ["stub", "bare"])
def test_an_answer_is_timed_on_the_stubs_schedule(
    path: str, request: pytest.FixtureRequest
) -> None:
    # Directly and through the bare forwarder, which passes the stub's bytes through.
    for timing in timed(request.getfixturevalue(path), 3):  # one keep-alive connection, reused
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
        wrong = payloads(5, 1)[0].replace(b"/v1/chat/completions", b"/v1/completions", 1)
        with pytest.raises(RuntimeError, match="404"):
            await pool.request(wrong)

    asyncio.run(run())


def test_each_conversation_is_its_own_but_for_the_system_prompt() -> None:
    """The benchmark's conversations share no message but the system prompt, so a proxy's
    prompt caches gain only within a conversation, as with real users."""
    bodies = payloads(20, 3)
    chats = [json.loads(body.partition(b"\r\n\r\n")[2])["messages"] for body in bodies]
    assert [len(chat) for chat in chats] == [20, 20, 20]
    texts = [{m["content"] for m in chat[1:]} for chat in chats]
    assert all(len(t) == 19 for t in texts)
    assert not (texts[0] & texts[1]) and not (texts[0] & texts[2]) and not (texts[1] & texts[2])
    assert {chat[0]["content"] for chat in chats} == {"You are a helpful assistant."}


def test_the_stub_stops_on_sigint_though_started_deaf_to_it() -> None:
    # As a shell's background job (a test suite's) starts it: SIGINT ignored, inherited.
    port = free_port()
    deaf = subprocess.Popen(
        [sys.executable, str(SCRIPT), "--stub", str(port)],
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        stderr=subprocess.DEVNULL,  # its KeyboardInterrupt
    )
    try:
        wait_listening(port)
        deaf.send_signal(signal.SIGINT)
        assert deaf.wait(10) != 0
    finally:
        deaf.kill()
        deaf.wait()


def test_a_server_sigint_does_not_stop_is_killed_with_its_workers(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # A server deaf to SIGINT whose worker holds its output too: after `stop`, nothing holds
    # it, so a reader of the run's output sees its end.
    monkeypatch.setattr(proxy, "STOP_S", 0.5)
    worker = "import time; time.sleep(60)"
    code = (
        "import signal, subprocess, sys, time; signal.signal(signal.SIGINT, signal.SIG_IGN); "
        f"subprocess.Popen([sys.executable, '-c', {worker!r}]); print('up', flush=True); "
        "time.sleep(60)"
    )
    with spawn([sys.executable, "-c", code], stdout=subprocess.PIPE) as server:
        assert server.stdout is not None and server.stdout.readline() == b"up\n"
        stop([(0, server)])
        assert server.returncode == -signal.SIGKILL
        assert select.select([server.stdout], [], [], 10)[0] and server.stdout.read() == b""
    assert "not stopped by SIGINT in 0 s, killed" in capsys.readouterr().err


def bounded(port: int, schedule: list[float], bound: tuple[int, float], until: float = 1.0) -> Run:
    """A run of `schedule` measured from 0 to `until` s."""
    body = payloads(5, 1)
    return asyncio.run(steady(port, body, schedule, (0.0, until), [os.getpid()], bound))


def test_a_run_drops_arrivals_beyond_its_bound_on_requests_in_flight(stub: int) -> None:
    run = bounded(stub, [0.01, 0.011, 0.012], (1, 2.0))
    assert (run.asked, len(run.timings), run.dropped, run.abandoned, run.failed) == (3, 1, 2, 0, 0)
    assert not run.sustained


def test_a_run_abandons_the_answers_still_open_at_its_drain(stub: int) -> None:
    # The stub's answers take TOKENS / RATE = 0.1 s; the run waits 0.02 s past the last arrival.
    run = bounded(stub, [0.01, 0.02], (10, 0.02), until=0.03)
    assert (run.asked, len(run.timings), run.abandoned, run.dropped) == (2, 0, 2, 0)
    assert not run.sustained
    served = bounded(stub, [0.01, 0.02], (10, 1.0))  # the stub still serves after that
    assert (len(served.timings), served.served, served.abandoned) == (2, 2, 0)
    assert served.sustained


def row(path: str, added: float, cpu: float, sustained: bool = True) -> Row:
    """A row at 100 messages x 20 streams whose four added latencies are `added` ms and whose
    CPU is `cpu` ms an answer (100 served, unless not `sustained`)."""
    served = 100 if sustained else 50
    run = Run([], 100, 0, 0, 0, served, 10.0, cpu * served / 1000, 10.0, 0)
    return Row(100, 20, path, run, (added,) * 4)


def test_the_goals_are_judged_as_ratios_in_the_same_run() -> None:
    met = goals([row("bare", 1.0, 2.0), row("chatcli-1", 4.0, 8.0), row("litellm", 20.0, 40.0)])
    assert met == [
        "- chatcli, 1 worker: added latency <= 1/5 of LiteLLM's where it sustains the load: met"
        " (100 msgs x 20 0.20)",
        "- chatcli, 1 worker: CPU per answer <= 4x the bare forwarder's: met (100 msgs x 20 4.0x)",
    ]
    missed = goals([row("bare", 1.0, 2.0), row("chatcli-1", 5.0, 9.0), row("litellm", 20.0, 9.0)])
    assert "MISSED (100 msgs x 20 0.25)" in missed[0] and "MISSED (100 msgs x 20 4.5x)" in missed[1]
    # A load LiteLLM does not sustain is not judged against it.
    overloaded = goals([row("chatcli-1", 5.0, 9.0), row("litellm", 20.0, 9.0, sustained=False)])
    assert overloaded[0].endswith(
        "no load to judge; where LiteLLM does not sustain the load: 100 msgs x 20 0.25"
    )


def _bench(*flags: str) -> str:
    """The benchmark's output for `flags` (a short run: seconds, not its minutes)."""
    done = subprocess.run(
        [sys.executable, str(SCRIPT), *flags], capture_output=True, text=True, timeout=240
    )
    assert done.returncode == 0, done.stderr[-2000:]
    return done.stdout


def test_a_short_run_reports_every_figure_of_every_path() -> None:
    # The whole benchmark end to end, small: the stub, the bare forwarder, chatcli's proxy with
    # one and two workers, the clients (LiteLLM is not installed here): a change elsewhere must
    # not break it unseen.
    out = _bench(
        "--messages", "20", "--streams", "1,2", "--answer-tokens", "2", "--token-rate", "40",
        "--warm-up", "0.3", "--window", "1", "--paths", "direct,bare,chatcli-1,chatcli-2",
        "--overflow-messages", "",
    )  # fmt: skip
    lines = [line for line in out.splitlines() if re.match(r"\| \d+ \| \d+ \|", line)]
    assert len(lines) == 2 * 4, out
    for line in lines:
        cells = [cell.strip() for cell in line.strip("|").split("|")]
        assert len(cells) == 14, line
        assert re.fullmatch(r"[0-9.]+ \([0-9.]+\)( \(not sustained\))?", cells[3]), line
        assert re.fullmatch(r"[1-9][0-9]* \(0, 0, 0\)", cells[4]), line  # answers measured
        assert all(re.fullmatch(r"\(?[+-]?[0-9.]+\)?", c) for c in cells[5:12]), line
        # CPU and memory. CPU comes from /proc in clock ticks (10 ms): the stub alone, a few
        # 2-token answers at one stream, may spend none (a clean clone's CI saw 0.0).
        least_cpu = 0.0 if cells[2].startswith("direct") else 1e-9
        assert float(cells[9]) >= least_cpu and float(cells[10]) > 0, line
        if cells[2].startswith("chatcli"):
            assert cells[12] == "-" and re.fullmatch(r"[0-9.]+x", cells[13]), line
    assert out.count("CPU per answer <= 4x the bare forwarder's") == 2, out


def test_a_first_overflow_is_counted_by_the_servers_own_log() -> None:
    # The first-overflow part, small: one conversation over llama-server's window through the
    # bare forwarder (sent, rejected, the client gets the 400) and chatcli told the window.
    from tests.servers import llama_server_command

    llama_server_command()  # skipped without xllamacpp
    out = _bench(
        "--messages", "", "--overflow-messages", "60", "--overflow-paths", "bare,chatcli-declared"
    )  # fmt: skip
    rows = [line.split(" | ") for line in out.splitlines() if line.startswith("| 60 | ")]
    assert [(r[2], r[3], r[4], r[5]) for r in rows] == [
        ("bare forwarder", "1", "1", "HTTP 400"),
        ("chatcli, --context-window 8192", "1", "0", "an answer"),
    ], out
    assert "answered with no rejected call: met" in out

"""What one more turn costs: `python benchmarks/incremental.py [--runs 3]` prints a Markdown
table, each figure the median of `--runs` runs.

Two agent conversations of real text (`benchmarks/agent_session.py`: standard-library sources
as tool results, docstring sentences as prose), each at 1,000 and 10,000 messages (and the
first at 100):

- *agent steps*: an assistant call and its tool result (up to `MAX_RESULT_LINES` lines of one
  file), a user message now and then (`agent_turn`);
- *request turns*: the previous request's answer, the user's next request, the assistant's
  call, its result of a few kilobytes (`request_turn`).

Each holds a provider's own compaction (an Anthropic `compaction` block, `with_compaction`)
`COMPACTED_AT` of the way in, made by the model the stand-in provider says it is, so every
request's view starts from it (`chatcli.history.native`).

Each is sent through `Client.send` with the defaults, against a provider that answers at once
(`InstantProvider`), once untimed, then after each turn appended (one step, or one request
turn), with the CPU time of each send:

- window unknown: `TURNS` turns; the median and the mean (which counts the sends that do
  more: a microcompaction batch);
- a `WINDOW`-token window declared: every request is also estimated before it is sent, and a
  conversation past the window is cut by a recovery level, which the following requests keep
  (a sticky view) and which carries what the user messages it cut said. The turns go on until
  a send cuts again (at most `CYCLE_TURNS`; the conversation grows by that many turns): the
  median, the mean over all of them (the cost per turn of a whole cycle, the cut included),
  and the cut's own time;
- the anchor: the history transforms alone (native view, microcompaction, tool-result budget,
  pairing repair, in the policy's order, with the defaults) with no memory, each transcript
  read whole, `ANCHOR_TURNS` times.

A `Client` keeps its own memoised scans (`chatcli.history.scan.ScanMemos`, dropped with it),
so its sends cost what was appended. The last column says which paths the window-declared
sends took, from what they sent and the events they emitted: the old tool results sent as
microcompaction's stubs, the provider's compaction sent, the recovery levels applied and the
items carried by them (the untimed send's and the timed ones').

Times are CPU time of this process (`time.process_time`): the machine is shared, and wall
time would measure the neighbours (the load average is printed). Every figure printed is
measured in this run.
"""

from __future__ import annotations

import argparse
import itertools
import math
import os
import random
import statistics
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.agent_session import (
    InstantProvider,
    agent_session,
    agent_turn,
    request_session,
    request_turn,
    with_compaction,
)

from chatcli.config import RecoveryConfig
from chatcli.events import Event, InstructionsCarried, LevelApplied
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.microcompact import STUB_PREFIX, microcompact
from chatcli.history.native import native_view
from chatcli.history.pairing import repair_tool_pairing
from chatcli.messages import Message
from chatcli.recovery import Client
from chatcli.tokens.estimate import MarginEstimator

SHAPES = ("agent steps", "request turns")
SIZES = {"agent steps": (100, 1_000, 10_000), "request turns": (1_000, 10_000)}
TURNS = 40
# The most turns the window-declared client is sent while it waits for its next cut.
CYCLE_TURNS = 400
ANCHOR_TURNS = {100: 10, 1_000: 5, 10_000: 3}
SEED = 7
# The declared window of the second column: a 200k-token model, as in benchmarks/cache.py.
WINDOW = 200_000
# Whose compactions the provider reads, and where in a conversation its compaction is.
COMPACTION_PROVIDER, MODEL = "anthropic", "claude-sonnet-4-6"
COMPACTED_AT = 0.05

Turn = Callable[[random.Random, int], list[Message]]
_TURNS: dict[str, Turn] = {"agent steps": agent_turn, "request turns": request_turn}


def conversation(shape: str, size: int) -> list[Message]:
    """A conversation of `shape` of at least `size` messages, cut to about `size` at a turn's
    end (a tool result: a request is due), with the provider's compaction in it."""
    session = agent_session if shape == "agent steps" else request_session
    messages = session(size // 2 + 1, seed=SEED)
    cut = size
    while messages[cut - 1].tool_result is None:
        cut += 1
    at = int(cut * COMPACTED_AT)
    return with_compaction(messages[:cut], at, COMPACTION_PROVIDER, MODEL)


def grown(shape: str, size: int) -> Iterator[list[Message]]:
    """The conversation, then the conversation after each turn appended to it."""
    messages = conversation(shape, size)
    rng = random.Random(size)
    yield messages
    for turn in itertools.count():
        messages = messages + _TURNS[shape](rng, size + turn)
        yield messages


def cpu_ms(send: Callable[[list[Message]], object], messages: list[Message]) -> float:
    start = time.process_time()
    send(messages)
    return (time.process_time() - start) * 1000


def per_turn_ms(
    shape: str, size: int, send: Callable[[list[Message]], object], turns: int
) -> list[float]:
    """CPU ms of `send` after each of `turns` appended turns (the first send untimed)."""
    conversations = grown(shape, size)
    send(next(conversations))
    return [cpu_ms(send, messages) for messages in itertools.islice(conversations, turns)]


def cut_cycle_ms(shape: str, size: int) -> tuple[list[float], Paths]:
    """CPU ms of a `WINDOW`-token client's sends after each appended turn, the first send
    untimed, up to the send that cuts again (at most `CYCLE_TURNS`), and what they did."""
    provider = InstantProvider(
        context_window=WINDOW, model=MODEL, compaction_provider=COMPACTION_PROVIDER
    )
    paths = Paths(provider)
    client = Client(provider, hooks=[paths.hook])
    conversations = grown(shape, size)
    client.send(next(conversations))
    cut = paths.levels
    times = []
    for messages in itertools.islice(conversations, CYCLE_TURNS):
        times.append(cpu_ms(client.send, messages))
        if paths.levels > cut:
            paths.cut_again = times[-1]
            break
    return times, paths


def transforms(messages: list[Message]) -> object:
    """The history transforms of every request, in the policy's order, with the defaults."""
    config = RecoveryConfig()
    view = native_view(messages, provider=COMPACTION_PROVIDER, model=MODEL).messages
    shaped = enforce_tool_result_budget(
        microcompact(view).messages,
        per_result_chars=config.tool_result_max_chars,
        per_turn_chars=config.tool_result_budget_chars,
    )
    return repair_tool_pairing(shaped.messages)


@dataclass
class Paths:
    """What a client's sends did: the events it emitted, and its provider's last request."""

    provider: InstantProvider
    levels: int = 0
    carried: int = 0
    cut_again: float | None = None  # the CPU ms of the timed send that cut again

    def hook(self, event: Event) -> None:
        if isinstance(event, LevelApplied):
            self.levels += 1
        elif isinstance(event, InstructionsCarried):
            self.carried += event.new

    def reached(self) -> str:
        assert self.provider.requests is not None
        sent = self.provider.requests[-1].messages
        stubs = sum(1 for m in sent if m.tool_result and m.text.startswith(STUB_PREFIX))
        compaction = any(m.compaction is not None for m in sent)
        return (
            f"{stubs:,} stubs, compaction {'sent' if compaction else 'NOT sent'}, "
            f"{self.levels} levels, {self.carried:,} carried"
        )


def measured(shape: str, size: int) -> tuple[list[float], str]:
    """One run's figures of a row (the medians and means of its sends, the next cut's ms,
    NaN for none, the turns sent to it, the anchor's median) and the paths its
    window-declared sends took."""
    provider = InstantProvider(requests=None, model=MODEL, compaction_provider=COMPACTION_PROVIDER)
    client = Client(provider)
    send = per_turn_ms(shape, size, client.send, TURNS)
    cycle, paths = cut_cycle_ms(shape, size)
    anchor = per_turn_ms(shape, size, transforms, ANCHOR_TURNS[size])
    cut = math.nan if paths.cut_again is None else paths.cut_again
    figures = [statistics.median(send), statistics.mean(send), statistics.median(cycle)]
    figures += [statistics.mean(cycle), cut, len(cycle), statistics.median(anchor)]
    return figures, paths.reached()


def row(shape: str, size: int, runs: int) -> str:
    """A row of the table: each figure the median of `runs` runs."""
    measures = [measured(shape, size) for _ in range(runs)]
    send, send_mean, cycle, cycle_mean, cut, turns, anchor = (
        statistics.median(run[i] for run, _ in measures) for i in range(7)
    )
    tokens = MarginEstimator().count(conversation(shape, size))
    next_cut = "none" if math.isnan(cut) else f"{cut:,.0f} ms"
    return (
        f"| {shape} | {size:,} | {tokens:,} | {send:.2f} ms ({send_mean:.2f}) "
        f"| {cycle:.2f} ms ({cycle_mean:.2f}) | {next_cut} in {turns:.0f} turns "
        f"| {anchor:.2f} ms | {measures[0][1]} |"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=3, help="runs per row (medians of them)")
    runs = parser.parse_args().runs
    started = time.perf_counter()
    load = os.getloadavg()[0]
    print(
        f"CPU time of this process, the median of {runs} runs; load average {load:.1f} before "
        f"the run ({os.cpu_count()} cores).\n"
    )
    print(
        f"| conversation | messages | tokens (est.) | per turn, window unknown: median (mean of "
        f"{TURNS}) | per turn, {WINDOW // 1000}k window: median (mean to the next cut) "
        f"| the next cut, {WINDOW // 1000}k window | transforms read whole per turn (anchor) "
        f"| paths taken, {WINDOW // 1000}k window |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---|")
    for shape in SHAPES:
        for size in SIZES[shape]:
            print(row(shape, size, runs), flush=True)
    print(f"\n(wall time of the run: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()

"""What one more turn costs: `python benchmarks/incremental.py` prints a Markdown table.

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
(`InstantProvider`): once untimed, then `TURNS` times after appending one turn (one step or
one request turn). The table shows the median CPU time of those sends, and their mean (which
counts the sends that do more: a microcompaction batch, a new recovery cut), with the window
unknown and with a `WINDOW`-token window declared (then every request is also estimated
before it is sent, and a conversation past the window is cut by a recovery level, which the
following requests keep: a sticky view, and carries what the cut user messages said). The
anchor is the time of the history transforms alone (native view, microcompaction, tool-result
budget, pairing repair, in the policy's order on the same transcripts) with no memory, each
transcript read whole, `ANCHOR_TURNS` times. A `Client` keeps its own memoised scans
(`chatcli.history.scan.ScanMemos`, dropped with it), so its sends cost what was appended.

The last column says which paths the window-declared sends took, from what they sent and the
events they emitted: the old tool results sent as microcompaction's stubs, the provider's
compaction sent, the recovery levels applied and the items carried by them (over the
untimed send and the timed ones).

Times are CPU time of this process (`time.process_time`): the machine is shared, and wall
time would measure the neighbours (the load average is printed). Every figure printed is
measured in this run.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Callable
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

SHAPES = ("agent steps", "request turns")
SIZES = {"agent steps": (100, 1_000, 10_000), "request turns": (1_000, 10_000)}
TURNS = 40
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


def per_turn_ms(
    shape: str, size: int, send: Callable[[list[Message]], object], turns: int
) -> list[float]:
    """CPU ms of `send` on the conversation after each of `turns` appended turns."""
    messages = conversation(shape, size)
    send(messages)
    rng = random.Random(size)
    times = []
    for turn in range(turns):
        messages = messages + _TURNS[shape](rng, size + turn)
        start = time.process_time()
        send(messages)
        times.append(time.process_time() - start)
    return [t * 1000 for t in times]


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
            f"{self.levels} levels, {self.carried} carried"
        )


def windowed_client() -> tuple[Client, Paths]:
    """A client of a `WINDOW`-token model, and what its sends do."""
    provider = InstantProvider(
        context_window=WINDOW, model=MODEL, compaction_provider=COMPACTION_PROVIDER
    )
    paths = Paths(provider)
    return Client(provider, hooks=[paths.hook]), paths


def median_mean(times: list[float]) -> str:
    return f"{statistics.median(times):.2f} ms ({statistics.mean(times):.2f})"


def row(shape: str, size: int) -> str:
    provider = InstantProvider(requests=None, model=MODEL, compaction_provider=COMPACTION_PROVIDER)
    client = Client(provider)
    send = per_turn_ms(shape, size, lambda m: client.send(m), TURNS)
    windowed, paths = windowed_client()
    window = per_turn_ms(shape, size, lambda m: windowed.send(m), TURNS)
    anchor = per_turn_ms(shape, size, transforms, ANCHOR_TURNS[size])
    tokens = client.policy.estimator.count(conversation(shape, size))
    return (
        f"| {shape} | {size:,} | {tokens:,} | {median_mean(send)} | {median_mean(window)} "
        f"| {statistics.median(anchor):.2f} ms | {paths.reached()} |"
    )


def main() -> None:
    started = time.perf_counter()
    load = os.getloadavg()[0]
    print(
        f"{TURNS} turns appended and sent per cell; CPU time of this process; "
        f"load average {load:.1f} before the run ({os.cpu_count()} cores).\n"
    )
    print(
        "| conversation | messages | tokens (est.) | Client.send per turn, median (mean) "
        f"| {WINDOW // 1000}k window declared, median (mean) "
        "| transforms read whole per turn (anchor) "
        f"| paths taken, {WINDOW // 1000}k window |"
    )
    print("|---|---:|---:|---:|---:|---:|---|")
    for shape in SHAPES:
        for size in SIZES[shape]:
            print(row(shape, size), flush=True)
    print(f"\n(wall time of the run: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()

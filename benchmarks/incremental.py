"""What one more turn costs: `python benchmarks/incremental.py` prints a Markdown table.

An agent conversation of real text (`benchmarks/agent_session.py`: standard-library sources
as tool results) is sent through `Client.send` with the defaults, against a provider that
answers at once (`InstantProvider`), at 100, 1,000 and 10,000 messages. After one
untimed send of the conversation, one agent step (an assistant call and its tool result,
sometimes a user message) is appended and sent, `REPEATS[size]` times: the table shows the
median CPU time of those sends (all of it chatcli's: the provider does nothing), with the
window unknown and with a `WINDOW`-token window declared (then every request is also
estimated before it is sent, and a conversation past the window is cut by a recovery level,
which the following requests keep: a sticky view), and the time of the history transforms
alone (microcompaction, tool-result budget, pairing repair, called in the policy's order on
the same transcripts) with no memory, each transcript read whole: the anchor. A `Client`
keeps its own memoised scans (`chatcli.history.scan.ScanMemos`, dropped with it), so its
sends cost what was appended.

Times are CPU time of this process (`time.process_time`): the machine is shared, and wall
time would measure the neighbours. Every figure printed is measured in this run.
"""

from __future__ import annotations

import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.agent_session import InstantProvider, agent_session, agent_turn

from chatcli.config import RecoveryConfig
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.microcompact import microcompact
from chatcli.history.pairing import repair_tool_pairing
from chatcli.messages import Message
from chatcli.recovery import Client

SIZES = (100, 1_000, 10_000)
REPEATS = {100: 30, 1_000: 10, 10_000: 3}
SEED = 7
# The declared window of the second column: a 200k-token model, as in benchmarks/cache.py.
WINDOW = 200_000


def conversation(size: int) -> list[Message]:
    """An agent session of at least `size` messages, cut to exactly `size` at a step's end."""
    messages = agent_session(size // 2 + 1, seed=SEED)
    cut = size
    while messages[cut - 1].tool_result is None:  # end on a tool result: a request is due
        cut += 1
    return messages[:cut]


def per_turn_ms(size: int, send: Callable[[list[Message]], object]) -> float:
    """Median CPU ms of `send` on the conversation after each appended step."""
    messages = conversation(size)
    send(messages)
    rng = random.Random(size)
    times = []
    for step in range(REPEATS[size]):
        messages = messages + agent_turn(rng, size + step)
        start = time.process_time()
        send(messages)
        times.append(time.process_time() - start)
    return statistics.median(times) * 1000


def transforms(messages: list[Message]) -> object:
    """The history transforms of every request, in the policy's order, with the defaults."""
    config = RecoveryConfig()
    shaped = enforce_tool_result_budget(
        microcompact(messages).messages,
        per_result_chars=config.tool_result_max_chars,
        per_turn_chars=config.tool_result_budget_chars,
    )
    return repair_tool_pairing(shaped.messages)


def main() -> None:
    started = time.perf_counter()
    print(
        "| messages | tokens (est.) | Client.send per turn | Client.send per turn, "
        f"{WINDOW // 1000}k window declared | history transforms per turn, read whole (anchor) |"
    )
    print("|---:|---:|---:|---:|---:|")
    for size in SIZES:
        client = Client(InstantProvider(requests=None))
        send_ms = per_turn_ms(size, lambda m, client=client: client.send(m))
        windowed = Client(InstantProvider(requests=None, context_window=WINDOW))
        windowed_ms = per_turn_ms(size, lambda m, c=windowed: c.send(m))
        transform_ms = per_turn_ms(size, transforms)
        tokens = client.policy.estimator.count(conversation(size))
        print(
            f"| {size:,} | {tokens:,} | {send_ms:.2f} ms | {windowed_ms:.2f} ms "
            f"| {transform_ms:.2f} ms |"
        )
    print(f"\n(wall time of the run: {time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()

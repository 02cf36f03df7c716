"""Benchmark of context-overflow recovery: `python benchmarks/recovery.py` prints Markdown.

Part 1 — recovery. For each window (8k, 32k, 128k, 200k tokens), session kind (a chat, a
tool-heavy agent) and overflow (5%, 50%, 500% over the window, as the provider counts it), one
`Client.send()` against `WindowedProvider` (tests/fakes.py: it counts with its own tokenizer,
~20% denser than chatcli's uncalibrated estimate, and rejects what does not fit with vLLM's
real error body, which states the prompt size and the window). Three ways to run it:

- ladder: the SPEC's plain ladder (`predictive=False`): every level sent in turn;
- default, window not declared: chatcli's default; the first error's numbers calibrate the
  estimate and levels predicted not to fit are skipped;
- default, window declared: the same, plus the pre-flight check before the first call.

(The ladder ignores a declared window, so it is shown once.) Each cell: provider calls until
success, the recovery level of the view that succeeded (L0: none), the share of the window
that view fills (provider's count), whether the latest user request survived (it is in the
view and the model answered it), and the time of chatcli's own work (the send minus the
time inside the provider; best of 3 identical runs).

Microcompaction is off in these three columns (`microcompact=None`): they compare ways of
recovering from an overflow, so each must be sent the prompt as sized, the same for all.
`Client`'s default microcompaction would shrink the agent sessions' old tool results before
the first send, and most of them would not overflow at all; the table after it shows that,
with the default client as it is (window declared, microcompaction on), for the agent
sessions (the chat sessions have no tool results: nothing changes for them).

Part 2 — the transforms alone (microcompaction, budget, pairing, levels 1-3 chained as the
policy applies them) on agent histories of 1k, 10k and 100k messages: milliseconds, and
microseconds per message, which stays flat when the growth is linear.

Times are CPU time of this process (`time.process_time`), not wall-clock time: the machine
is shared, and wall time would measure the neighbours; everything here is single-threaded
and does no I/O, so CPU time is the time the work takes on an idle core. The run's total
wall time is printed at the end. Every figure printed is measured in this run.
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

# The test provider lives with the tests (one copy); the repository root makes it importable
# when this file is run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from tests.fakes import WindowedProvider

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.errors import ContextRecoveryError
from chatcli.events import LevelApplied
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.microcompact import microcompact
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import Message, ToolCall
from chatcli.providers.base import Request, Response
from chatcli.recovery import Client

WINDOWS = (8_000, 32_000, 128_000, 200_000)
OVERFLOWS = (0.05, 0.50, 5.00)
SESSIONS = ("chat", "agent")
HISTORY_SIZES = (1_000, 10_000, 100_000)
LATEST = "Latest request: summarise what we decided and list the open questions."
SEED = 2024
# Timings are the best of a few runs: even CPU time varies with cache and memory-bus
# contention on a shared machine; the best run is the one least disturbed by it.
RECOVERY_REPEATS = 3
TRANSFORM_REPEATS = {1_000: 7, 10_000: 5, 100_000: 3}


# -- sessions ------------------------------------------------------------------------------


# A step of history: (rng, index, at most this many chars for its long message) -> messages.
Step = Callable[[random.Random, int, int], list[Message]]


def chat_exchange(rng: random.Random, i: int, room: int) -> list[Message]:
    """A user question and an answer of 1,500-7,000 chars (some over level 1's 5,000)."""
    question = f"Question {i}: how should we handle case {i}? " + "Some context. " * rng.randint(
        5, 50
    )
    answer = f"Answer {i}: " + "Here is the reasoning, step by step. " * rng.randint(40, 190)
    return [Message.user(question), Message.assistant(answer[:room])]


def agent_round(rng: random.Random, i: int, room: int) -> list[Message]:
    """A tool call and its result of 2,000-18,000 chars: within the tool-result budget, so
    the first request is the transcript itself and the overflow is exactly as stated."""
    call = ToolCall(id=f"call_{i}", name="run", arguments={"cmd": f"pytest tests/t{i}.py"})
    size = min(room, rng.choice((2_000, 5_000, 9_000, 18_000)))
    output = (f"tests/t{i}.py::test_case PASSED [{i % 100}%]\n" * (size // 30 + 1))[:size]
    return [
        Message.assistant(f"Running the tests for step {i}. " * 10, tool_calls=(call,)),
        Message.tool(call.id, output),
    ]


def session(kind: str, tokens: int, provider: WindowedProvider) -> list[Message]:
    """A `kind` session the provider counts as `tokens` (a few over at most): system prompt,
    task, history, then the latest request (an agent has also run two tool rounds for it).
    The last step of history is shortened to land on the count."""
    rng = random.Random(SEED)
    step: Step = chat_exchange if kind == "chat" else agent_round
    head = [Message.system(f"You are a helpful {kind} assistant."), Message.user("Task: help.")]
    tail = [Message.user(LATEST)]
    if kind == "agent":
        tail += agent_round(rng, 10_000, 2_000) + agent_round(rng, 10_001, 5_000)
    body: list[Message] = []
    while (missing := tokens - provider.count(head + body + tail)) > 0:
        room = max(100, int(missing * provider.chars_per_token) - 500)
        body += step(rng, len(body), room)
    return head + body + tail


# -- part 1: recovery ----------------------------------------------------------------------


@dataclass(kw_only=True)
class TimedProvider(WindowedProvider):
    """`WindowedProvider` that adds up the time spent inside it (its tokenizer, its errors)."""

    seconds: float = 0.0

    def complete(self, request: Request) -> Response:
        start = time.process_time()
        try:
            return super().complete(request)
        finally:
            self.seconds += time.process_time() - start


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    calls: int
    level: int  # the recovery level of the view that succeeded (0: none was needed)
    fill: float | None  # None: recovery failed
    survived: bool
    seconds: float

    def cell(self) -> str:
        ms = f"{self.seconds * 1000:.1f} ms"
        if self.fill is None:
            return f"**failed** after {self.calls} · {ms}"
        kept = "yes" if self.survived else "**no**"
        return f"{self.calls} · L{self.level} · {self.fill:.0%} · {kept} · {ms}"


def recover(
    messages: list[Message],
    window: int,
    *,
    predictive: bool,
    declared: bool,
    microcompaction: MicrocompactConfig | None = None,
) -> Outcome:
    """The outcome of one send; its time is the best of `RECOVERY_REPEATS` identical runs."""
    runs = [
        recover_once(
            messages,
            window,
            predictive=predictive,
            declared=declared,
            microcompaction=microcompaction,
        )
        for _ in range(RECOVERY_REPEATS)
    ]
    if len({(run.calls, run.level, run.fill, run.survived) for run in runs}) != 1:
        raise AssertionError("recovery is deterministic: identical runs must agree")
    return min(runs, key=lambda run: run.seconds)


def recover_once(
    messages: list[Message],
    window: int,
    *,
    predictive: bool,
    declared: bool,
    microcompaction: MicrocompactConfig | None = None,
) -> Outcome:
    provider = TimedProvider(window=window, declares_limits=declared)
    client = Client(provider, predictive=predictive, microcompact=microcompaction)
    start = time.process_time()
    try:
        reply = client.send(messages)
    except ContextRecoveryError:
        own = time.process_time() - start - provider.seconds
        calls = len(provider.requests)
        return Outcome(calls=calls, level=0, fill=None, survived=False, seconds=own)
    own = time.process_time() - start - provider.seconds
    survived = Message.user(LATEST) in reply.view and reply.message.text.endswith(LATEST)
    fill = provider.count(reply.view) / window
    level = max((e.level for e in reply.events if isinstance(e, LevelApplied)), default=0)
    return Outcome(calls=reply.calls, level=level, fill=fill, survived=survived, seconds=own)


def recovery_table() -> list[str]:
    lines = [
        "| window | session | prompt sent (provider count) | ladder | default, window "
        "not declared | default, window declared |",
        "|---:|---|---:|---|---|---|",
    ]
    probe = WindowedProvider(window=1)
    warm_up = session("agent", 40_000, probe)  # the first run pays one-off costs
    recover_once(warm_up, 32_000, predictive=True, declared=False)
    for window in WINDOWS:
        for kind in SESSIONS:
            for overflow in OVERFLOWS:
                messages = session(kind, round(window * (1 + overflow)), probe)
                prompt = probe.count(messages)
                cells = [
                    recover(messages, window, predictive=False, declared=False).cell(),
                    recover(messages, window, predictive=True, declared=False).cell(),
                    recover(messages, window, predictive=True, declared=True).cell(),
                ]
                sent = f"{prompt:,} ({prompt / window:.2f}×, {len(messages)} msgs)"
                lines.append(f"| {window // 1000}k | {kind} | {sent} | " + " | ".join(cells) + " |")
    return lines


def microcompaction_table() -> list[str]:
    """The agent sessions of part 1 sent by the default client: microcompaction on."""
    lines = [
        "| window | transcript (provider count) | after microcompaction | default, window "
        "declared, microcompaction on |",
        "|---:|---:|---:|---|",
    ]
    probe = WindowedProvider(window=1)
    config = MicrocompactConfig()
    for window in WINDOWS:
        for overflow in OVERFLOWS:
            messages = session("agent", round(window * (1 + overflow)), probe)
            prompt = probe.count(messages)
            shrunk = probe.count(microcompact(messages, config).messages)
            outcome = recover(
                messages, window, predictive=True, declared=True, microcompaction=config
            )
            row = [
                f"{window // 1000}k",
                f"{prompt:,} ({prompt / window:.2f}×)",
                f"{shrunk:,} ({shrunk / window:.2f}×)",
                outcome.cell(),
            ]
            lines.append("| " + " | ".join(row) + " |")
    return lines


# -- part 2: transform time ----------------------------------------------------------------


def long_history(size: int) -> list[Message]:
    """`size` messages of an agent session: tool rounds (results 200-25,000 chars, a few over
    the budget) and, every tenth step, a user follow-up."""
    rng = random.Random(SEED)
    messages = [Message.system("You are a coding agent.")]
    while len(messages) < size:
        step = len(messages)
        if step % 10 == 1:
            messages.append(Message.user(f"Follow-up {step}: check the edge cases too."))
            continue
        call = ToolCall(id=f"c{step}", name="read_file", arguments={"path": f"src/{step}.py"})
        chars = rng.choice((200, 400, 800, 1_500, 25_000) if step % 97 == 0 else (200, 400, 800))
        messages += [
            Message.assistant(f"Reading src/{step}.py.", tool_calls=(call,)),
            Message.tool(call.id, ("x = 1\n" * (chars // 6 + 1))[:chars]),
        ]
    return messages[:size]


def timed(run: Callable[[], object], repeats: int) -> float:
    """The best of `repeats` runs, in seconds, with the garbage collector paused as `timeit`
    does: its pauses depend on the whole heap, not on the transform."""
    best = float("inf")
    gc.collect()
    gc.disable()
    try:
        for _ in range(repeats):
            start = time.process_time()
            run()
            best = min(best, time.process_time() - start)
    finally:
        gc.enable()
    return best


def transform_times(messages: list[Message], repeats: int) -> dict[str, float]:
    config, microcompaction = RecoveryConfig(), MicrocompactConfig()
    shrunk = microcompact(messages, microcompaction).messages
    budget = enforce_tool_result_budget(
        shrunk,
        per_result_chars=config.tool_result_max_chars,
        per_turn_chars=config.tool_result_budget_chars,
    ).messages
    base = repair_tool_pairing(budget).messages
    level1 = apply_recovery_level(base, 1, config).messages
    level2 = apply_recovery_level(level1, 2, config).messages
    steps: dict[str, Callable[[], object]] = {
        "microcompact": lambda: microcompact(messages, microcompaction),
        "budget": lambda: enforce_tool_result_budget(
            shrunk,
            per_result_chars=config.tool_result_max_chars,
            per_turn_chars=config.tool_result_budget_chars,
        ),
        "pairing": lambda: repair_tool_pairing(budget),
        "level 1": lambda: apply_recovery_level(base, 1, config),
        "level 2": lambda: apply_recovery_level(level1, 2, config),
        "level 3": lambda: apply_recovery_level(level2, 3, config),
    }
    return {name: timed(step, repeats) for name, step in steps.items()}


def transform_table() -> list[str]:
    names = ("microcompact", "budget", "pairing", "level 1", "level 2", "level 3")
    lines = [
        "| messages | chars | " + " | ".join(names) + " | total | per message |",
        "|---:|---:|" + "---:|" * (len(names) + 2),
    ]
    for size in HISTORY_SIZES:
        messages = long_history(size)
        times = transform_times(messages, repeats=TRANSFORM_REPEATS[size])
        total = sum(times.values())
        chars = sum(m.char_count for m in messages)
        cells = " | ".join(f"{times[name] * 1000:.1f} ms" for name in names)
        per = f"{total / size * 1e6:.2f} µs"
        lines.append(f"| {size:,} | {chars:,} | {cells} | {total * 1000:.1f} ms | {per} |")
    return lines


def main() -> int:
    started = time.perf_counter()
    print(
        "## Recovery: provider calls · level of the final view · window filled by it · "
        "latest request kept · chatcli's own CPU time\n"
    )
    print("\n".join(recovery_table()))
    print("\n## The agent sessions with the default microcompaction\n")
    print("\n".join(microcompaction_table()))
    print("\n## Transform CPU time (best of runs) on agent histories\n")
    print("\n".join(transform_table()))
    print(
        f"\nPython {sys.version.split()[0]}; ran in {time.perf_counter() - started:.1f} s (wall)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Benchmark of the history transforms alone: `python benchmarks/transforms.py` prints Markdown.

Microcompaction, the tool-result budget, pairing repair and recovery levels 1-3 (chained as
the policy applies them) on synthetic agent histories of 1k, 10k and 100k messages: CPU time
(`time.process_time`, best of a few runs, the garbage collector paused as `timeit` does) and
microseconds per message, which stays flat when the growth is linear. The histories are
synthetic on purpose: this measures how the time grows with the number of messages, not what
the transforms keep (`benchmarks/recovery.py` measures that, on real text).
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections.abc import Callable

from chatcli.config import MicrocompactConfig, RecoveryConfig
from chatcli.history.budget import enforce_tool_result_budget
from chatcli.history.microcompact import microcompact
from chatcli.history.pairing import repair_tool_pairing
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import Message, ToolCall

HISTORY_SIZES = (1_000, 10_000, 100_000)
SEED = 2024
TRANSFORM_REPEATS = {1_000: 7, 10_000: 5, 100_000: 3}


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
    print("\n".join(transform_table()))
    print(
        f"\nPython {sys.version.split()[0]}; ran in {time.perf_counter() - started:.1f} s (wall)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

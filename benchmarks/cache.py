"""What context management costs with prompt caching: `python benchmarks/cache.py` prints
Markdown.

The same agent sessions of real text (`benchmarks/agent_session.py`: standard-library
sources as tool results, docstring sentences as prose) are run as agent loops through
`Client.send` with the defaults, the window declared: each request is the previous one plus
one agent step (an assistant call and its tool result), against a provider that answers at
once and records what it was sent. Three policies, side by side on the same requests:

- **off**: microcompaction off (`Client(..., microcompact=None)`): the transcript as it is,
  until the window forces a recovery level;
- **aging**: the seed's always-on aging (`MicrocompactConfig(trigger_tokens=0)`): results
  cut at 2 turns, stubbed at 4, on every request;
- **default**: chatcli's default (`MicrocompactConfig()`): nothing cut below the trigger;
  past it, a batch makes room for eight turns (never below half of the trigger), taking the
  newest eligible results first (the latest start that reaches its target).

Every request is counted with tiktoken's o200k_base (seeded offline from `bpe-openai` by
`chatcli.tokens.exact`: nothing downloaded), 4 tokens of framing per message as
`TiktokenCounter` counts. For each policy: tokens sent over the session, the peak view, the
mean prefix reuse (per request, the tokens of the leading messages equal to the previous
request's, over the request's tokens: what a prompt cache can reuse; a message that differs
at all counts as not reused, so this is a lower bound; in brackets the same weighted by
tokens, all reused over all sent after the first request), the requests that did not reuse
the whole previous request (cache breaks), how far the view went past the trigger (in
tokens, and in mean steps), and the cost at list prices with caching: each request
reads its reused prefix from the cache and writes the rest (a breakpoint at the end of every
request, as Anthropic's automatic caching places it), priced with the catalog's cache prices
for `MODEL` (reads 0.1x, writes 1.25x of input). Output tokens are the same for every policy
and left out.

`python benchmarks/cache.py --depths 4 6 10 15 100` prices the default with other batch
depths (the turns of room a batch makes below the trigger, `BATCH_ROOM_TURNS`; never below
half of it, so 100 is half every time) on the same sessions; `--depths ... --seeds 2026 1 2`
on the sessions of other seeds too (the lowest and highest figure over them), so a depth
is not chosen for one session's luck.
"""

from __future__ import annotations

import itertools
import sys
import time
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.agent_session import InstantProvider, agent_session

from chatcli.catalog import Prices, lookup
from chatcli.config import MicrocompactConfig
from chatcli.history import microcompact
from chatcli.messages import Message
from chatcli.recovery import Client
from chatcli.tokens.exact import TiktokenCounter, load_encoding

MODEL = "claude-sonnet-4-5"
# The targets: (steps, window).
RUNS = ((60, 200_000), (200, 1_000_000))
# The session of the main table (`agent_session`'s default); `--seeds` adds others.
SEED = 2026
POLICIES: dict[str, MicrocompactConfig | None] = {
    "off": None,
    "aging (seed)": MicrocompactConfig(trigger_tokens=0),
    "default": MicrocompactConfig(),
}
# List prices when the catalog (the `catalog` extra) is not installed: Anthropic's ratios.
FALLBACK_PRICES = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    """One policy on one session."""

    sent: int
    peak: int
    reuse: float
    reuse_weighted: float
    breaks: int
    past_trigger: int
    cost: float
    broken: tuple[tuple[int, float], ...]  # (step, reuse) of each request that broke the cache
    losses: tuple[float, ...]  # per request after the first: the share it did not reuse


class Tokens:
    """o200k token counts of messages, each message counted once (by identity)."""

    def __init__(self) -> None:
        encoding = load_encoding("o200k_base")
        if encoding is None:
            raise SystemExit("tiktoken is needed: pip install 'chatcli-recovery[tiktoken]'")
        self.counter = TiktokenCounter(encoding=encoding)
        self.known: dict[int, tuple[Message, int]] = {}

    def of(self, message: Message) -> int:
        known = self.known.get(id(message))
        if known is None or known[0] is not message:
            known = (message, self.counter.count([message]))
            self.known[id(message)] = known
        return known[1]

    def request(self, messages: tuple[Message, ...]) -> int:
        return sum(self.of(m) for m in messages)


def requests(
    steps: int, window: int, config: MicrocompactConfig | None, seed: int = SEED
) -> list[tuple[Message, ...]]:
    """What `Client.send` sends at each step of the agent loop (the session of `seed`)."""
    session = agent_session(steps, seed)
    ends = [i + 1 for i, m in enumerate(session) if m.tool_result is not None]
    provider = InstantProvider(context_window=window)
    client = Client(provider, microcompact=config)
    for end in ends:
        client.send(session[:end])
    assert provider.requests is not None
    return [request.messages for request in provider.requests]


def shared_tokens(
    tokens: Tokens, previous: tuple[Message, ...], current: tuple[Message, ...]
) -> int:
    shared = 0
    for old, new in zip(previous, current, strict=False):
        if old != new:
            break
        shared += tokens.of(new)
    return shared


def figures(
    tokens: Tokens, sent: list[tuple[Message, ...]], trigger: int, prices: Prices
) -> Figures:
    sizes = [tokens.request(messages) for messages in sent]
    reused = [0] + [shared_tokens(tokens, a, b) for a, b in itertools.pairwise(sent)]
    read, write = prices.cache_read or 0.0, prices.cache_write or 0.0
    cost = sum(r * read + (size - r) * write for r, size in zip(reused, sizes, strict=True))
    later = list(zip(reused[1:], sizes[1:], strict=True))
    broken = tuple(
        (step, reused[step] / sizes[step])
        for step in range(1, len(sizes))
        if reused[step] < sizes[step - 1]
    )
    return Figures(
        sent=sum(sizes),
        peak=max(sizes),
        reuse=sum(r / size for r, size in later) / len(later),
        reuse_weighted=sum(reused) / sum(sizes[1:]),
        breaks=sum(r < size for r, size in zip(reused[1:], sizes, strict=False)),
        past_trigger=max(0, max(sizes) - trigger),
        cost=cost / 1e6,
        broken=broken,
        losses=tuple(1 - r / size for r, size in later),
    )


def main() -> None:
    started = time.perf_counter()
    info = lookup(MODEL)
    prices = info.prices if info is not None and info.prices.cache_read else FALLBACK_PRICES
    tokens = Tokens()
    print(
        f"Agent loops through `Client.send`, priced as {MODEL} "
        f"(input ${prices.input}, cache read ${prices.cache_read}, cache write "
        f"${prices.cache_write} per million tokens)\n"
    )
    print(
        "| steps · window | policy | tokens sent | peak view | mean prefix reuse (by tokens) "
        "| cache breaks | past the trigger | cost | cost vs off |"
    )
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|")
    breaks: list[tuple[int, int, Figures, Figures]] = []
    for steps, window in RUNS:
        trigger = MicrocompactConfig().trigger()
        step_tokens = tokens.request(tuple(agent_session(steps))) / steps
        off: Figures | None = None
        for name, config in POLICIES.items():
            result = figures(tokens, requests(steps, window, config), trigger, prices)
            off = off or result
            off_cost = off.cost
            if name == "default":
                breaks.append((steps, window, result, off))
            past = (
                f"{result.past_trigger:,} ({result.past_trigger / step_tokens:.1f} steps)"
                if result.past_trigger
                else "never"
            )
            print(
                f"| {steps} · {window // 1000:,}k | {name} | {result.sent:,} | {result.peak:,} "
                f"| {result.reuse:.1%} ({result.reuse_weighted:.1%}) | {result.breaks} "
                f"| {past} | ${result.cost:.2f} "
                f"| {result.cost / off_cost:.2f}x |"
            )
        print(f"| | (mean step: {step_tokens:,.0f} tokens; trigger {trigger:,}) | | | | | | | |")
    print(
        "\nThe requests of the default that broke the cache (step: the share it reused), and "
        "the requests' worth of prefix not reused (the sum of 1 - reuse) before the first "
        "break and from it on, microcompaction off's alongside:\n"
    )
    for steps, window, result, off in breaks:
        listed = ", ".join(f"{step}: {reuse:.0%}" for step, reuse in result.broken)
        first = result.broken[0][0] - 1 if result.broken else len(result.losses)
        print(
            f"- {steps} steps, {window // 1000:,}k window: {listed}; not reused: "
            f"{sum(result.losses[:first]):.2f} + {sum(result.losses[first:]):.2f} "
            f"(off: {sum(off.losses[:first]):.2f} + {sum(off.losses[first:]):.2f})"
        )
    print(f"\n(wall time of the run: {time.perf_counter() - started:.0f} s)")


def depths(turns: list[int], seeds: list[int]) -> None:
    """`--depths 4 10 ... [--seeds 2026 1 2 ...]`: the default with each batch depth
    (`BATCH_ROOM_TURNS`, set for the run), on the sessions of `seeds`: how deep a batch goes
    against reuse and cost. With one session, its figures; with several, the lowest and
    highest over the sessions."""
    info = lookup(MODEL)
    prices = info.prices if info is not None and info.prices.cache_read else FALLBACK_PRICES
    tokens = Tokens()
    trigger = MicrocompactConfig().trigger()
    sessions = "the session" if len(seeds) == 1 else f"{len(seeds)} sessions (seeds {seeds})"
    print(f"Batch depths on {sessions}:\n")
    print(
        "| steps · window | batch depth | mean prefix reuse | cache breaks "
        "| reuse of the requests that broke it | cost vs off |"
    )
    print("|---|---:|---:|---:|---:|---:|")
    for steps, window in RUNS:
        offs = [
            figures(tokens, requests(steps, window, None, seed), trigger, prices) for seed in seeds
        ]
        for room in turns:
            microcompact.BATCH_ROOM_TURNS = room
            results = [
                figures(
                    tokens, requests(steps, window, MicrocompactConfig(), seed), trigger, prices
                )
                for seed in seeds
            ]
            broken = [reuse for result in results for _, reuse in result.broken]
            costs = [result.cost / off.cost for result, off in zip(results, offs, strict=True)]
            print(
                f"| {steps} · {window // 1000:,}k | room for {room} turns "
                f"| {_span([result.reuse for result in results], '.2%')} "
                f"| {_span([result.breaks for result in results], 'd')} "
                f"| {min(broken):.0%}-{max(broken):.0%} | {_span(costs, '.2f')}x |"
            )


def _span(values: list[float] | list[int], spec: str) -> str:
    """`values` as "low-high", or the one value when they are all the same."""
    low, high = format(min(values), spec), format(max(values), spec)
    return low if low == high else f"{low}-{high}"


if __name__ == "__main__":
    if sys.argv[1:2] == ["--depths"]:
        arguments = sys.argv[2:]
        at = arguments.index("--seeds") if "--seeds" in arguments else len(arguments)
        seeds = [int(seed) for seed in arguments[at + 1 :]] or [SEED]
        depths([int(room) for room in arguments[:at]], seeds)
    else:
        main()

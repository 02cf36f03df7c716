"""Who should compact a long agent session: `python benchmarks/compaction.py` prints Markdown.

One agent session of real text (`benchmarks/agent_session.py`), `STEPS` steps, run as an
agent loop through `Client.send` (each request is the transcript so far, the answers kept in
it), the window `WINDOW` declared and `RESERVE` output tokens asked. Strategies, each on the
same session:

- **native (simulated)**: the provider compacts on its servers as Anthropic documents
  `compact_20260112`: when a request's input passes the trigger, one more sampling iteration
  over the same prompt writes a summary, the answer's `compaction` block carries it, and the
  next requests send the block instead of everything before it (chatcli's `native_view`, the
  real code). The trigger is chatcli's own (`CompactionConfig.auto_compact_pct` of the room).
- **chatcli**: chatcli's own auto-compaction (`auto_compact`, the real code: verified summary
  of the middle, the last turns kept verbatim) before a request past the same trigger; the
  summary calls answered by a stand-in model with a sectioned summary of `SUMMARY_TOKENS`.
- **microcompaction alone**: chatcli's default microcompaction of old tool results, no
  compaction (the recovery levels cut when the window is full).
- the two compactions again with the default microcompaction in front of them.

Prices (the catalog's for `MODEL`, else Anthropic's list ratios): every chat prompt reads from
the cache the leading messages it shares with the previous prompt and writes the rest (a
breakpoint at its end, as Anthropic's automatic caching places it); a native compaction's
iteration reads the same prompt again (the prefix from the cache, the rest at the input price)
and writes a summary of `SUMMARY_TOKENS` at the output price, and the answer's iteration then
writes the short prompt after it; a chatcli summary call's prompt is new text (input price),
its summary at the output price. The answers' own output tokens are the same everywhere and
left out. Tokens are counted with o200k_base (as `benchmarks/cache.py`).
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.agent_session import agent_session
from benchmarks.cache import Tokens, shared_tokens

from chatcli.catalog import Prices, lookup
from chatcli.compaction import SUMMARY_SECTIONS, CompactionBreaker, auto_compact
from chatcli.config import CompactionConfig, MicrocompactConfig
from chatcli.messages import CompactionPart, Message, Role, StopReason, Usage
from chatcli.providers.base import Request, Response
from chatcli.recovery import Client

MODEL = "claude-sonnet-4-6"
STEPS, WINDOW, RESERVE = 200, 200_000, 8_000
# A compaction's summary, both ways ("a few thousand tokens", Anthropic's usage docs).
SUMMARY_TOKENS = 2_000
TRIGGER = (WINDOW - RESERVE) * CompactionConfig().auto_compact_pct // 100
FALLBACK_PRICES = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)


def summary_text(session: list[Message], tokens: Tokens) -> str:
    """A sectioned summary of about SUMMARY_TOKENS, in the session's own words."""
    prose = [m.text for m in session if m.role is Role.ASSISTANT and m.text]
    text, i = "", 0
    while tokens.counter.count([Message.assistant(text)]) < SUMMARY_TOKENS:
        section = SUMMARY_SECTIONS[i % len(SUMMARY_SECTIONS)]
        text += f"## {section}\n{prose[i % len(prose)]}\n\n"
        i += 1
    return text


@dataclass
class Stand:
    """The model of every strategy: answers "Done.", writes summaries when asked (chatcli's
    summary calls), and, `native`, compacts a prompt past TRIGGER as Anthropic documents."""

    tokens: Tokens
    summary: str
    native: bool
    context_window: int = WINDOW
    model: str = MODEL
    chat: list[tuple[Message, ...]] = field(default_factory=list)
    summary_calls: list[int] = field(default_factory=list)  # prompt tokens of each
    compactions: list[int] = field(default_factory=list)  # index in `chat` of each
    chatcli_compactions: int = 0

    @property
    def compaction_provider(self) -> str | None:
        return "anthropic" if self.native else None

    def complete(self, request: Request) -> Response:
        if request.messages[0].text.startswith("You write handoff summaries"):
            self.summary_calls.append(self.tokens.request(request.messages))
            return _answer(Message.assistant(self.summary))
        self.chat.append(request.messages)
        if not (self.native and self.tokens.request(request.messages) > TRIGGER):
            return _answer(Message.assistant("Done."))
        self.compactions.append(len(self.chat) - 1)
        block = {"type": "compaction", "content": self.summary}
        part = CompactionPart(
            provider="anthropic", model=MODEL, summary=self.summary, provider_details=block
        )
        return _answer(
            Message(role=Role.ASSISTANT, parts=Message.assistant("Done.").parts, compaction=part)
        )

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)


def _answer(message: Message) -> Response:
    return Response(message=message, stop_reason=StopReason.END_TURN, usage=Usage(1, 1))


def run(strategy: str, micro: bool, tokens: Tokens, summary: str) -> Stand:
    session = agent_session(STEPS)
    stand = Stand(tokens=tokens, summary=summary, native=strategy == "native")
    config = MicrocompactConfig() if micro else None
    client = Client(stand, microcompact=config, context_window=WINDOW)
    transcript: list[Message] = []
    base: tuple[Message, ...] = ()
    upto, start, breaker = 0, 0, CompactionBreaker()
    ends = [i + 1 for i, m in enumerate(session) if m.tool_result is not None]
    for end in ends:
        transcript += session[start:end]
        start = end
        view = base + tuple(transcript[upto:])
        if strategy == "chatcli":
            decision = auto_compact(
                stand,
                client.policy.apply_microcompaction(view),
                breaker=breaker,
                window=WINDOW,
                output_reserve=RESERVE,
            )
            breaker = decision.breaker
            if decision.result is not None:
                base, upto = decision.result.messages, len(transcript)
                view = base
                stand.chatcli_compactions += 1
        transcript.append(client.send(view, max_tokens=RESERVE).message)
    return stand


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    cost: float
    compaction_cost: float
    peak: int
    compactions: int
    sent: int


def priced(stand: Stand, tokens: Tokens, prices: Prices) -> Figures:
    read, write = prices.cache_read or 0.0, prices.cache_write or 0.0
    inp, out = prices.input or 0.0, prices.output or 0.0
    cost = compaction = 0.0
    previous: tuple[Message, ...] = ()
    for index, prompt in enumerate(stand.chat):
        size = tokens.request(prompt)
        reused = shared_tokens(tokens, previous, prompt)
        cost += reused * read + (size - reused) * write
        previous = prompt
        if index in stand.compactions:  # the summary iteration, then the answer's
            compaction += reused * read + (size - reused) * inp + SUMMARY_TOKENS * out
            systems = tuple(m for m in prompt if m.role is Role.SYSTEM)
            block = Message(role=Role.ASSISTANT, compaction=_part(stand))
            previous = (*systems, block)
            cost += tokens.request(previous) * write
    compaction += sum(stand.summary_calls) * inp + len(stand.summary_calls) * SUMMARY_TOKENS * out
    return Figures(
        cost=(cost + compaction) / 1e6,
        compaction_cost=compaction / 1e6,
        peak=max(tokens.request(p) for p in stand.chat),
        compactions=len(stand.compactions) + stand.chatcli_compactions,
        sent=sum(tokens.request(p) for p in stand.chat),
    )


def _part(stand: Stand) -> CompactionPart:
    block = {"type": "compaction", "content": stand.summary}
    return CompactionPart(
        provider="anthropic", model=MODEL, summary=stand.summary, provider_details=block
    )


def main() -> None:
    started = time.perf_counter()
    info = lookup(MODEL)
    prices = info.prices if info is not None and info.prices.cache_read else FALLBACK_PRICES
    tokens = Tokens()
    summary = summary_text(agent_session(STEPS), tokens)
    print(
        f"A {STEPS}-step agent session, {WINDOW // 1000:,}k window, priced as "
        f"{MODEL} (input ${prices.input}, output ${prices.output}, cache read "
        f"${prices.cache_read}, cache write ${prices.cache_write} per million tokens)\n"
    )
    print("| strategy | compactions | tokens sent | peak view | compaction cost | total cost |")
    print("|---|---:|---:|---:|---:|---:|")
    rows = (
        ("native (simulated)", "native", False),
        ("chatcli's own compaction", "chatcli", False),
        ("microcompaction alone", "none", True),
        ("native + microcompaction", "native", True),
        ("chatcli's own + microcompaction", "chatcli", True),
    )
    for label, strategy, micro in rows:
        f = priced(run(strategy, micro, tokens, summary), tokens, prices)
        print(
            f"| {label} | {f.compactions} | {f.sent:,} | {f.peak:,} | ${f.compaction_cost:.2f} "
            f"| ${f.cost:.2f} |"
        )
    print(
        f"\n(trigger {TRIGGER:,} tokens; summary {SUMMARY_TOKENS:,} tokens; "
        f"{time.perf_counter() - started:.0f} s)"
    )


if __name__ == "__main__":
    main()

"""Who should compact a long agent session, and what a compaction call costs on the prompt
cache: `python benchmarks/compaction.py` prints Markdown.

**Who compacts.** One agent session of real text (`benchmarks/agent_session.py`), `STEPS`
steps, run as an agent loop through `Client.send` (each request is the transcript so far, the
answers kept in it), the window `WINDOW` declared and `RESERVE` output tokens asked.
Strategies, each on the same session:

- **native (simulated)**: the provider compacts on its servers as Anthropic documents
  `compact_20260112`: when a request's input passes the trigger, one more sampling iteration
  over the same prompt writes a summary, the answer's `compaction` block carries it, and the
  next requests send the block instead of everything before it (chatcli's `native_view`, the
  real code). The trigger is chatcli's own (`CompactionConfig.auto_compact_pct` of the room).
- **chatcli**: chatcli's own auto-compaction (`auto_compact`, the real code: verified summary
  of the middle, the last turns kept verbatim) before a request past the same trigger, its
  summary asked for after the conversation's previous request (`Client.last_sent`:
  `chatcli.compaction.warm`); and the same with the rendered-text request instead (no
  previous request given: the summariser's prompt, then the conversation as text), as before
  the warm request. The summary calls are answered by a stand-in model with a sectioned
  summary of `SUMMARY_TOKENS`.
- **microcompaction alone**: chatcli's default microcompaction of old tool results, no
  compaction (the recovery levels cut when the window is full).
- the two compactions again with the default microcompaction in front of them.

Prices (the catalog's for `MODEL`, else Anthropic's list ratios): every chat prompt reads from
the cache the leading messages it shares with the previous prompt and writes the rest (a
breakpoint at its end, as Anthropic's automatic caching places it); a native compaction's
iteration reads the same prompt again (the prefix from the cache, the rest at the input price)
and writes a summary of `SUMMARY_TOKENS` at the output price, and the answer's iteration then
writes the short prompt after it. A warm summary call reads what it shares with the previous
chat prompt from the cache and pays the rest at the input price (its breakpoint is where the
previous request's was: it writes nothing); a rendered one is new text, written to the cache
(the Anthropic adapter's breakpoints are at its end); both write their summary at the output
price. "compaction input from the cache" is the share of the compaction calls' input a prefix
cache serves (for the native iteration, the prefix its prompt shares with the previous one).
The answers' own output tokens are the same everywhere and left out. Tokens are counted with
o200k_base (as `benchmarks/cache.py`).

**The compaction call on the wire.** For three conversations, the compaction call as the
adapters send it: the conversation's last request is sent by the Anthropic adapter (`MODEL`)
and by the OpenAI one (`OPENAI_MODEL`, Chat Completions) to a local replay server
(`tests/replay.py`, answering with recorded bodies, the summary's text put in), then the
compaction of the conversation with that request's answer: once on the warm prefix, once with
the rendered request. The conversations: a 60-turn chat of that prose (`chat_session`), a
60-step agent session compacted with /compact at its end, and every auto-compaction of the
session above (chatcli's own, no microcompaction). Each body the server received is cut into
its prompt's units in the order the provider caches them (Anthropic: the tools, the system
blocks, then each message's blocks with their role; OpenAI: the answer's schema, the tools,
then each message), units compared by their JSON: the prefix a cache would serve is the run
of leading units equal to the previous body's, counted with o200k_base over each unit's
strings (its text, tool input and names). Cost, at the catalog's prices: Anthropic, the
served prefix at the cache-read price, the rest at the cache-write price when the body puts a
breakpoint at its end (the rendered request) and at the input price when not (the warm one);
OpenAI, the served prefix at the cached-input price, the rest at the input price (the
128-token granularity of OpenAI's cache is left out); both, `SUMMARY_TOKENS` of output per
call.
"""

from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.agent_session import InstantProvider, agent_session, chat_session
from benchmarks.cache import Tokens, shared_tokens
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_anthropic_adapter import DOCS_TOOL_USE_RESPONSE
from tests.test_openai_adapter import CHAT_TEXT

from chatcli.catalog import Prices, lookup
from chatcli.compaction import SUMMARY_SECTIONS, CompactionBreaker, PreviousRequest, auto_compact
from chatcli.compaction.drive import drive
from chatcli.compaction.plan import Plan, make_plan
from chatcli.compaction.prompt import SYSTEM_PROMPT, summary_turn
from chatcli.compaction.run import compaction_steps
from chatcli.config import CompactionConfig, MicrocompactConfig
from chatcli.messages import CompactionPart, Message, Role, StopReason, Usage
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import Provider, Request, Response, ToolSpec
from chatcli.providers.openai import OpenAI
from chatcli.recovery import Client

MODEL = "claude-sonnet-4-6"
OPENAI_MODEL = "gpt-4.1"
STEPS, WINDOW, RESERVE = 200, 200_000, 8_000
# A compaction's summary, both ways ("a few thousand tokens", Anthropic's usage docs).
SUMMARY_TOKENS = 2_000
TRIGGER = (WINDOW - RESERVE) * CompactionConfig().auto_compact_pct // 100
FALLBACK_PRICES = Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75)
READ_FILE = ToolSpec(
    name="read_file",
    description="Read lines of a file of the repository.",
    parameters={
        "type": "object",
        "properties": {"path": {"type": "string"}, "line": {"type": "integer"}},
        "required": ["path"],
    },
)
WARM_TURN = summary_turn(None, structured=False)  # the stand-in is not structured


def summary_text(session: list[Message], tokens: Tokens) -> str:
    """A sectioned summary of about SUMMARY_TOKENS, in the session's own words."""
    prose = [m.text for m in session if m.role is Role.ASSISTANT and m.text]
    text, i = "", 0
    while tokens.counter.count([Message.assistant(text)]) < SUMMARY_TOKENS:
        section = SUMMARY_SECTIONS[i % len(SUMMARY_SECTIONS)]
        text += f"## {section}\n{prose[i % len(prose)]}\n\n"
        i += 1
    return text


@dataclass(frozen=True, slots=True, kw_only=True)
class Point:
    """One chatcli compaction of the run: the conversation's previous request, what the
    conversation added since, and the messages compacted."""

    previous: PreviousRequest
    messages: tuple[Message, ...]


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
    # (prompt tokens, tokens shared with the last chat prompt, warm) of each summary call
    summary_calls: list[tuple[int, int, bool]] = field(default_factory=list)
    compactions: list[int] = field(default_factory=list)  # index in `chat` of each
    points: list[Point] = field(default_factory=list)  # chatcli's compactions

    @property
    def compaction_provider(self) -> str | None:
        return "anthropic" if self.native else None

    def complete(self, request: Request) -> Response:
        warm = request.messages[-1] == WARM_TURN
        if warm or request.messages[0].text == SYSTEM_PROMPT:
            reused = shared_tokens(self.tokens, self.chat[-1], request.messages)
            self.summary_calls.append((self.tokens.request(request.messages), reused, warm))
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


def run(strategy: str, micro: bool, tokens: Tokens, summary: str, *, warm: bool = True) -> Stand:
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
            sent = client.last_sent
            previous = sent.previous_for(view) if sent is not None and warm else None
            compacted = client.policy.apply_microcompaction(view)
            decision = auto_compact(
                stand,
                compacted,
                breaker=breaker,
                window=WINDOW,
                output_reserve=RESERVE,
                previous=previous,
            )
            breaker = decision.breaker
            if decision.result is not None:
                if previous is not None:
                    stand.points.append(Point(previous=previous, messages=compacted))
                base, upto = decision.result.messages, len(transcript)
                view = base
        transcript.append(client.send(view, max_tokens=RESERVE, tools=(READ_FILE,)).message)
    return stand


@dataclass(frozen=True, slots=True, kw_only=True)
class Figures:
    cost: float
    compaction_cost: float
    peak: int
    compactions: int
    sent: int
    cached_share: float | None  # of the compaction calls' input (None: no call)


def priced(stand: Stand, tokens: Tokens, prices: Prices) -> Figures:
    read, write = prices.cache_read or 0.0, prices.cache_write or 0.0
    inp, out = prices.input or 0.0, prices.output or 0.0
    cost = compaction = 0.0
    served = read_in = 0
    previous: tuple[Message, ...] = ()
    for index, prompt in enumerate(stand.chat):
        size = tokens.request(prompt)
        reused = shared_tokens(tokens, previous, prompt)
        cost += reused * read + (size - reused) * write
        previous = prompt
        if index in stand.compactions:  # the summary iteration, then the answer's
            compaction += reused * read + (size - reused) * inp + SUMMARY_TOKENS * out
            served, read_in = served + reused, read_in + size
            systems = tuple(m for m in prompt if m.role is Role.SYSTEM)
            block = Message(role=Role.ASSISTANT, compaction=_part(stand))
            previous = (*systems, block)
            cost += tokens.request(previous) * write
    for size, reused, warm in stand.summary_calls:
        compaction += reused * read + (size - reused) * (inp if warm else write)
        compaction += SUMMARY_TOKENS * out
        served, read_in = served + reused, read_in + size
    return Figures(
        cost=(cost + compaction) / 1e6,
        compaction_cost=compaction / 1e6,
        peak=max(tokens.request(p) for p in stand.chat),
        compactions=len(stand.compactions) + len(stand.summary_calls),
        sent=sum(tokens.request(p) for p in stand.chat),
        cached_share=served / read_in if read_in else None,
    )


def _part(stand: Stand) -> CompactionPart:
    block = {"type": "compaction", "content": stand.summary}
    return CompactionPart(
        provider="anthropic", model=MODEL, summary=stand.summary, provider_details=block
    )


# -- the compaction call on the wire ------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """A conversation to compact, at one or more points."""

    name: str
    points: tuple[Point, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Wire:
    """What one way of asking for the summaries sent, over a case's points."""

    calls: int = 0
    warm: int = 0  # compactions asked on the warm prefix
    input: int = 0  # tokens
    served: int = 0  # tokens a prefix cache serves
    cost: float = 0.0  # USD

    def __add__(self, other: Wire) -> Wire:
        return Wire(
            calls=self.calls + other.calls,
            warm=self.warm + other.warm,
            input=self.input + other.input,
            served=self.served + other.served,
            cost=self.cost + other.cost,
        )

    @property
    def share(self) -> str:
        return f"{self.served / self.input:.1%}" if self.input else "-"


@dataclass(frozen=True, slots=True, kw_only=True)
class Api:
    """An adapter to send the bodies with, the recorded body of its answers, its prices."""

    name: str
    model: str
    connect: Callable[[str], Any]
    answer: Callable[[str], dict[str, Any]]  # a recorded body, its text replaced
    units: Callable[[dict[str, Any]], list[Any]]
    prices: Prices


def sent_point(conversation: list[Message], tools: tuple[ToolSpec, ...]) -> Point:
    """`conversation` sent through `Client` once, and its compaction with the answer."""
    client = Client(InstantProvider(context_window=WINDOW, requests=None))
    reply = client.send(conversation, max_tokens=RESERVE, tools=tools)
    messages = (*conversation, reply.message)
    assert client.last_sent is not None
    previous = client.last_sent.previous_for(messages)
    assert previous is not None
    return Point(previous=previous, messages=messages)


def anthropic_units(body: dict[str, Any]) -> list[Any]:
    units: list[Any] = [["tools", body.get("tools")]]
    units += [["system", block] for block in body.get("system", [])]
    units += [[m["role"], block] for m in body["messages"] for block in m["content"]]
    return units


def openai_units(body: dict[str, Any]) -> list[Any]:
    units: list[Any] = [["response_format", body.get("response_format")]]
    units += [["tools", body.get("tools")]]
    units += [[m["role"], m] for m in body["messages"]]
    return units


def anthropic_answer(text: str) -> dict[str, Any]:
    return {**DOCS_TOOL_USE_RESPONSE, "stop_reason": "end_turn", "content": [_text(text)]}


def openai_answer(text: str) -> dict[str, Any]:
    body: dict[str, Any] = json.loads(json.dumps(CHAT_TEXT))
    body["choices"][0]["message"]["content"] = text
    return body


def _text(text: str) -> dict[str, str]:
    return {"type": "text", "text": text}


class UnitTokens:
    """o200k tokens of a prompt unit's strings, each distinct unit counted once."""

    def __init__(self, tokens: Tokens) -> None:
        self.encoding = tokens.counter.encoding
        self.known: dict[str, int] = {}

    def of(self, unit: str) -> int:
        if unit not in self.known:
            strings = " ".join(_strings(json.loads(unit)))
            self.known[unit] = len(self.encoding.encode_ordinary(strings))
        return self.known[unit]


def _strings(value: Any) -> Iterator[str]:
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for key, item in value.items():
            if key != "cache_control":
                yield from _strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from _strings(item)


def measured(api: Api, point: Point, summary: str, counted: UnitTokens) -> tuple[Wire, ...]:
    """(rendered, warm, chatcli's choice): the compaction of `point` through `api`'s adapter
    with the rendered request, on the warm prefix whatever it costs, and as chatcli chooses."""
    with replay_server() as server:
        adapter = api.connect(server.url)
        server.add(Scripted(body=api.answer("Done.")))
        adapter.complete(point.previous.request)
        before = _units(api, server, 0)
        wires = []
        for plan in _plans(adapter, point):
            first = len(server.requests)
            server.queue.clear()
            server.add(*(Scripted(body=api.answer(summary)) for _ in range(20)))
            result = drive(compaction_steps(point.messages, plan), adapter, time.sleep)
            bodies = [_units(api, server, i) for i in range(first, len(server.requests))]
            wires.append(_wire(api, before, bodies, counted, warm=result.report.warm))
        adapter.close()
    return tuple(wires)


def _plans(adapter: Provider, point: Point) -> tuple[Plan, ...]:
    """The plans of the rendered request, the warm one taken whatever it costs, and
    chatcli's own choice (what `compact` makes)."""
    chosen = make_plan(
        adapter, None, None, None, None, WINDOW, RESERVE, None, False, None, previous=point.previous
    )
    rendered = replace(chosen, previous=None)
    return rendered, replace(chosen, cache_read_ratio=None), chosen


def _units(api: Api, server: ReplayServer, index: int) -> list[str]:
    body = server.requests[index].json()
    return [json.dumps(u, sort_keys=True) for u in api.units(body) if u[-1] is not None]


def _wire(
    api: Api, before: list[str], bodies: list[list[str]], counted: UnitTokens, *, warm: bool
) -> Wire:
    """The calls of `bodies` against the previous body's units `before`, priced."""
    total = Wire(warm=int(warm))
    prices = api.prices
    read, inp = prices.cache_read or 0.0, prices.input or 0.0
    write = prices.cache_write or inp
    for units in bodies:
        size = sum(counted.of(u) for u in units)
        shared = 0
        for old, new in zip(before, units, strict=False):
            if old != new:
                break
            shared += 1
        served = sum(counted.of(u) for u in units[:shared])
        written = api.name.startswith("Anthropic") and '"cache_control"' in units[-1]
        usd = served * read + (size - served) * (write if written else inp)
        usd += SUMMARY_TOKENS * (prices.output or 0.0)
        total += Wire(calls=1, input=size, served=served, cost=usd / 1e6)
    return total


def apis() -> tuple[Api, ...]:
    anthropic_prices = _prices(MODEL)
    openai_prices = _prices(OPENAI_MODEL)
    return (
        Api(
            name=f"Anthropic ({MODEL})",
            model=MODEL,
            connect=lambda url: Anthropic(MODEL, api_key="sk-ant-benchmark", base_url=url),
            answer=anthropic_answer,
            units=anthropic_units,
            prices=anthropic_prices,
        ),
        Api(
            name=f"OpenAI ({OPENAI_MODEL})",
            model=OPENAI_MODEL,
            connect=lambda url: OpenAI(
                OPENAI_MODEL, api_key="sk-benchmark", base_url=url + "/v1", environ={}
            ),
            answer=openai_answer,
            units=openai_units,
            prices=openai_prices,
        ),
    )


def _prices(model: str) -> Prices:
    info = lookup(model)
    return info.prices if info is not None and info.prices.cache_read else FALLBACK_PRICES


def wire_table(cases: tuple[Case, ...], summary: str, tokens: Tokens) -> None:
    counted = UnitTokens(tokens)
    print(
        "| conversation | API | rendered text: input tokens, cost | warm prefix: input tokens, "
        "served from the cache, cost | chatcli: compactions on the warm prefix, cost |"
    )
    print("|---|---|---:|---:|---:|")
    for case in cases:
        for api in apis():
            rendered, warm, chosen = Wire(), Wire(), Wire()
            for point in case.points:
                r, w, c = measured(api, point, summary, counted)
                rendered, warm, chosen = rendered + r, warm + w, chosen + c
            print(
                f"| {case.name} | {api.name} | {rendered.input:,}, ${rendered.cost:.3f} "
                f"| {warm.input:,}, {warm.served:,} ({warm.share}), ${warm.cost:.3f} "
                f"| {chosen.warm} of {len(case.points)}, ${chosen.cost:.3f} |"
            )


def main() -> None:
    started = time.perf_counter()
    prices = _prices(MODEL)
    tokens = Tokens()
    summary = summary_text(agent_session(STEPS), tokens)
    print(
        f"A {STEPS}-step agent session, {WINDOW // 1000:,}k window, priced as "
        f"{MODEL} (input ${prices.input}, output ${prices.output}, cache read "
        f"${prices.cache_read}, cache write ${prices.cache_write} per million tokens)\n"
    )
    print(
        "| strategy | compactions | tokens sent | peak view | compaction input from the "
        "cache | compaction cost | total cost |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|")
    rows = (
        ("native (simulated)", "native", False, True),
        ("chatcli's own compaction", "chatcli", False, True),
        ("chatcli's own, rendered text", "chatcli", False, False),
        ("microcompaction alone", "none", True, True),
        ("native + microcompaction", "native", True, True),
        ("chatcli's own + microcompaction", "chatcli", True, True),
    )
    points: tuple[Point, ...] = ()
    for label, strategy, micro, warm in rows:
        stand = run(strategy, micro, tokens, summary, warm=warm)
        if strategy == "chatcli" and not micro and warm:
            points = tuple(stand.points)
        f = priced(stand, tokens, prices)
        share = "-" if f.cached_share is None else f"{f.cached_share:.1%}"
        print(
            f"| {label} | {f.compactions} | {f.sent:,} | {f.peak:,} | {share} "
            f"| ${f.compaction_cost:.2f} | ${f.cost:.2f} |"
        )
    print(
        f"\n(trigger {TRIGGER:,} tokens; summary {SUMMARY_TOKENS:,} tokens; "
        f"{time.perf_counter() - started:.0f} s)\n"
    )
    print("The compaction call as the adapters send it (o200k_base tokens of the bodies)\n")
    cases = (
        Case(name="60-turn chat", points=(sent_point(chat_session(60), ()),)),
        Case(
            name="60-step agent session, /compact",
            points=(sent_point(agent_session(60), (READ_FILE,)),),
        ),
        Case(name=f"{STEPS}-step agent session, its auto-compactions", points=points),
    )
    wire_table(cases, summary, tokens)
    print(f"\n({time.perf_counter() - started:.0f} s)")


if __name__ == "__main__":
    main()

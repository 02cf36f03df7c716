"""The offline demo: a scripted agent session on a real local engine with a small window.

`chatcli demo` runs this script on the embedded `LlamaCpp` provider (no API key, no network
once the model is there) with a small window, so that every mechanism of chatcli happens for
real within a few turns: the tool-result budget, max_tokens escalation with continuation,
context overflow rejected by the engine and recovered at each level, pre-flight recovery,
/compact and its checks, and the cost table, all saved in the session database.

The model (`DemoModel`) is by default SmolLM2-135M-Instruct, a real but very small model
(`chatcli.chat.localmodel`), with a 512-token window; `--model tiny` is
`chatcli.chat.tinymodel`'s random-weight model (nonsense by design, never stopping on its
own) with 1,024 tokens, as its tokenizer takes about one token per character of code; any
other GGUF file runs with 1,024. The agent's tool calls are scripted (a model that small
cannot choose tools); the model's answers, the engine's token counts and its overflow errors
are real.

The script is data (`SCRIPT`); `run_step` plays one step; the CLI only renders.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from chatcli.chat.context import ContextReport
from chatcli.chat.localmodel import SMOLLM2, sampling_for
from chatcli.chat.session import ChatSession, Turn
from chatcli.compaction import CompactionResult
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.cost import CallKind
from chatcli.errors import ChatcliError
from chatcli.events import Event, LevelApplied
from chatcli.messages import Message, ToolCall
from chatcli.providers.registry import create_provider, model_info
from chatcli.store import SessionStore

__all__ = [
    "DEMO_MAX_TOKENS",
    "DEMO_N_CTX",
    "DEMO_RECOVERY",
    "NONSENSE_NOTICE",
    "SCRIPT",
    "SMOLLM2_NOTICE",
    "SMOLLM2_N_CTX",
    "DemoModel",
    "Step",
    "StepOutcome",
    "demo_model_path",
    "open_demo_session",
    "run_step",
    "smollm2_demo",
    "tiny_demo",
    "view_fill",
]

# The window of the tiny model and of a GGUF file given with --model: small, so a few tool
# results fill it (the tiny model's tokenizer takes about one token per char of code or logs,
# and a tool call costs dozens of tokens of template).
DEMO_N_CTX = 1024
# SmolLM2's tokenizer packs the script's text about twice as densely: half the window, the
# same overflows. (llama.cpp rounds a window up to a multiple of 256 tokens.)
SMOLLM2_N_CTX = 512
# Small, so that answers stop at the limit (the tiny model never ends an answer on its own;
# the small real one does, after a sentence or two).
DEMO_MAX_TOKENS = 16
# The normal limits (20,000 / 200,000 chars, keep 10) are sized for windows of 100k+ tokens;
# scaled to a 1,024-token window they are these.
DEMO_RECOVERY = RecoveryConfig(
    tool_result_max_chars=240,
    tool_result_budget_chars=360,
    emergency_keep_messages=8,
    max_token_escalations=2,
)
# The summary call needs room for its instructions and the history: the summariser is the
# same model with a larger window (both models were made for one).
SUMMARIZER_N_CTX = 4096
TINY_MODEL_NAME = "chatcli-tiny.gguf"

NONSENSE_NOTICE = (
    "--model tiny: chatcli's tiny test model: random weights, 2 layers, under 1 MB. Its "
    "answers are NONSENSE by design and never end on their own. It is a real model for a "
    "real engine (llama.cpp) with a real tokenizer and a real 1,024-token window: the engine "
    "really rejects prompts that do not fit and really stops answers at max_tokens. Without "
    "--model the demo runs a real small model, SmolLM2-135M-Instruct."
)
SMOLLM2_NOTICE = (
    f"The demo runs {SMOLLM2.name} (Hugging Face, Apache-2.0): a real model, but a very "
    "small one (135 million parameters, 4-bit, 100 MB), in llama.cpp in this process, with a "
    f"{SMOLLM2_N_CTX}-token window so that every recovery happens within a few turns. Expect "
    "short English answers that are often beside the point, repeat the question or echo "
    "what a tool returned, and summaries that chatcli's checks may refuse: what to watch is "
    "chatcli at work. The engine, its tokenizer, its window and its errors are real. "
    "`chatcli demo --model any.gguf` runs the same script on a bigger model."
)


@dataclass(frozen=True, slots=True, kw_only=True)
class DemoModel:
    """What the demo runs on: a GGUF file, the window it gets, and what to expect of it
    (shown first; None: nothing to say). A known model file runs with its makers' sampling
    (`chatcli.chat.localmodel.sampling_for`)."""

    path: Path
    n_ctx: int
    notice: str | None = None


def smollm2_demo(path: Path, n_ctx: int | None = None) -> DemoModel:
    """SmolLM2-135M-Instruct at `path` (fetched by `chatcli.chat.localmodel.fetch_model`)."""
    return DemoModel(path=path, n_ctx=n_ctx or SMOLLM2_N_CTX, notice=SMOLLM2_NOTICE)


def tiny_demo(cache_dir: Path, n_ctx: int | None = None) -> DemoModel:
    """The tiny random model, written into `cache_dir` first if it is not there."""
    return DemoModel(
        path=demo_model_path(cache_dir), n_ctx=n_ctx or DEMO_N_CTX, notice=NONSENSE_NOTICE
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """One step of the script: a user message with scripted tool calls, then the model's
    answer; or (`compact`) a /compact. `predictive` False sends every level in turn;
    `escalations` is the step's CHATCLI_MAX_TOKEN_ESCALATIONS (0 after the first step keeps
    the screen short: each answer then stops at the first limit)."""

    title: str
    explain: str
    user: str | None = None
    tools: tuple[tuple[ToolCall, str], ...] = ()
    compact: bool = False
    predictive: bool = False
    escalations: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StepOutcome:
    """What a step did: the turn (or the error that ended it), a compaction, the context."""

    step: Step
    turn: Turn | None = None
    error: str | None = None
    compaction: CompactionResult | None = None
    context: ContextReport


def demo_model_path(cache_dir: Path) -> Path:
    """The tiny model in `cache_dir`, written there first if it is not (deterministic)."""
    from chatcli.chat.tinymodel import write_tiny_model

    path = cache_dir / TINY_MODEL_NAME
    if not path.is_file():
        cache_dir.mkdir(parents=True, exist_ok=True)
        write_tiny_model(path)
    return path


def open_demo_session(store: SessionStore, demo: DemoModel) -> ChatSession:
    """A new session on the embedded engine, with the demo's limits. Loads the model (twice:
    the summariser has a larger window)."""
    model = str(demo.path)
    engine: dict[str, Any] = {"seed": 1, **sampling_for(model)}
    provider = create_provider("llama-cpp", model=model, context_window=demo.n_ctx, **engine)
    summarizer = create_provider(
        "llama-cpp", model=model, context_window=max(demo.n_ctx, SUMMARIZER_N_CTX), **engine
    )
    session = ChatSession.open(
        store,
        provider,
        provider_name="llama-cpp",
        model=model,
        context_window=demo.n_ctx,
        model_info=model_info("llama-cpp", model, provider),
        max_tokens=DEMO_MAX_TOKENS,
        recovery=DEMO_RECOVERY,
        compaction=CompactionConfig(keep_turns=1, summary_tokens=64),
        auto_compaction=False,
        summarizer=summarizer,
    )
    session.append((Message.system(_SYSTEM),))
    return session


def run_step(session: ChatSession, step: Step, on_event: Callable[[Event], None]) -> StepOutcome:
    """Play `step` on `session` (everything is stored as it happens)."""
    if step.compact:
        return _compact_step(session, step)
    session.max_tokens, session.predictive = DEMO_MAX_TOKENS, step.predictive
    session.recovery = replace(DEMO_RECOVERY, max_token_escalations=step.escalations)
    messages: list[Message] = []
    if step.user is not None:
        messages.append(Message.user(step.user))
    for call, result in step.tools:
        messages += [Message.assistant(tool_calls=(call,)), Message.tool(call.id, result)]
    session.append(messages)
    try:
        turn = session.send(None, on_event=on_event)
    except ChatcliError as exc:
        return StepOutcome(step=step, error=str(exc), context=session.context_report())
    return StepOutcome(step=step, turn=turn, context=session.context_report())


def view_fill(turn: Turn, window: int, max_tokens: int) -> str | None:
    """How full the view a recovery level made is, as the engine counted it (the prompt tokens
    of the call that answered it) against the room (window minus the output asked for); None
    when no level was applied or the call reported no usage."""
    if not any(isinstance(event, LevelApplied) for event in turn.reply.events):
        return None
    answered = next((call for call in turn.calls if call.kind is CallKind.ANSWER), None)
    if answered is None or not answered.usage.prompt_tokens:
        return None
    tokens, room = answered.usage.prompt_tokens, window - max_tokens
    return (
        f"recovered view: {tokens:,} tokens, {tokens / room:.0%} of the room "
        f"({window:,}-token window - {max_tokens:,} output)"
    )


def _compact_step(session: ChatSession, step: Step) -> StepOutcome:
    try:
        result = session.compact(step.user)
    except ChatcliError as exc:
        return StepOutcome(step=step, error=str(exc), context=session.context_report())
    return StepOutcome(step=step, compaction=result, context=session.context_report())


# --------------------------------------------------------------------------- the script

_SYSTEM = (
    "You are a coding agent. Use the tools to inspect the project, then explain what you "
    "found. Never change files without asking."
)


def _call(number: int, name: str, **arguments: str) -> ToolCall:
    return ToolCall(id=f"call_{number}", name=name, arguments=arguments)


def _build_log(lines: int) -> str:
    body = [f"12:{i // 60:02d}:{i % 60:02d} INFO compiled module_{i}.py" for i in range(lines)]
    body.insert(lines // 2, "12:00:31 ERROR test_config: expected 'utf-8', got 'latin-1'")
    return "\n".join(body)


def _source(lines: int) -> str:
    return "\n".join(f"def read_{i}(path):\n    return open(path).read()" for i in range(lines))


def _grep(hits: int) -> str:
    return "\n".join(f"src/app/module_{i}.py:{i + 3}: open(path)" for i in range(hits))


_KEEP = DEMO_RECOVERY.emergency_keep_messages
_TRACEBACK_REQUEST = """Here is the traceback from the CI run:

Traceback (most recent call last):
  File "/ci/build/src/app/config.py", line 42, in load_config
    text = open(path).read()
  File "/usr/lib/python3.11/encodings/ascii.py", line 26, in decode
    return codecs.ascii_decode(input, self.errors)[0]
UnicodeDecodeError: 'ascii' codec can't decode byte 0xc3 in position 118

Write the fix plan: which modules read files, which encoding each one needs, why only the \
CI machine fails (its locale is C), and which tests would catch it next time."""

SCRIPT: tuple[Step, ...] = (
    Step(
        title="1. A tool result over budget, an answer over max_tokens",
        explain="The agent reads a 2,500-char build log. The tool-result budget sends only "
        f"{DEMO_RECOVERY.tool_result_max_chars} chars of it (head + tail; the full log stays "
        f"in the transcript). An answer stopped at max_tokens={DEMO_MAX_TOKENS} is continued: "
        "chatcli doubles the limit and asks the model to go on from where it stopped (twice "
        "at most), and stitches the pieces into one answer; one still cut is flagged as "
        "partial.",
        user="The nightly build fails. Read the log and explain step by step what went wrong.",
        tools=((_call(1, "read_file", path="build.log"), _build_log(70)),),
        escalations=DEMO_RECOVERY.max_token_escalations,
    ),
    Step(
        title="2. Context overflow: level 1 (aggressive budget)",
        explain="Two more large tool results. The prompt no longer fits the window and "
        "llama.cpp rejects it. Level 1 halves the tool-result budget for this one request, "
        "and the retry usually fits (when it does not, level 2 follows). From here on answers "
        "stop at the first limit, without escalation, to keep the screen short.",
        user="Look at the config loader and the tests.",
        tools=(
            (_call(2, "read_file", path="src/app/config.py"), _source(20)),
            (_call(3, "run_tests", path="tests/test_config.py"), _build_log(40)),
        ),
    ),
    Step(
        title="3. Context overflow: level 2 (emergency truncation)",
        explain="Many tool results: budgets alone cannot help any more. Level 2 keeps the "
        "system prompt and the newest messages that fit 75% of the room the window leaves "
        f"(never fewer than the last {_KEEP} when they fit), with the latest request pinned "
        "in front and the session's first request kept when it is small. The older ones "
        "leave the working view, not the transcript.",
        user="Where else is open() called without an encoding?",
        tools=tuple(
            (_call(4 + i, "grep", pattern="open(", path=f"src/app/part{i}"), _grep(5))
            for i in range(3)
        ),
    ),
    Step(
        title="4. Context overflow: a longer request, recovered again",
        explain="A long request and more results. Level 2 keeps the newest messages that fit "
        "75% of the room, which usually suffices; when its view is still rejected, level 3 "
        "keeps what fits 40% of the room and tells the model the context was compacted. The "
        "latest request is kept (cut, head + tail, if it alone is too long) so the task "
        "survives.",
        user=_TRACEBACK_REQUEST,
        tools=tuple(
            (_call(7 + i, "read_file", path=f"src/app/io{i}.py"), _source(6)) for i in range(4)
        ),
    ),
    Step(
        title="5. Pre-flight: recovered before sending",
        explain="The cut of step 4 is kept: the next requests start with the same messages "
        "(a provider's prompt cache reuses them) and grow after them. More results fill the "
        "window again. In the normal (predictive) mode chatcli estimates the prompt before "
        "sending, calibrated on this engine's own token counts. It sees that the prompt "
        "cannot fit, skips the levels predicted not to fit and sends the first one that "
        "does: no wasted call.",
        user="Summarise what you found.",
        tools=tuple(
            (_call(11 + i, "read_file", path=f"src/app/cli{i}.py"), _source(6)) for i in range(4)
        ),
        predictive=True,
    ),
    Step(
        title="6. /compact: a summary replaces the older history",
        explain="/compact asks the model for a handoff summary of the older history, which "
        "then replaces it in the working view (the transcript keeps everything). The "
        "summary is checked first: it must be a handoff (its sections present), the user's "
        "explicit instructions and latest request must survive it, and whatever it lost is "
        "pinned verbatim after it. An unusable summary leaves the session exactly as it was, "
        "its cost on its own line. A model as small as these often writes one (the random "
        "model always does); a larger model's summary replaces the older history.",
        user="keep the encoding findings",
        compact=True,
    ),
)

"""Agent sessions of real text for the benchmarks, and a provider that answers at once.

An agent session is what a coding agent's transcript looks like: a system prompt, the user's
task, then turns of (assistant message with a `read_file` call, the tool result), with a user
message now and then. The text is real: tool results are Python standard-library sources (a
window of up to `MAX_RESULT_LINES` lines of one file, as agents read files), the prose is
sentences from the same files' docstrings. Everything is chosen by a seeded random generator
from the sorted file list, so a session is the same on every run of the same Python.

A request session is the other common shape, one user request per tool call: each turn is the
answer to the previous request, the user's next request, the assistant's call and its result,
a few kilobytes of one file (`request_turn`). `with_compaction` gives a session a provider's
own compaction (Anthropic's `compaction` block) in one of its answers.

`chat_session` is a plain chat of the same prose: questions of two or three sentences, answers
of seven to twelve.

`InstantProvider` answers every request at once with a fixed short answer, so a benchmark
through `Client.send` measures chatcli's own work, and records each request it was sent.
"""

from __future__ import annotations

import ast
import random
import sysconfig
from dataclasses import dataclass, field, replace
from functools import cache
from pathlib import Path

from chatcli.messages import CompactionPart, Message, Role, StopReason, ToolCall, Usage
from chatcli.providers.base import Request, Response

__all__ = [
    "InstantProvider",
    "agent_session",
    "agent_turn",
    "chat_session",
    "request_session",
    "request_turn",
    "stdlib_files",
    "with_compaction",
]

# Agents read files in windows (Claude Code reads 2,000 lines; most reads are far shorter).
MAX_RESULT_LINES = 700
# A request session's tool results: a few kilobytes each (whole lines, at least this many chars).
RESULT_CHARS = (2_000, 6_000)
SYSTEM = (
    "You are a coding agent working in a Python repository. Read files with read_file before "
    "you change them, explain what you found, and keep answers short."
)


CHAT_SYSTEM = "You are a helpful assistant who knows the Python standard library well."


@cache
def stdlib_files() -> tuple[tuple[str, str], ...]:
    """(relative path, text) of the standard library's Python sources, sorted by path."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for path in sorted(root.glob("*.py")) + sorted(root.glob("*/*.py")):
        if "test" in path.parts[-2] or "site-packages" in path.parts:
            continue
        text = path.read_text(encoding="utf-8", errors="replace")
        if text.count("\n") > 40:
            files.append((str(path.relative_to(root)), text))
    return tuple(files)


@cache
def _sentences() -> tuple[str, ...]:
    """Docstring sentences of the same files: the prose of users and the assistant."""
    found: list[str] = []
    for _, text in stdlib_files()[:300]:
        try:
            tree = ast.parse(text)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.FunctionDef | ast.ClassDef | ast.Module):
                doc = ast.get_docstring(node)
                if doc:
                    found += [s.strip() + "." for s in doc.split(". ") if 30 < len(s) < 300]
    return tuple(found)


def _prose(rng: random.Random, sentences: int) -> str:
    pool = _sentences()
    return " ".join(rng.choice(pool) for _ in range(sentences))


@cache
def _window(file_index: int, start_line: int) -> str:
    """Lines start_line.. of a file (at most MAX_RESULT_LINES), one shared string per window."""
    _, text = stdlib_files()[file_index]
    lines = text.splitlines(keepends=True)
    return "".join(lines[start_line : start_line + MAX_RESULT_LINES])


def agent_turn(rng: random.Random, index: int) -> list[Message]:
    """One step of the agent: maybe a user message, the assistant's call, the tool result."""
    files = stdlib_files()
    file_index = rng.randrange(len(files))
    path, text = files[file_index]
    start = rng.choice((0, 0, max(0, text.count("\n") // 2)))
    call = ToolCall(id=f"call_{index}", name="read_file", arguments={"path": path, "line": start})
    turn = [Message.user(_prose(rng, 2))] if rng.random() < 0.15 else []
    turn.append(Message.assistant(_prose(rng, rng.randint(1, 3)), tool_calls=(call,)))
    turn.append(Message.tool(call.id, _window(file_index, start)))
    return turn


def agent_session(turns: int, seed: int = 2026) -> list[Message]:
    """A session of `turns` agent steps (each ends with a tool result: a request is due)."""
    rng = random.Random(seed)
    messages = [Message.system(SYSTEM), Message.user(_prose(rng, 3))]
    for index in range(turns):
        messages += agent_turn(rng, index)
    return messages


def request_turn(rng: random.Random, index: int) -> list[Message]:
    """One turn of a request session: the previous request's answer, the user's next
    request, the assistant's call, and its result (a few kilobytes of one file)."""
    files = stdlib_files()
    path, text = files[rng.randrange(len(files))]
    start = text.rfind("\n", 0, rng.randrange(max(1, len(text) - RESULT_CHARS[1]))) + 1
    end = text.find("\n", start + rng.randint(*RESULT_CHARS))
    content = text[start : end if end != -1 else len(text)]
    call = ToolCall(id=f"call_{index}", name="read_file", arguments={"path": path, "at": start})
    return [
        Message.assistant(_prose(rng, rng.randint(1, 3))),
        Message.user(_prose(rng, rng.randint(1, 3))),
        Message.assistant(_prose(rng, 1), tool_calls=(call,)),
        Message.tool(call.id, content),
    ]


def request_session(turns: int, seed: int = 2026) -> list[Message]:
    """A request session of `turns` turns (each ends with a tool result: a request is due)."""
    rng = random.Random(seed)
    messages = [Message.system(SYSTEM)]
    for index in range(turns):
        messages += request_turn(rng, index)[1 if index == 0 else 0 :]  # no answer yet
    return messages


def with_compaction(messages: list[Message], at: int, provider: str, model: str) -> list[Message]:
    """`messages` with a compaction by `provider` and `model` (an Anthropic `compaction` block,
    its summary the prose of the answers before it) at the first answer from `at` on."""
    index = next(i for i in range(at, len(messages)) if messages[i].role is Role.ASSISTANT)
    summary = " ".join(m.text for m in messages[:index] if m.role is Role.ASSISTANT)[:4_000]
    part = CompactionPart(
        provider=provider,
        model=model,
        summary=summary,
        provider_details={"type": "compaction", "content": summary},
    )
    return [*messages[:index], replace(messages[index], compaction=part), *messages[index + 1 :]]


def chat_session(turns: int, seed: int = 2026) -> list[Message]:
    """A chat of `turns` questions and answers, ending with the last answer."""
    rng = random.Random(seed)
    messages = [Message.system(CHAT_SYSTEM)]
    for _ in range(turns):
        messages.append(Message.user(_prose(rng, rng.randint(2, 3))))
        messages.append(Message.assistant(_prose(rng, rng.randint(7, 12))))
    return messages


@dataclass
class InstantProvider:
    """Answers every request at once; keeps what it was sent (None: keeps nothing).
    `compaction_provider` and `model`: whose compactions it reads (`chatcli.history.native`)."""

    requests: list[Request] | None = field(default_factory=list)
    context_window: int | None = None
    max_output_tokens: int | None = None
    model: str | None = None
    compaction_provider: str | None = None

    def complete(self, request: Request) -> Response:
        if self.requests is not None:
            self.requests.append(request)
        return Response(
            message=Message.assistant("Done."),
            stop_reason=StopReason.END_TURN,
            usage=Usage(input_tokens=1, output_tokens=1),
        )

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)

"""Conversations for the recovery benchmark, made of real text that every machine has offline.

The material is the Python standard library of the interpreter that runs the benchmark: its
sources (what an agent's `read_file` returns) and its docstrings (what people and models
write about code). Nothing is generated, repeated or padded, so a tokenizer sees the
mixture of prose, code, identifiers and punctuation it sees in real sessions, and no
estimate can be tuned to it by accident.

Two kinds of session, both ending with the latest user request:

- chat: a question about a function (its docstring's first paragraph) and an answer that
  explains it (the docstring) and quotes it (its source), 1-7k chars each;
- agent: the assistant reads stdlib files with a `read_file` tool (each result is the file,
  at most `READ_LIMIT_LINES` lines, as coding agents' read tools return), narrates what it
  read, and the user follows up now and then; after the latest request it runs two more
  tool rounds.

`build_session(kind, tokens, counter)` grows one until `counter` (a real tokenizer) counts at
least `tokens`; the same arguments always give the same messages.
"""

from __future__ import annotations

import ast
import sysconfig
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from functools import cache
from itertools import count
from pathlib import Path
from typing import Protocol

from chatcli.messages import Message, ToolCall

STDLIB = Path(sysconfig.get_paths()["stdlib"])
# Packages whose sources are not the library itself (tests, the IDE, vendored data).
SKIPPED_PARTS = frozenset({"test", "tests", "idlelib", "site-packages", "lib2to3", "turtledemo"})
READ_LIMIT_LINES = 2_000  # Claude Code's Read tool returns at most this many lines by default
MIN_DOCSTRING_CHARS = 200
MAX_ANSWER_CHARS = 7_000
SYSTEM_PROMPT = (
    "You are a senior Python engineer pairing with the user on the CPython standard library. "
    "Answer precisely, quote the code you rely on, and say when you are unsure."
)
FIRST_REQUEST = (
    "Task: I maintain a service that leans on the standard library. Walk me through the "
    "modules we touch, explain how each piece works, and keep track of anything that looks "
    "fragile so that we can list the open questions at the end."
)
LATEST_REQUEST = (
    "Latest request: given everything above, summarise what we learned, and list the open "
    "questions with the module each one is about."
)


class Counter(Protocol):
    """A tokenizer's count of a conversation (additive: the sum of its messages' counts)."""

    def count(self, messages: Sequence[Message]) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class Documented:
    """A documented function or class of the standard library."""

    qualname: str
    docstring: str
    source: str


@cache
def source_files() -> tuple[Path, ...]:
    """The library's .py files, sorted by path (the order is the same on every machine)."""
    files = (p for p in STDLIB.rglob("*.py") if not SKIPPED_PARTS & set(p.parts))
    return tuple(sorted(files, key=lambda p: p.relative_to(STDLIB).as_posix()))


def module_name(path: Path) -> str:
    return path.relative_to(STDLIB).with_suffix("").as_posix().replace("/", ".")


@cache
def read_source(path: Path) -> str:
    return path.read_text(encoding="utf-8", errors="replace")


@cache
def documented() -> tuple[Documented, ...]:
    """Every function and class with a docstring of at least `MIN_DOCSTRING_CHARS`."""
    found: list[Documented] = []
    for path in source_files():
        text = read_source(path)
        try:
            tree = ast.parse(text)
        except SyntaxError:  # a few files are templates or Python-2 examples
            continue
        lines = text.splitlines()  # once per file: ast.get_source_segment splits per call
        for node in ast.walk(tree):
            if not isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
                continue
            docstring = ast.get_docstring(node)
            source = "\n".join(lines[node.lineno - 1 : node.end_lineno])
            if docstring and source and len(docstring) >= MIN_DOCSTRING_CHARS:
                qualname = f"{module_name(path)}.{node.name}"
                found.append(Documented(qualname=qualname, docstring=docstring, source=source))
    return tuple(found)


def read_result(path: Path) -> str:
    """What a `read_file` tool returns for `path`: numbered lines, at most the read limit."""
    lines = read_source(path).splitlines()
    shown = [f"{n:6}\t{line}" for n, line in enumerate(lines[:READ_LIMIT_LINES], start=1)]
    if len(lines) > READ_LIMIT_LINES:
        shown.append(f"... ({len(lines) - READ_LIMIT_LINES} more lines not shown)")
    return "\n".join(shown)


# -- steps ---------------------------------------------------------------------------------


def chat_steps() -> Iterator[list[Message]]:
    """Question and answer about each documented function, in library order, forever."""
    for lap in count(1):
        for item in documented():
            question = item.docstring.split("\n\n", 1)[0]
            ask = f"What does `{item.qualname}` do, and when would I use it? ({question})"
            if lap > 1:  # the library ran out: a second lap, said as a user would
                ask = f"Once more, lap {lap}: {ask}"
            answer = f"{item.docstring}\n\nHere is the code:\n\n```python\n{item.source}\n```"
            yield [Message.user(ask), Message.assistant(answer[:MAX_ANSWER_CHARS])]


def agent_steps() -> Iterator[list[Message]]:
    """A `read_file` round for each source file, with a user follow-up every fifth file."""
    steps = 0
    for lap in count(1):
        for path in source_files():
            steps += 1
            yield tool_round(path, f"call_{steps}", lap)
            if steps % 5 == 0:
                yield [Message.user(f"Good. Keep going, and note what {module_name(path)} is for.")]


def tool_round(path: Path, call_id: str, lap: int = 1) -> list[Message]:
    relative = path.relative_to(STDLIB).as_posix()
    call = ToolCall(id=call_id, name="read_file", arguments={"path": f"Lib/{relative}"})
    note = f"Reading Lib/{relative} to see how {module_name(path)} works"
    note += f" (again, lap {lap})." if lap > 1 else "."
    return [Message.assistant(note, tool_calls=(call,)), Message.tool(call_id, read_result(path))]


# -- sessions ------------------------------------------------------------------------------


def build_session(kind: str, tokens: int, counter: Counter) -> list[Message]:
    """A `kind` ("chat" or "agent") session that `counter` counts as at least `tokens`.

    System prompt, the first request, history in library order, then the latest request
    (and, for an agent, two tool rounds run for it). Steps are added whole until the count
    is reached, so the total lands up to one step over `tokens`.
    """
    if kind not in ("chat", "agent"):
        raise ValueError(f"kind={kind!r}: expected 'chat' or 'agent'")
    head = [Message.system(SYSTEM_PROMPT), Message.user(FIRST_REQUEST)]
    tail = [Message.user(LATEST_REQUEST)]
    if kind == "agent":
        last_two = source_files()[-2:]
        tail += [m for i, p in enumerate(last_two) for m in tool_round(p, f"call_latest_{i}")]
    body: list[Message] = []
    total = counter.count(head) + counter.count(tail)
    steps = chat_steps() if kind == "chat" else agent_steps()
    while total < tokens:
        step = next(steps)
        body += step
        total += counter.count(step)
    return head + body + tail


def oversized_session(kind: str, tokens: int, counter: Counter) -> list[Message]:
    """A short session whose last message alone counts at least `tokens`: a pasted file as
    the latest request (chat), or one huge tool result after it (agent)."""
    head = [Message.system(SYSTEM_PROMPT), Message.user(FIRST_REQUEST)]
    history = [m for step in _take(chat_steps(), 3) for m in step]
    paste = _text_of_at_least(tokens, counter)
    if kind == "chat":
        return [*head, *history, Message.user(f"{LATEST_REQUEST} Here is the log:\n{paste}")]
    call = ToolCall(id="call_huge", name="read_file", arguments={"path": "build.log"})
    return [
        *head,
        *history,
        Message.user(LATEST_REQUEST),
        Message.assistant("Reading the build log.", tool_calls=(call,)),
        Message.tool(call.id, paste),
    ]


def _take(steps: Iterator[list[Message]], n: int) -> list[list[Message]]:
    return [next(steps) for _ in range(n)]


def _text_of_at_least(tokens: int, counter: Counter) -> str:
    """Whole stdlib files joined until `counter` counts `tokens` of text."""
    pieces: list[str] = []
    total = 0
    for path in source_files():
        text = read_source(path)
        pieces.append(text)
        total += counter.count([Message.user(text)])
        if total >= tokens:
            break
    return "\n".join(pieces)

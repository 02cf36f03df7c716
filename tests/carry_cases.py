"""Conversations the carried-instructions tests share (tests/test_carry_examples.py and the
llama-server test): BANANA / ZX-4471, then 40 turns each pasting a real docstring of the
standard library (about 18,000 chars in all), the case where carrying once carried the
docstrings' "rules" and left the deploy code out."""

from __future__ import annotations

import importlib
import inspect

from chatcli.messages import Message

BANANA = "Never use the word BANANA; the deploy code is ZX-4471."
SYSTEM = Message.system("You are a helpful assistant.")
MODULES = (
    "textwrap", "json", "string", "functools", "shutil", "subprocess", "argparse", "pathlib",
    "collections", "logging", "tarfile", "zipfile", "datetime", "email.message", "csv",
    "calendar", "difflib",
)  # fmt: skip


def turns(*users: str) -> list[Message]:
    """The system message, then each user text answered by a short assistant message."""
    out: list[Message] = [SYSTEM]
    for text in users:
        out += [Message.user(text), Message.assistant("OK.")]
    return out


def docstrings(count: int = 40, sizes: tuple[int, int] = (300, 700)) -> list[str]:
    """Real docstrings of the standard library, of `sizes` chars each (at least, at most),
    in a fixed order."""
    found: list[str] = []
    for name in MODULES:
        module = importlib.import_module(name)
        for attribute in sorted(vars(module)):
            value = getattr(module, attribute)
            doc = inspect.getdoc(value) if getattr(value, "__module__", "") == name else None
            if doc and sizes[0] <= len(doc) <= sizes[1] and doc not in found:
                found.append(doc)
    return found[:count]


def banana_conversation(
    *, first: bool = True, sizes: tuple[int, int] = (300, 700)
) -> list[Message]:
    """BANANA / ZX-4471 as the first message (else the second), then 40 turns each pasting
    a docstring of `sizes` chars, then a request."""
    opening = [BANANA] if first else ["Let's go through some standard-library docs.", BANANA]
    users = [*opening, *(f"What does this do?\n\n{doc}" for doc in docstrings(sizes=sizes))]
    return [*turns(*users), Message.user("Summarise what we covered.")]

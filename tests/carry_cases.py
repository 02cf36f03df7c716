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


# A dense session's own lines (`dense_session`): rules and limits, exact values, preferences,
# and later statements that change two of them.
DENSE_RULES = (
    "Never touch the billing tables.",
    "Do not restart the queue workers during business hours.",
    "Under no circumstances share the customer list.",
    "It is forbidden to edit the production firewall.",
    "Keep each pull request under 400 changed lines.",
    "No more than two deploys per day.",
)
DENSE_FACTS = (
    "The staging host is stg-eu-4.internal.",
    "The deploy code is ZX-4471.",
    "Our release branch is release/7.3.",
    "I prefer short answers with code first.",
)
# (earlier statement, the later one that changes it)
DENSE_UPDATES = (
    ("Always run the linter before committing.", "Skipping the linter is fine now."),
    ("The budget cap is 4,200 EUR.", "Correction: the budget cap is 5,000 EUR."),
)
DENSE_CHATTER = (
    "Thanks, that helps.",
    "Let me check the logs on my side.",
    "Back in a minute, coffee.",
    "Hmm, the dashboard looks slow today.",
    "Ok, next one.",
    "Looks good to me.",
)


def dense_session(turns_count: int = 130) -> list[Message]:
    """About `turns_count` one-line turns: the rules, values and earlier statements of
    `DENSE_*` spread over the first half, the later statements in the second half, chatter
    around them, then a request."""
    said = [*DENSE_RULES, *DENSE_FACTS, *(first for first, _ in DENSE_UPDATES)]
    users = [DENSE_CHATTER[n % len(DENSE_CHATTER)] for n in range(turns_count)]
    step = turns_count // 2 // len(said)
    for n, text in enumerate(said):
        users[n * step] = text
    for n, (_, later) in enumerate(DENSE_UPDATES):
        users[turns_count * 3 // 4 + n * 5] = later
    return [*turns(*users), Message.user("What next?")]

"""Does pre-flight get the fit right the first time? `python benchmarks/estimates.py` prints
Markdown.

Pre-flight predicts whether a conversation fits the declared window before sending it. Wrong
one way, the provider rejects it (an extra call); wrong the other way, history is cut that
would have fitted. This measures how often each estimator decides right, on real text
counted by a real tokenizer:

- Sessions made of the standard library: user turns are docstrings (prose) or the sources of
  functions (code), answers are docstrings; each session mixes three modules, so the kind of
  text, and the chars per token, shift from turn to turn as in a real chat.
- The provider counts with tiktoken (o200k, then cl100k; seeded offline), framed as OpenAI
  documents it (3 tokens per message, 3 to prime the reply). After every turn it states the
  prompt size, and the estimators that learn from statements learn from it, as a chat does.
- At every turn after the first, the window is set at a multiple of the provider's count for
  that turn's conversation (0.80 to 1.20: below 1.00 it does not fit), and each estimator
  decides. Cases near 1.00 are the hard ones; the table shows each multiple.

Estimators, each decided as the recovery policy decides (`chatcli.recovery`: an untrusted
prediction is let through unless over the window by more than `PREFLIGHT_MARGIN`, 3%):

- uncalibrated: `TokenEstimator()` (4 chars per token), untrusted;
- uncalibrated shape: `MarginEstimator()` before any statement (the text's shape), untrusted:
  the default's first send;
- calibrated ratio (today's chat): `TokenEstimator` calibrated on the previous turn's
  statement, untrusted (the policy starts every send uncalibrated);
- calibrated ratio, trusted: the same prediction, trusted (to show what the margin adds);
- default, no exact counter: `MarginEstimator` (the learned margin), trusted once calibrated;
- default, exact: `CountingEstimator` over the provider's tokenizer, trusted.

Each cell: right / extra call / needless cut, in percent of the cases of that column.
"""

from __future__ import annotations

import argparse
import ast
import difflib
import functools
import inspect
import json
import logging
import pathlib
import textwrap
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from types import ModuleType

from chatcli.messages import Message
from chatcli.recovery import PREFLIGHT_MARGIN
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator
from chatcli.tokens.exact import CountingEstimator, TiktokenCounter, load_encoding

MODULES: tuple[ModuleType, ...] = (
    argparse,
    ast,
    difflib,
    functools,
    inspect,
    json,
    logging,
    pathlib,
    textwrap,
)
SESSIONS = 24
TURNS = 30
MULTIPLES = (0.80, 0.90, 0.95, 0.98, 0.99, 1.01, 1.02, 1.05, 1.10, 1.20)
# OpenAI's framing (the cookbook's num_tokens_from_messages): per message, and the reply.
FRAME_PER_MESSAGE, FRAME_REPLY = 3, 3


@dataclass(frozen=True, slots=True)
class Material:
    """A module's prose (docstrings) and code (function sources), in source order."""

    prose: tuple[str, ...]
    code: tuple[str, ...]


def material(module: ModuleType) -> Material:
    prose: list[str] = []
    code: list[str] = []
    for _, value in inspect.getmembers(module):
        if not (inspect.isfunction(value) or inspect.isclass(value)):
            continue
        if getattr(value, "__module__", None) != module.__name__:
            continue
        doc = inspect.getdoc(value)
        if doc and len(doc) > 80:
            prose.append(doc)
        try:
            code.append(inspect.getsource(value))
        except (OSError, TypeError):
            continue
    return Material(prose=tuple(prose), code=tuple(code))


def session(index: int, materials: tuple[Material, ...]) -> list[Message]:
    """Three modules' prose and code, taken in turn (deterministic: no randomness)."""
    picked = [materials[(index + k * 4) % len(materials)] for k in range(3)]
    messages: list[Message] = []
    for turn in range(TURNS):
        source = picked[turn % 3]
        if turn % 2:
            question = source.code[(index + turn) % len(source.code)]
            asked = f"What does this do?\n\n{question}"
        else:
            asked = source.prose[(index + turn) % len(source.prose)]
        answers = picked[(turn + 1) % 3].prose
        answer = answers[(index * 7 + turn) % len(answers)]
        messages += [Message.user(asked), Message.assistant(answer)]
    return messages


@dataclass(frozen=True, slots=True)
class Strategy:
    name: str
    start: TokenEstimator
    learns: bool
    trusted: Callable[[TokenEstimator], bool]


def strategies(exact: TiktokenCounter) -> tuple[Strategy, ...]:
    never, always = (lambda e: False), (lambda e: True)
    return (
        Strategy("uncalibrated", TokenEstimator(), learns=False, trusted=never),
        Strategy("uncalibrated shape", MarginEstimator(), learns=False, trusted=never),
        Strategy("calibrated ratio (today's chat)", TokenEstimator(), learns=True, trusted=never),
        Strategy("calibrated ratio, trusted", TokenEstimator(), learns=True, trusted=always),
        Strategy(
            "**default, no exact counter** (learned margin)",
            MarginEstimator(),
            learns=True,
            trusted=lambda e: e.trusted,
        ),
        Strategy(
            "**default, exact** (tiktoken)",
            CountingEstimator(counter=exact),
            learns=True,
            trusted=lambda e: e.trusted,
        ),
    )


@dataclass
class Tally:
    right: int = 0
    extra_call: int = 0
    needless_cut: int = 0

    def add(self, predicted_fits: bool, fits: bool) -> None:
        if predicted_fits == fits:
            self.right += 1
        elif predicted_fits:
            self.extra_call += 1
        else:
            self.needless_cut += 1

    def cell(self) -> str:
        total = self.right + self.extra_call + self.needless_cut
        return " / ".join(f"{100 * n / total:.0f}" for n in self._counts())

    def _counts(self) -> tuple[int, int, int]:
        return self.right, self.extra_call, self.needless_cut


def stated(counter: TiktokenCounter, messages: list[Message]) -> int:
    """What the provider states: content tokens plus OpenAI's framing."""
    content = sum(counter.count((m,)) - counter.per_message for m in messages)
    return content + FRAME_PER_MESSAGE * len(messages) + FRAME_REPLY


def decides_fit(
    estimator: TokenEstimator, trusted: bool, messages: list[Message], window: int
) -> bool:
    """The policy's pre-flight check with no output reserve (`_Run.fits`)."""
    leniency = 1.0 if trusted else 1.0 + PREFLIGHT_MARGIN
    return estimator.count(messages) <= window * leniency


def turns(history: list[Message]) -> Iterator[list[Message]]:
    for end in range(2, len(history) + 1, 2):
        yield history[:end]


def measure(encoding_name: str, histories: list[list[Message]]) -> dict[str, dict[float, Tally]]:
    encoding = load_encoding(encoding_name)
    if encoding is None:
        raise SystemExit(f"tiktoken or bpe-openai missing: {encoding_name} cannot be loaded")
    counter = TiktokenCounter(encoding=encoding)
    results = {s.name: {m: Tally() for m in MULTIPLES} for s in strategies(counter)}
    for history in histories:
        for strategy in strategies(counter):
            estimator, previous = strategy.start, None
            for conversation in turns(history):
                truth = stated(counter, conversation)
                if previous is not None:  # the first turn has nothing to learn from yet
                    for multiple in MULTIPLES:
                        window = round(truth * multiple)
                        trusted = strategy.trusted(estimator)
                        predicted = decides_fit(estimator, trusted, conversation, window)
                        results[strategy.name][multiple].add(predicted, truth <= window)
                if strategy.learns:
                    estimator = estimator.calibrated(conversation, truth)
                previous = conversation
    return results


def header() -> list[str]:
    head = " | ".join(f"{m:.2f}" for m in MULTIPLES)
    return [
        "Window as a multiple of the provider's count (below 1.00 the conversation does not",
        "fit). Each cell: right / extra call / needless cut, % of cases.",
        "",
        f"| provider's tokenizer · estimator | {head} | all |",
        "|---" * (len(MULTIPLES) + 2) + "|",
    ]


def rows(encoding_name: str, results: dict[str, dict[float, Tally]]) -> list[str]:
    lines = []
    for name, by_multiple in results.items():
        total = Tally()
        for tally in by_multiple.values():
            total.right += tally.right
            total.extra_call += tally.extra_call
            total.needless_cut += tally.needless_cut
        cells = " | ".join(t.cell() for t in by_multiple.values())
        lines.append(f"| {encoding_name} · {name} | {cells} | {total.cell()} |")
    return lines


def main() -> None:
    started = time.perf_counter()
    materials = tuple(material(module) for module in MODULES)
    histories = [session(i, materials) for i in range(SESSIONS)]
    cases = sum(len(h) // 2 - 1 for h in histories) * len(MULTIPLES)
    chars = sum(len(m.text) for m in histories[0])
    print(
        f"{SESSIONS} sessions of {TURNS} turns from the standard library "
        f"({', '.join(m.__name__ for m in MODULES)}); {cases} decisions per estimator per "
        f"tokenizer; the first session is {chars:,} characters at its last turn."
    )
    print()
    print("\n".join(header()))
    for name in ("o200k_base", "cl100k_base"):
        print("\n".join(rows(name, measure(name, histories))))
    print()
    print(f"Wall time: {time.perf_counter() - started:.1f} s.")


if __name__ == "__main__":
    main()

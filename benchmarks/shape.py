"""How close the shape estimate lands to real tokenizers: `python benchmarks/shape.py` prints
Markdown.

`chatcli.tokens.shape_tokens` (what the default `MarginEstimator` counts with before any
provider states a count) against tiktoken's o200k_base and cl100k_base (seeded offline by
`chatcli.tokens.exact`), next to the flat 4 chars per token it replaced, on:

- the text its weights were fitted on: chatcli's own sources (as files, and as the numbered
  lines a coding agent's `read_file` returns) and its documents;
- text it was not fitted on: the recovery benchmark's chat and agent sessions
  (`benchmarks/histories.py`: the standard library's docstrings and sources), whole and by
  message (the spread a view of a few messages can see), and the Universal Declaration's
  first article in six languages.

Each ratio is the estimate over the tokenizer's count: above 1 counts high (a view keeps less
than it could), below 1 counts low (a view may be fuller than planned).
"""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from benchmarks.histories import build_session
from tests.test_tokens_shape import ARTICLE_1

from chatcli.messages import Message
from chatcli.tokens.estimate import DEFAULT_CHARS_PER_TOKEN, message_shape_tokens
from chatcli.tokens.exact import TiktokenCounter, load_encoding

ROOT = Path(__file__).resolve().parent.parent
SESSION_TOKENS = 200_000
# Each estimate of a message's content tokens (the template's tokens aside).
ESTIMATES: dict[str, Callable[[Message], float]] = {
    "shape": message_shape_tokens,
    "4 chars/token": lambda message: message.char_count / DEFAULT_CHARS_PER_TOKEN,
}


def numbered(text: str) -> str:
    """`text` as a `read_file` tool returns it: `cat -n` style numbered lines."""
    return "\n".join(f"{n:6}\t{line}" for n, line in enumerate(text.splitlines(), start=1))


def own_texts() -> dict[str, str]:
    sources = "\n".join(p.read_text() for p in sorted((ROOT / "src").rglob("*.py")))
    # Not benchmarks/README.md: it holds this script's own output.
    documents = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    return {
        "chatcli sources": sources,
        "chatcli sources, numbered lines": numbered(sources),
        "chatcli documents": "\n\n".join(p.read_text() for p in documents),
    }


def ratios(messages: Sequence[Message], counters: Sequence[TiktokenCounter]) -> list[str]:
    """Per estimate and tokenizer, the ratio over all `messages`, and with many, the 5th-95th
    percentile of the messages' own ratios (those of 50 tokens or more)."""
    cells = []
    for estimate in ESTIMATES.values():
        for counter in counters:
            real = [counter.count([m]) - counter.per_message for m in messages]
            guessed = [estimate(m) for m in messages]
            cell = f"{sum(guessed) / sum(real):.3f}"
            if len(messages) > 1:
                each = [g / r for g, r in zip(guessed, real, strict=True) if r >= 50]
                twentieths = statistics.quantiles(each, n=20)
                cell += f" ({twentieths[0]:.2f}-{twentieths[-1]:.2f})"
            cells.append(cell)
    return cells


def main() -> int:
    counters = []
    for name in ("o200k_base", "cl100k_base"):
        encoding = load_encoding(name)
        if encoding is None:
            raise SystemExit(f"{name} cannot be loaded offline: pip install -e '.[bench]'")
        counters.append(TiktokenCounter(encoding=encoding))
    columns = [f"{e} / {c}" for e in ESTIMATES for c in ("o200k", "cl100k")]
    print("| text | chars | " + " | ".join(columns) + " |")
    print("|---|---:|" + "---:|" * len(columns))
    rows = [(name, [Message.user(text)]) for name, text in own_texts().items()]
    for kind in ("chat", "agent"):
        history = build_session(kind, SESSION_TOKENS, counters[0])
        rows.append((f"stdlib {kind} session, {len(history)} messages (5-95% of them)", history))
    rows += [
        (f"Article 1, {lang}", [Message.user(text)]) for lang, text in sorted(ARTICLE_1.items())
    ]
    for name, messages in rows:
        chars = sum(m.char_count for m in messages)
        print(f"| {name} | {chars:,} | " + " | ".join(ratios(messages, counters)) + " |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

"""Is a model's answer English? Most of its words are in a word list of English.

The list is Webster's Second International (`web2` of the `english-words` package, 234,450
words; a dev dependency). A word is a run of ASCII letters at least `MIN_LETTERS` long, outside
markup tags (short ones, "fe", "aa", "q", are in the list by accident too often); it counts as
English when it is in the list, itself or with a plural, past or -ing/-ly ending taken off (web2
lists stems). An answer is English when at least `THRESHOLD` of its words are, and it has
`MIN_WORDS`.

Measured when the threshold was set (tests/test_real_model.py keeps both sides honest):
answers of chatcli's random-weight tiny model ("fE witext.i in toolACA fi witA'i ink fi
promptAi") scored 0.00-0.31 on six prompts, SmolLM2-135M-Instruct's 0.84-1.00 on the same.

`python -m tests.english LOG` reads the `assistant: ...` lines a `chatcli demo` printed and
exits 1 unless they are English together (scripts/check-installs.sh's quick start).
"""

from __future__ import annotations

import re
import sys
from functools import cache
from pathlib import Path

THRESHOLD = 0.7
MIN_LETTERS = 3
MIN_WORDS = 3
_ENDINGS = ("s", "es", "ed", "d", "ing", "ly")


@cache
def _words() -> frozenset[str]:
    from english_words import get_english_words_set

    return frozenset(get_english_words_set(["web2"], lower=True, alpha=True))


def _known(word: str) -> bool:
    known = _words()
    return word in known or any(
        word.endswith(end) and word[: -len(end)] in known for end in _ENDINGS
    )


def english_share(text: str, given: frozenset[str] = frozenset()) -> tuple[float, int]:
    """The share of `text`'s words in the list (or in `given`: names the prompt itself gave,
    such as "france", which web2 lacks), and how many words there were (markup such as
    `<tool_response>` left out: it is not the model's prose)."""
    prose = re.sub(r"<[^<>\n]*>", " ", text)
    words = [w.lower() for w in re.findall(r"[A-Za-z]+", prose) if len(w) >= MIN_LETTERS]
    known = sum(word in given or _known(word) for word in words)
    return (known / len(words) if words else 0.0), len(words)


def is_english(text: str, given: frozenset[str] = frozenset()) -> bool:
    share, count = english_share(text, given)
    return count >= MIN_WORDS and share >= THRESHOLD


def demo_answers(screen: str) -> str:
    """The answers a `chatcli demo` printed (its `assistant: ...` lines), joined; on a
    terminal's screen, each line is what was left after its last carriage return."""
    lines = (line.rsplit("\r", 1)[-1] for line in screen.replace("\r\n", "\n").split("\n"))
    return "\n".join(
        line.removeprefix("assistant: ") for line in lines if line.startswith("assistant: ")
    )


if __name__ == "__main__":
    answers = demo_answers(Path(sys.argv[1]).read_text(errors="replace"))
    share, count = english_share(answers)
    print(f"demo answers: {count} words, {share:.0%} of them English")
    sys.exit(0 if is_english(answers) else 1)

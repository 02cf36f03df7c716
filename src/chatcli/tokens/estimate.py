"""Token estimates: a calibrated chars-per-token estimator, and the default estimate that reads
the text's shape (exact counters where available: `chatcli.tokens.exact`).

`TokenEstimator` is deliberately simple and cheap (linear in characters). When a provider
states the real prompt size (in an overflow error or in usage), `calibrated` derives a better
ratio from what was actually sent, so the next prediction matches that provider's tokenizer.

A flat ratio misses by the kind of text: prose packs more characters into a token than code,
numbers or indentation, so one ratio counts prose high and numbered source low.
`shape_tokens` reads the text's shape instead (its words, letters, digits, punctuation, line
breaks and non-ASCII characters), with weights fitted to tiktoken's o200k and cl100k counts,
so that it lands close to both on either kind of text before any provider stated a count.

A calibration on one conversation still misses the next one by a few percent.
`MarginEstimator`, the default where no exact count exists, estimates by shape, calibrates the
shape's scale on every count a provider states, learns how far that scale missed and grows its
predictions by it, so a prediction that says "fits" does. `trusted` tells the recovery policy
whether a prediction may stand in for a call (`chatcli.tokens.exact.CountingEstimator`, exact,
always is).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from chatcli.messages import Message, total_chars

__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "MARGIN_DECAY",
    "MAX_MARGIN",
    "MESSAGE_OVERHEAD_TOKENS",
    "MarginEstimator",
    "TextShape",
    "TokenEstimator",
    "calibrated_ratio",
    "message_shape_tokens",
    "shape_tokens",
]

# ~4 chars/token is the usual figure for English with BPE tokenizers; a conservative start.
DEFAULT_CHARS_PER_TOKEN = 4.0
# Role markers and separators that every chat template adds around a message.
MESSAGE_OVERHEAD_TOKENS = 4
# A calibration never trusts a ratio outside this range (guards against odd reports).
_MIN_RATIO, _MAX_RATIO = 0.5, 12.0
# A learned margin is at most this share of the prediction: a ratio that misses by more is
# wrong, not uncertain, and the provider's next statement recalibrates it.
MAX_MARGIN = 0.25
# Each statement keeps this share of the margin learned before (then the larger of it and the
# new miss), so one lucky prediction does not forget the misses before it. A longer memory
# leaves fewer rejected calls but cuts history needlessly more often near the boundary
# (`benchmarks/estimates.py` compares them).
MARGIN_DECAY = 0.5
# A calibration never trusts a scale of the shape estimate outside this range (as the ratio's).
_MIN_SCALE, _MAX_SCALE = 0.25, 8.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TextShape:
    """Tokens per feature of a text's shape: each word (a run of ASCII letters) costs `word`
    plus `letter` per letter (long words and identifiers split) and `long_run` per 20 letters
    of one case in a row (no word is that long: a hash, an encoding or a repeated letter,
    which tokenizers cut into pieces of 2-3 letters; a CamelCase name is words), each digit
    and punctuation mark its own weight, each line break or indentation (a run of blanks
    holding a newline or a tab, or two spaces or more) `blank_run`, each non-ASCII character
    a weight by its UTF-8 length; a single space is free (BPE tokenizers fold it into the
    next word).

    The long-run weight is set so that long runs of random and of repeated letters cost what
    o200k counts. The other ASCII weights are a least-squares fit (rounded) to the larger of
    tiktoken's o200k and cl100k counts on text the recovery benchmark does not use: chatcli's
    own sources (as files and as numbered `read_file` lines), its documents and the package
    metadata of its dependencies, so that the benchmark's sessions test them on text they
    were not fitted to. The non-ASCII weights are set so that text in other scripts
    (Arabic, Chinese, Japanese, Russian, ...) lands between o200k's and cl100k's counts,
    where a flat chars-per-token ratio counts Chinese and Japanese far too low.
    `python benchmarks/shape.py` prints how close the estimate lands (benchmarks/README.md,
    "The shape estimate").
    """

    word: float = 0.7
    letter: float = 0.11
    long_run: float = 7.8
    digit: float = 0.9
    punctuation: float = 0.42
    blank_run: float = 0.9
    two_byte_char: float = 0.45
    three_byte_char: float = 1.0
    four_byte_char: float = 2.0


_LETTERS = bytes(range(ord("A"), ord("Z") + 1)) + bytes(range(ord("a"), ord("z") + 1))
_DIGITS = b"0123456789"
_PUNCTUATION = bytes(c for c in range(0x21, 0x7F) if not chr(c).isalnum())
# The lead bytes of UTF-8's two-, three- and four-byte characters.
_LEAD_2, _LEAD_3, _LEAD_4 = (
    bytes(range(0xC2, 0xE0)),
    bytes(range(0xE0, 0xF0)),
    bytes(range(0xF0, 0xF5)),
)
# Runs are counted by their starts, in a copy of the text mapped to a few classes (C-speed
# `translate` and `count`, no regex): a letter ("a" lower case, "A" upper) after anything
# else starts a word, and each 20 of one case in a row are a long run's piece; a blank run
# ("s" a space, "n" a newline or tab, "x" anything else) counts when it starts, after "x",
# with "n", two spaces or a space and "n" (a lone space between words does not).
_WORDS = bytes(
    ord("a") if chr(c).islower() and c < 0x80 else ord("A") if c in _LETTERS else ord(" ")
    for c in range(256)
)
_BLANKS = bytes(
    ord("s") if c == ord(" ") else ord("n") if c in b"\t\n" else ord("x") for c in range(256)
)
_LONG_RUNS = (b"a" * 20, b"A" * 20)
_WORD_STARTS = (b" a", b" A")
_SHAPE = TextShape()


def shape_tokens(text: str) -> float:
    """The tokens `text` is estimated to cost by its shape (see `TextShape`). Linear in its
    length, in C (byte translations and counts over its UTF-8 bytes)."""
    data, shape = text.encode("utf-8", "surrogatepass"), _SHAPE

    def share(kind: bytes) -> int:
        return len(data) - len(data.translate(None, kind))

    words = data.translate(_WORDS)
    blanks = data.translate(_BLANKS)
    blank_runs = sum(map(blanks.count, (b"xn", b"xss", b"xsn")))
    blank_runs += blanks.startswith((b"n", b"ss", b"sn"))
    return (
        shape.word * (sum(map(words.count, _WORD_STARTS)) + words.startswith((b"a", b"A")))
        + shape.letter * share(_LETTERS)
        + shape.long_run * sum(map(words.count, _LONG_RUNS))
        + shape.digit * share(_DIGITS)
        + shape.punctuation * share(_PUNCTUATION)
        + shape.blank_run * blank_runs
        + shape.two_byte_char * share(_LEAD_2)
        + shape.three_byte_char * share(_LEAD_3)
        + shape.four_byte_char * share(_LEAD_4)
    )


def message_shape_tokens(message: Message) -> float:
    """The shape estimate of what `message` puts into a prompt besides its template: its text,
    tool-call names and JSON arguments (what `Message.char_count` counts in chars)."""
    calls = sum(
        shape_tokens(call.name) + shape_tokens(call.arguments_json) for call in message.tool_calls
    )
    return shape_tokens(message.text) + calls


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEstimator:
    """Estimates prompt tokens from characters: ceil(chars / ratio) + overhead per message."""

    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    per_message: int = MESSAGE_OVERHEAD_TOKENS

    def count(self, messages: Sequence[Message]) -> int:
        return self.count_chars(total_chars(messages), len(messages))

    def count_chars(self, chars: int, message_count: int = 0) -> int:
        return math.ceil(chars / self.chars_per_token) + self.per_message * message_count

    @property
    def trusted(self) -> bool:
        """Its predictions may stand in for a call (exact, or learned from stated counts before
        this request). A plain estimator is a guess until a provider states a count."""
        return False

    def calibrated(self, messages: Sequence[Message], actual_tokens: int) -> TokenEstimator:
        """A new estimator whose ratio reproduces `actual_tokens` for `messages`."""
        ratio = calibrated_ratio(messages, actual_tokens, self.per_message)
        if ratio is None:
            return self
        return TokenEstimator(chars_per_token=ratio, per_message=self.per_message)

    def exact(self, messages: Sequence[Message]) -> int | None:
        """The provider's own count of a request of `messages`, where one is at hand and cheap
        (a local server's tokenizer); None here: an estimate has none."""
        return None


@dataclass(frozen=True, slots=True, kw_only=True)
class MarginEstimator(TokenEstimator):
    """The shape estimate (`shape_tokens`), calibrated, grown by a margin learned from the
    counts providers stated.

    A message's prediction is its shape estimate times `scale` (1.0 until a provider states a
    count) plus the template's tokens per message. Every stated count recalibrates the scale to
    reproduce it (and the chars-per-token ratio, as `TokenEstimator.calibrated`, for sizes
    known only in characters) and teaches the margin: how far the scale calibrated before it
    under-predicted this count (a prediction that was too high teaches nothing: it cost no
    call). The margin keeps `MARGIN_DECAY` of its past value and never exceeds `MAX_MARGIN`.
    `calibrations` counts the statements learned from; from the first one on, predictions are
    `trusted`.
    """

    scale: float = 1.0
    margin: float = 0.0
    calibrations: int = 0

    @property
    def trusted(self) -> bool:
        return self.calibrations > 0

    def count(self, messages: Sequence[Message]) -> int:
        return self.count_shape(sum(message_shape_tokens(m) for m in messages), len(messages))

    def count_shape(self, shape: float, message_count: int = 0) -> int:
        """The prediction for `message_count` messages whose shape estimates sum to `shape`
        (what `count` predicts from a running sum: `chatcli.history.running`)."""
        grown = shape * self.scale * (1.0 + self.margin)
        return math.ceil(grown) + self.per_message * message_count

    def count_chars(self, chars: int, message_count: int = 0) -> int:
        grown = chars / self.chars_per_token * (1.0 + self.margin)
        return math.ceil(grown) + self.per_message * message_count

    def calibrated(self, messages: Sequence[Message], actual_tokens: int) -> MarginEstimator:
        ratio = calibrated_ratio(messages, actual_tokens, self.per_message)
        shape = sum(message_shape_tokens(m) for m in messages)
        if ratio is None or shape <= 0:
            return self
        content_tokens = actual_tokens - self.per_message * len(messages)
        scale = min(max(content_tokens / shape, _MIN_SCALE), _MAX_SCALE)
        margin = self.margin
        if self.calibrations:
            miss = scale / self.scale - 1.0  # > 0: the old scale predicted too few
            margin = min(MAX_MARGIN, max(margin * MARGIN_DECAY, miss))
        return replace(
            self,
            chars_per_token=ratio,
            scale=scale,
            margin=margin,
            calibrations=self.calibrations + 1,
        )


def calibrated_ratio(
    messages: Sequence[Message], actual_tokens: int, per_message: int
) -> float | None:
    """The chars per token that make `actual_tokens` of `messages` (bounded against odd
    reports), or None when the count teaches nothing (no text, or no tokens beyond the
    per-message overhead)."""
    content_tokens = actual_tokens - per_message * len(messages)
    chars = total_chars(messages)
    if content_tokens <= 0 or chars <= 0:
        return None
    return min(max(chars / content_tokens, _MIN_RATIO), _MAX_RATIO)

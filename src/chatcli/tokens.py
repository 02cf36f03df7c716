"""Token estimates: a calibrated chars-per-token estimator (exact counters where available).

The estimate is deliberately simple and cheap (linear in characters). When a provider states
the real prompt size (in an overflow error or in usage), `calibrated` derives a better ratio
from what was actually sent, so the next prediction matches that provider's tokenizer.

A ratio calibrated on one conversation still misses the next one by a few percent (code and
prose pack different numbers of characters into a token). `MarginEstimator` learns that miss
from the counts providers state and grows its predictions by it, so a prediction that says
"fits" does.
`trusted` tells the recovery policy whether a prediction may stand in for a call
(`chatcli.tokencount.CountingEstimator`, exact, always is).
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
    "TokenEstimator",
    "calibrated_ratio",
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
# new miss), so one lucky prediction does not forget the misses before it. Measured with
# benchmarks/estimates.py: a longer memory (0.9) leaves fewer rejected calls but cuts history
# needlessly in twice as many near-boundary cases.
MARGIN_DECAY = 0.5


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


@dataclass(frozen=True, slots=True, kw_only=True)
class MarginEstimator(TokenEstimator):
    """The calibrated estimate grown by a margin learned from the counts providers stated.

    Every stated count recalibrates the ratio (as `TokenEstimator.calibrated`) and teaches
    the margin: how far the ratio calibrated before it under-predicted this count (a
    prediction that was too high teaches nothing: it cost no call). The margin keeps
    `MARGIN_DECAY` of its past value and never exceeds `MAX_MARGIN`. `calibrations` counts the
    statements learned from; from the first one on, predictions are `trusted`.
    """

    margin: float = 0.0
    calibrations: int = 0

    @property
    def trusted(self) -> bool:
        return self.calibrations > 0

    def count_chars(self, chars: int, message_count: int = 0) -> int:
        grown = chars / self.chars_per_token * (1.0 + self.margin)
        return math.ceil(grown) + self.per_message * message_count

    def calibrated(self, messages: Sequence[Message], actual_tokens: int) -> MarginEstimator:
        ratio = calibrated_ratio(messages, actual_tokens, self.per_message)
        if ratio is None:
            return self
        margin = self.margin
        if self.calibrations:
            miss = self.chars_per_token / ratio - 1.0  # > 0: the old ratio predicted too few
            margin = min(MAX_MARGIN, max(margin * MARGIN_DECAY, miss))
        return replace(
            self, chars_per_token=ratio, margin=margin, calibrations=self.calibrations + 1
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

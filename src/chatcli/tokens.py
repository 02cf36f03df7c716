"""Token estimates: a calibrated chars-per-token estimator (exact counters where available).

The estimate is deliberately simple and cheap (linear in characters). When a provider states
the real prompt size (in an overflow error or in usage), `calibrated` derives a better ratio
from what was actually sent, so the next prediction matches that provider's tokenizer.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

from chatcli.messages import Message, total_chars

__all__ = ["DEFAULT_CHARS_PER_TOKEN", "MESSAGE_OVERHEAD_TOKENS", "TokenEstimator"]

# ~4 chars/token is the usual figure for English with BPE tokenizers; a conservative start.
DEFAULT_CHARS_PER_TOKEN = 4.0
# Role markers and separators that every chat template adds around a message.
MESSAGE_OVERHEAD_TOKENS = 4
# A calibration never trusts a ratio outside this range (guards against odd reports).
_MIN_RATIO, _MAX_RATIO = 0.5, 12.0


@dataclass(frozen=True, slots=True, kw_only=True)
class TokenEstimator:
    """Estimates prompt tokens from characters: ceil(chars / ratio) + overhead per message."""

    chars_per_token: float = DEFAULT_CHARS_PER_TOKEN
    per_message: int = MESSAGE_OVERHEAD_TOKENS

    def count(self, messages: Sequence[Message]) -> int:
        return self.count_chars(total_chars(messages), len(messages))

    def count_chars(self, chars: int, message_count: int = 0) -> int:
        return math.ceil(chars / self.chars_per_token) + self.per_message * message_count

    def calibrated(self, messages: Sequence[Message], actual_tokens: int) -> TokenEstimator:
        """A new estimator whose ratio reproduces `actual_tokens` for `messages`."""
        content_tokens = actual_tokens - self.per_message * len(messages)
        chars = total_chars(messages)
        if content_tokens <= 0 or chars <= 0:
            return self
        ratio = min(max(chars / content_tokens, _MIN_RATIO), _MAX_RATIO)
        return TokenEstimator(chars_per_token=ratio, per_message=self.per_message)

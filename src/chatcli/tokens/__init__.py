"""Counting tokens: one place for it.

- `estimate`: the calibrated chars-per-token estimator and the shape-aware default estimate
  (pure, no dependency).
- `exact`: exact offline counts for OpenAI models (tiktoken with the BPE files bpe-openai
  ships), and the estimator that uses them where they apply.

Counters that ask a server (llama-server's `/tokenize`, the providers' count endpoints) do
I/O through an adapter, so they live with the adapters: `chatcli.providers.counting`.
"""

from chatcli.tokens.estimate import (
    DEFAULT_CHARS_PER_TOKEN,
    MESSAGE_OVERHEAD_TOKENS,
    MarginEstimator,
    TextShape,
    TokenEstimator,
    calibrated_ratio,
    message_shape_tokens,
    shape_tokens,
)
from chatcli.tokens.exact import (
    CountingEstimator,
    TiktokenCounter,
    TokenCounter,
    encoding_name_for,
    token_counter,
)

__all__ = [
    "DEFAULT_CHARS_PER_TOKEN",
    "MESSAGE_OVERHEAD_TOKENS",
    "CountingEstimator",
    "MarginEstimator",
    "TextShape",
    "TiktokenCounter",
    "TokenCounter",
    "TokenEstimator",
    "calibrated_ratio",
    "encoding_name_for",
    "message_shape_tokens",
    "shape_tokens",
    "token_counter",
]

"""Signs in a successful response that the context overflowed: not errors, but overflows all
the same, which adapters turn into one.

- `is_context_window_stop`: a raw stop reason that means "the context window filled up", not
  "max_tokens was reached". The list of such stop reasons is also a list of overflow codes,
  so the error classifier reads it from here and the two never drift apart.
- `silent_truncation`: judges from a 200 answer's usage whether the server cut the prompt
  without saying so (Ollama does); an adapter then raises an overflow whose
  `ErrorInfo.reason` is `SILENT_TRUNCATION`.
"""

from __future__ import annotations

from typing import Final

from chatcli.messages import Usage

__all__ = [
    "CONTEXT_WINDOW_STOPS",
    "SILENT_TRUNCATION",
    "is_context_window_stop",
    "is_window_cap",
    "silent_truncation",
]


# `ErrorInfo.reason` of an overflow an adapter detected itself from usage: the server cut the
# prompt silently and answered 200 (Ollama). The recovery loop reports it as such.
SILENT_TRUNCATION = "silent_truncation"


# Raw stop reasons of successful responses that mean "the context window filled up", not
# "max_tokens was reached": Anthropic and Bedrock Converse `model_context_window_exceeded`,
# Mistral `model_length` (SDK ChatCompletionChoiceFinishReason), Cohere v1 `ERROR_LIMIT`
# ("the reply was cut off because the model reached the maximum number of tokens for its
# context length", cohere chat_stream_end_event.py).
CONTEXT_WINDOW_STOPS: Final = frozenset(
    {"model_context_window_exceeded", "model_length", "error_limit"}
)


def is_context_window_stop(raw_stop_reason: str | None) -> bool:
    """True when a provider's raw stop/finish reason means the context window filled up.

    Adapters map such a stop to `StopReason.CONTEXT_WINDOW` and treat it as overflow.
    Note that a plain `length` (OpenAI-compatible servers, Ollama `done_reason`) is ambiguous:
    vLLM, llama.cpp and Ollama also report it when the window, not max_tokens, ran out.
    """
    return raw_stop_reason is not None and raw_stop_reason.strip().lower() in CONTEXT_WINDOW_STOPS


def silent_truncation(
    usage: Usage,
    estimate: int,
    context_window: int | None,
    *,
    min_ratio: float = 0.5,
    min_estimate: int = 512,
    new_turn: int | None = None,
    before: int = 0,
) -> str | None:
    """Why a 200 answer looks like the server cut the prompt silently (Ollama does), or None.

    `usage` is what the server reported, `estimate` chatcli's count of what was sent (message
    text only, so it errs low), `context_window` the window the server runs with, if known.
    The prompt the server saw is `usage.prompt_tokens`: uncached tokens plus cache reads and
    writes, so a server that reports its cached prefix (`cached_tokens`) is judged on all of it.

    - The reported prompt fills the whole window: cut (Ollama keeps exactly `num_ctx` tokens).
    - Fewer than `min_ratio` of the tokens sent arrived AND what was sent could not fit the
      window (the estimate exceeds it). A low count alone proves nothing: Ollama has reported
      only the uncached part of a prompt whose prefix it kept in its KV cache (or nothing for
      a fully cached prompt), so every long cached conversation would look cut.
    - With the window unknown, `new_turn` (chatcli's count of the messages after the model's
      last answer: the new request, or the results of its last calls) and `before` (of the
      messages up to that answer) give a second signal. No earlier request held the new turn,
      so no cache can hide it: fewer than `min_ratio` of it arrived is a cut when, besides,
      the count is what a window cap leaves (a power of two of at least 1,024: Ollama keeps
      exactly `num_ctx`, and every default and usual setting of it is one), or the server
      read at least `min_ratio` of what came before it (it dropped the new turn, as
      llama-cpp-python's guessed chat format drops tool results). A prompt sent again whole (a
      retry that hits the cache, reported as next to nothing) matches neither.
    - No usage reported (0 tokens): nothing to judge.
    """
    reported = usage.prompt_tokens
    if reported <= 0:
        return None
    if context_window is not None and reported >= context_window:
        return f"the reported prompt ({reported} tokens) fills the {context_window}-token context"
    few_arrived = estimate >= min_estimate and reported < min_ratio * estimate
    if few_arrived and context_window is not None and estimate > context_window:
        return (
            f"the server reported {reported} prompt tokens, but about {estimate} were sent"
            f" to a {context_window}-token context"
        )
    if context_window is None and new_turn is not None:
        return _new_turn_missing(reported, new_turn, before, min_ratio, min_estimate)
    return None


# The smallest context a server cuts to that the unknown-window rule recognises as a cap.
_MIN_CAP = 1024


def is_window_cap(reported: int) -> bool:
    """`reported` prompt tokens are what a silent cut to a window leaves (a power of two of at
    least 1,024): then they state the window, which the server did not."""
    return reported >= _MIN_CAP and reported & (reported - 1) == 0


def _new_turn_missing(
    reported: int, new_turn: int, before: int, min_ratio: float, min_estimate: int
) -> str | None:
    """The unknown-window signal of `silent_truncation`: the new turn did not arrive."""
    if new_turn < min_estimate or reported >= min_ratio * new_turn:
        return None
    capped = is_window_cap(reported)
    read_before = before > 0 and reported >= min_ratio * before
    if not (capped or read_before):
        return None
    what = "a window cap" if capped else f"the {before} tokens before it"
    return (
        f"the server reported {reported} prompt tokens, fewer than the {new_turn} of the turn"
        f" sent after its last answer alone (no cache holds that turn), consistent with {what}"
    )

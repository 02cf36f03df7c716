"""Error kinds, classified error info, chatcli's exception tree, and the error classifier.

Every provider failure is classified ONCE, at the adapter boundary (or by `Client` for a
foreign exception), into an `ErrorInfo`; the core only ever looks at that.

Exception tree::

    ChatcliError
     +-- ConfigError              a CHATCLI_* setting (or argument) has an invalid value
     +-- ProviderError            a provider call failed; `.info` is the classified ErrorInfo
     +-- ContextRecoveryError     every recovery level was tried and the request still fails
     +-- CompactionError          /compact failed; the session is unchanged

How `classify_error` decides (SPEC section 2):

1. Evidence is gathered from whatever it is given: an exception (its `status_code`, `status`,
   `code`, `type`, `body`, `message`, `response` headers, class names, and the whole
   `__cause__` / `__context__` chain), a string (JSON or Python-repr bodies embedded in it are
   parsed out), or a parsed JSON body. No SDK is imported: attributes are read by name.
2. `_RULES`, one ordered table, is tried top to bottom; the first rule that matches decides.
   Specific structured codes come first, then message patterns (look-alike guards before the
   overflow patterns they resemble), then generic codes and exception class names that only
   say which HTTP family the error is in.
3. If no rule matches, the HTTP status is used as a hint (`_STATUS_HINTS`).

Numbers the message states (prompt tokens, context limit, requested output, ...) are
extracted only for `CONTEXT_OVERFLOW` and `OUTPUT_CAP`, where recovery uses them.

Stop reasons that mean "the context window filled up" on a *successful* response are not
errors; adapters ask `is_context_window_stop(raw_stop_reason)`, which lives here so that the
list of such stop reasons and the overflow codes stay in one place. Likewise
`silent_truncation` judges from a 200 answer's usage whether the server cut the prompt
without saying so (Ollama); an adapter raises that as an overflow with `SILENT_TRUNCATION`.
"""

from __future__ import annotations

import ast
import json
import re
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from http import HTTPStatus
from typing import Final, Literal

from chatcli.messages import Usage

__all__ = [
    "SILENT_TRUNCATION",
    "ChatcliError",
    "CompactionError",
    "ConfigError",
    "ContextRecoveryError",
    "ErrorInfo",
    "ErrorKind",
    "ProviderError",
    "classify_error",
    "is_context_window_stop",
    "is_window_cap",
    "redact_secrets",
    "silent_truncation",
]


# `ErrorInfo.reason` of an overflow an adapter detected itself from usage: the server cut the
# prompt silently and answered 200 (Ollama). The recovery loop reports it as such.
SILENT_TRUNCATION = "silent_truncation"


class ErrorKind(StrEnum):
    """What a failure means for recovery."""

    CONTEXT_OVERFLOW = "context_overflow"  # the prompt does not fit: truncate history
    OUTPUT_CAP = "output_cap"  # max_tokens above the model's cap: lower max_tokens
    RATE_LIMIT = "rate_limit"  # a limit per second..day, throttling: wait and retry
    QUOTA = "quota"  # quota, billing, credit or monthly limit exhausted: do not retry
    PAYLOAD_TOO_LARGE = "payload_too_large"  # byte-size limit of a proxy or API
    AUTH = "auth"
    TRANSIENT = "transient"  # 5xx, overloaded, connection reset: retry
    INVALID_REQUEST = "invalid_request"
    OTHER = "other"


@dataclass(frozen=True, slots=True, kw_only=True)
class ErrorInfo:
    """A classified provider error, with the numbers its message states (else None).

    `prompt_tokens`: the input as counted by the provider; `limit`: the context window;
    `max_tokens`: the output requested; `output_limit`: the model's output cap;
    `requested_tokens`: prompt + output when the provider states only the sum;
    `input_chars` / `limit_chars`: a limit stated in characters instead of tokens.
    `reason` names the rule (or HTTP status) that decided the kind, for logs and reports.
    """

    kind: ErrorKind
    message: str = ""
    status: int | None = None
    code: str | None = None
    prompt_tokens: int | None = None
    limit: int | None = None
    max_tokens: int | None = None
    output_limit: int | None = None
    requested_tokens: int | None = None
    retry_after: float | None = None
    input_chars: int | None = None
    limit_chars: int | None = None
    reason: str | None = None

    @property
    def is_overflow(self) -> bool:
        return self.kind is ErrorKind.CONTEXT_OVERFLOW


class ChatcliError(Exception):
    """Base of every exception chatcli raises."""


class ConfigError(ChatcliError, ValueError):
    """An invalid configuration value; the message names the variable and the value."""


class ProviderError(ChatcliError):
    """A provider call failed; `info` says how it was classified."""

    def __init__(self, info: ErrorInfo) -> None:
        super().__init__(info.message or info.kind.value)
        self.info = info


class ContextRecoveryError(ChatcliError):
    """Every recovery level was tried (or skipped) and the request still does not fit.

    `info` is the last classified provider error; `attempts` describes each level applied or
    skipped, in order. The original provider exception is chained as `__cause__`.
    """

    def __init__(self, message: str, *, info: ErrorInfo, attempts: tuple[str, ...]) -> None:
        super().__init__(message)
        self.info = info
        self.attempts = attempts


class CompactionError(ChatcliError):
    """A compaction failed; the working view is exactly as it was before.

    `calls` and `usage`: the summary calls made before it failed and the usage they reported.
    They were paid for, so cost tracking counts them like a compaction that worked.
    """

    def __init__(self, *args: object, calls: int = 0, usage: Usage | None = None) -> None:
        super().__init__(*args)
        self.calls = calls
        self.usage = usage if usage is not None else Usage()


# --------------------------------------------------------------------------------------------
# Stop reasons
# --------------------------------------------------------------------------------------------

# Raw stop reasons of successful responses that mean "the context window filled up", not
# "max_tokens was reached": Anthropic and Bedrock Converse `model_context_window_exceeded`,
# Mistral `model_length` (SDK ChatCompletionChoiceFinishReason), Cohere v1 `ERROR_LIMIT`
# ("the reply was cut off because the model reached the maximum number of tokens for its
# context length", cohere chat_stream_end_event.py).
_CONTEXT_WINDOW_STOPS: Final = frozenset(
    {"model_context_window_exceeded", "model_length", "error_limit"}
)


def is_context_window_stop(raw_stop_reason: str | None) -> bool:
    """True when a provider's raw stop/finish reason means the context window filled up.

    Adapters map such a stop to `StopReason.CONTEXT_WINDOW` and treat it as overflow.
    Note that a plain `length` (OpenAI-compatible servers, Ollama `done_reason`) is ambiguous:
    vLLM, llama.cpp and Ollama also report it when the window, not max_tokens, ran out.
    """
    return raw_stop_reason is not None and raw_stop_reason.strip().lower() in _CONTEXT_WINDOW_STOPS


# --------------------------------------------------------------------------------------------
# Silent truncation
# --------------------------------------------------------------------------------------------


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
      window (the estimate exceeds it). A low count alone proves nothing: Ollama reports only
      the uncached part of a prompt whose prefix it kept in its KV cache (0.30 until
      ollama#16428; 0 for a fully cached prompt before ollama#5371), so every long cached
      conversation would look cut.
    - With the window unknown, `new_turn` (chatcli's count of the messages after the model's
      last answer: the new request, or the results of its last calls) and `before` (of the
      messages up to that answer) give a second signal. No earlier request held the new turn,
      so no cache can hide it: fewer than `min_ratio` of it arrived is a cut when, besides,
      the count is what a window cap leaves (a power of two of at least 1,024: Ollama keeps
      exactly `num_ctx`, and every default and usual setting of it is one), or the server
      read at least `min_ratio` of what came before it (it dropped the new turn, as
      llama-cpp-python's guessed chat format drops tool results). A prompt sent again whole (a
      retry that hits the cache: Ollama 0.30 reports about 1 token) matches neither.
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


# --------------------------------------------------------------------------------------------
# The rule table
# --------------------------------------------------------------------------------------------

_Source = Literal["code", "text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class _Rule:
    """One row of the table: `pattern` full-matches a code or searches the message text."""

    name: str
    kind: ErrorKind
    source: _Source
    pattern: re.Pattern[str]


def _code(kind: ErrorKind, name: str, codes: str) -> _Rule:
    """`codes` is space-separated; they are compared case-insensitively, as whole codes."""
    alternatives = "|".join(re.escape(code.lower()) for code in codes.split())
    return _Rule(name=name, kind=kind, source="code", pattern=re.compile(alternatives))


def _text(kind: ErrorKind, name: str, regex: str) -> _Rule:
    return _Rule(name=name, kind=kind, source="text", pattern=re.compile(regex, re.IGNORECASE))


_K = ErrorKind
# A number as providers print it: 200000, 200,000 or 200_000.
_N: Final = r"\d{1,3}(?:[,_]\d{3})+|\d+"
# "context length", "context window", "context_size", "context limit".
_CTX: Final = r"\bcontext[\s_-]*(?:length|window|size|limit)\b"
# Within one sentence: anything but a line break or a full stop; the point of a decimal number
# ("prompt length (9351.0)", TensorRT-LLM) does not end the sentence.
_SAME_SENTENCE: Final = r"(?:[^.\n]|(?<=\d)\.(?=\d))"

# A rate window, as providers write it: "per minute", "_per_minute_" (Vertex quota names),
# "free-models-per-day" (OpenRouter), "40000 tokens/min", "Limit: 150000 / min" (old OpenAI),
# TPM / TPD / RPM / RPD / ITPM (OpenAI, Groq, Moonshot, Anthropic), "hourly usage limit"
# (Ollama cloud), "daily token limit", "within a given time frame" (Meta Llama API).
# A slash form needs a number or a counted noun before it, so URL paths ("/v1/d/") do not count.
_PERIOD: Final = r"(?:sec(?:ond)?s?|min(?:ute)?s?|hours?|hrs?|days?)"
_RATE_WINDOW: Final = (
    rf"(?<![a-z0-9])per[\s_-]+{_PERIOD}(?![a-z0-9])"
    rf"|(?:(?<![\w.])\d[\d,._]*|\b(?:tokens?|requests?|calls?|queries))\s*/\s*(?:[smhd]|{_PERIOD})\b"
    r"|\b(?:[io]?tp|rp)[smhd]\b|\b(?:hourly|daily)\b|\bwithin\s+a\s+given\s+time\s+frame\b"
)

_RULES: Final[tuple[_Rule, ...]] = (
    # 1. Structured codes whose meaning is specific (error.code / error.type / status fields,
    #    snake_case words and exception names in the text). Look-alikes first: a rate limit or
    #    a quota error must never be read as overflow.
    _code(
        _K.QUOTA, "code:quota", "insufficient_quota billing_hard_limit_reached billing_not_active"
    ),
    _code(
        _K.RATE_LIMIT,
        "code:rate_limit",
        "rate_limit_exceeded rate_limit_error resource_exhausted ThrottlingException"
        " rateLimitExceeded",
    ),
    _code(
        _K.AUTH,
        "code:auth",
        "authentication_error permission_error invalid_api_key unauthenticated"
        " permission_denied api_key_invalid AccessDeniedException UnrecognizedClientException",
    ),
    _code(_K.PAYLOAD_TOO_LARGE, "code:payload", "request_too_large"),
    _code(
        _K.CONTEXT_OVERFLOW,
        "code:overflow",
        "context_length_exceeded exceed_context_size_error model_max_prompt_tokens_exceeded"
        " tokens_limit_reached input_too_large " + " ".join(_CONTEXT_WINDOW_STOPS),
    ),
    _code(
        _K.INVALID_REQUEST,
        "code:invalid_param",
        "unsupported_parameter unsupported_value string_above_max_length",
    ),
    _code(_K.TRANSIENT, "code:overloaded", "overloaded_error"),
    # 2. Message patterns. Look-alikes of overflow first: a limit per period of time is a rate
    #    limit whatever else the message says ("Token limit (500,000 per day) exceeded"), so
    #    the window guard comes before every overflow pattern; then quotas and credit limits.
    #    A day is a rate window too: providers code per-day limits as rate limits (OpenAI/Groq
    #    TPD `rate_limit_exceeded`, Bedrock "Too many tokens per day" ThrottlingException).
    # An empty balance is billing, whatever status or words surround it (Zhipu sends it as a
    # 429, and an SDK adds "Too Many Requests"): DeepSeek "Insufficient Balance" (402), Zhipu
    # "余额不足" (insufficient balance), "欠费" (account in arrears).
    _text(_K.QUOTA, "text:balance", r"\binsufficient\s+(?:balance|credits?|funds)\b|余额不足|欠费"),
    _text(_K.RATE_LIMIT, "text:per_period", _RATE_WINDOW),
    _text(_K.RATE_LIMIT, "text:rate_limit", r"\brate[\s_-]*limit|\btoo many requests\b"),
    # Bedrock ThrottlingException: "Too many tokens, please wait before trying again."
    _text(_K.RATE_LIMIT, "text:throttle", r"please wait before trying again|\bthrottl"),
    # Mistral "Service tier capacity exceeded for this model" (a 429 per LiteLLM's
    # litellm_core_utils/exception_mapping_utils.py).
    _text(_K.RATE_LIMIT, "text:capacity", r"\bservice tier capacity exceeded\b"),
    # Any quota ("Quota exceeded for metric: ...", "insufficient_quota") and credit limits.
    _text(
        _K.QUOTA,
        "text:quota",
        r"(?<![a-z0-9])quota(?![a-z0-9])"
        r"|\bcredit balance is too low\b|\brequires more credits\b|\bcan only afford\b",
    ),
    # OpenRouter per-key spending limit "Prompt tokens limit exceeded: 230799 > 91442".
    _text(
        _K.QUOTA,
        "text:key_limit",
        r"\bprompt tokens limit exceeded\b|\b(?:monthly|weekly|spend(?:ing)?) limit\b",
    ),
    # llama.cpp: "input (N tokens) is too large to process. increase the physical batch size"
    _text(_K.INVALID_REQUEST, "text:batch_size", r"\bphysical batch size\b"),
    # OpenAI parameter validation ("string too long. Expected a string with maximum length").
    _text(
        _K.INVALID_REQUEST, "text:param", r"\bstring too long\b|\bunsupported (?:parameter|value)\b"
    ),
    # Overflow worded around the context window: "exceeds the available context size",
    # "exceed context limit", "longer than the model's context length", "context length of
    # only N tokens", "maximum context length is N", "maximum model length of N", ...
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:exceeds_context",
        r"(?:exceed|overflow|longer than|larger than|greater than|too long|too large|beyond)"
        rf"[^.\n]{{0,80}}?{_CTX}",
    ),
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:context_exceeded",
        rf"{_CTX}[^.\n]{{0,40}}?\b(?:exceed|overflow|reached|full\b|(?:is|of) only\b)",
    ),
    _text(_K.CONTEXT_OVERFLOW, "text:max_context", rf"\bmax(?:imum)?\s+{_CTX}"),
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:model_length",
        r"\bmax(?:imum)?[\s_-]*model[\s_-]*len(?:gth)?\b|\bmodel[\s_-]*max(?:imum)?\s+length\b",
    ),
    # Overflow worded around the prompt: "prompt is too long", "Input is too long for
    # requested model", "the prompt is longer than", "input token count (N) exceeds", "Prompt
    # exceeds max length" (Zhipu), "prompt length (N.0), ... should not exceed" (TensorRT-LLM),
    # "total number of tokens (prompt and prediction) cannot exceed N" (Cohere), ...
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:prompt_too_long",
        rf"\b(?:prompt|input|messages?)\b{_SAME_SENTENCE}{{0,40}}?\b(?:is|are)\s+"
        r"(?:too\s+long|longer\s+than)\b",
    ),
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:input_tokens_exceed",
        r"\b(?:prompt|input)(?:[\s_-]*(?:token[\s_-]*)?(?:count|length|size|tokens?))?\b"
        rf"{_SAME_SENTENCE}{{0,40}}?\bexceed",
    ),
    # The input's size stated as an allowed range: "Range of input length should be [1, N]"
    # (DashScope).
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:input_range",
        r"\b(?:input|prompt)[\s_-]*(?:length|tokens?)\s+(?:should|must)\s+be\s+(?:in\s+)?\[",
    ),
    _text(_K.CONTEXT_OVERFLOW, "text:max_prompt", r"\bmax(?:imum)?\s+prompt\s+length\b"),
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:tgi_inputs",
        r"`inputs`\s+(?:tokens\s+\+\s+`max_new_tokens`\s+must|must\s+have\s+less\s+than)",
    ),
    # OpenAI, Groq, Cerebras: "Please reduce the length of the messages (or completion)".
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:reduce_length",
        r"\breduce\s+the\s+length\s+of\s+the\s+(?:messages|prompt|input)\b",
    ),
    _text(_K.CONTEXT_OVERFLOW, "text:n_keep", r"\bn_keep\b[^.\n]{0,20}?>=?\s*n_ctx\b"),
    _text(_K.CONTEXT_OVERFLOW, "text:ollama_truncating", r"\btruncating input prompt\b"),
    # GitHub Models: "Request body too large for gpt-4o model. Max size: 8000 tokens."
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:max_size_tokens",
        rf"\bmax(?:imum)?\s+size:?\s*(?:{_N})\s+tokens\b",
    ),
    # Bedrock's JSON-schema check on the prompt string (a limit in characters).
    _text(_K.CONTEXT_OVERFLOW, "text:max_length_chars", r"\bexpected\s+maxLength:"),
    # Byte limits of proxies and APIs, after the token-worded patterns above.
    _text(
        _K.PAYLOAD_TOO_LARGE,
        "text:payload",
        r"\brequest\s+(?:entity|body|payload)\s+(?:is\s+)?too\s+large\b|\bpayload\s+too\s+large\b"
        r"|\bexceeds\s+the\s+maximum\s+(?:request\s+)?size\b|\bpayload\s+size\s+exceeds\b"
        rf"|\bmax(?:imum)?\s*:?\s*\(?(?:{_N})\s*(?:[kmg]i?b|bytes)\b",
    ),
    # max_tokens above the model's output cap: fixed by lowering max_tokens.
    _text(
        _K.OUTPUT_CAP, "text:max_tokens_too_large", r"\bmax_\w*tokens\b[^.\n]{0,40}?\btoo\s+large\b"
    ),
    _text(
        _K.OUTPUT_CAP,
        "text:output_tokens_cap",
        r"\bat\s+most\s+\S+\s+(?:completion|output)\s+tokens\b"
        r"|\bmaximum\s+allowed\s+number\s+of\s+output\s+tokens\b",
    ),
    _text(
        _K.OUTPUT_CAP,
        "text:max_tokens_range",
        r"\bmax[\s_]*(?:\w+[\s_]*)?tokens\W[^.\n]{0,80}?"
        r"(?:above\s+maximum|must\s+be\s+<=|must\s+be\s+less\s+than|(?:supported|valid)\s+range)",
    ),
    # Bedrock: "The maximum tokens you requested exceeds the model limit of N".
    _text(
        _K.OUTPUT_CAP,
        "text:max_tokens_exceed_model",
        rf"\bmax(?:imum)?[\s_]*tokens\b{_SAME_SENTENCE}{{0,40}}?\bexceeds?\s+the\s+model(?:'s)?"
        r"\s+limit\b",
    ),
    # Bedrock InvokeModel "Malformed input request: 8192 is not less or equal to 8191". The
    # 4-digit floor keeps temperature / top_k (<= 500) validation out.
    _text(
        _K.OUTPUT_CAP,
        "text:bedrock_range",
        r"\b\d{4,}\s+is\s+not\s+less\s+or\s+equal\s+to\s+\d{4,}\b",
    ),
    # The generic phrases of the original table, after every guard above.
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:generic",
        r"\btokens?\s+limit\b|\brequest\s+too\s+large\b|\binput\s+too\s+long\b"
        r"|\btoo\s+many\s+tokens\b",
    ),
    _text(
        _K.AUTH,
        "text:auth",
        r"\b(?:invalid|incorrect)\s+(?:x-)?api[\s_-]*key\b|\bapi\s+key\s+not\s+valid\b"
        r"|\bunauthori[sz]ed\b|\bpermission\s+denied\b",
    ),
    _text(
        _K.TRANSIENT,
        "text:transient",
        r"\boverloaded\b|\btimed\s+out\b|\bconnection\s+(?:reset|refused|aborted|error)\b"
        r"|\btemporarily\s+unavailable\b|\bservice\s+unavailable\b",
    ),
    # 3. Generic codes and exception class names: they only restate the HTTP family, so they
    #    come after every message pattern. (SDK status errors need no class rule: they carry
    #    `status_code`, and the status hint below covers them.) Connection failures and
    #    timeouts have no status at all: their class names are the only evidence.
    # LiteLLM's ContextWindowExceededError is its guess from substrings of the provider's
    # message (litellm_core_utils/exception_mapping_utils.py): the message it carries, read
    # by the patterns above, decides first; the class name says overflow only when they
    # found nothing.
    _code(_K.CONTEXT_OVERFLOW, "code:overflow_class", "ContextWindowExceededError"),
    _code(
        _K.TRANSIENT,
        "code:server",
        "api_error server_error internal unavailable deadline_exceeded InternalServerError"
        " ServiceUnavailableError ServerError InternalServerException"
        " ServiceUnavailableException ModelNotReadyException APIConnectionError APITimeoutError"
        " TimeoutError ConnectionError TimeoutException TransportError"
        # aiohttp (google-genai's async transport when installed, litellm's): a refused or
        # dropped connection, a response cut off mid-body.
        " ClientConnectionError ClientPayloadError",
    ),
    _code(
        _K.INVALID_REQUEST,
        "code:invalid",
        "invalid_request_error invalid_argument failed_precondition not_found_error"
        " BadRequestError NotFoundError UnprocessableEntityError ValidationException"
        " InvalidParameter BadRequest",
    ),
)


_STATUS_HINTS: Final = {
    401: _K.AUTH,
    402: _K.QUOTA,  # OpenRouter "requires more credits"
    403: _K.AUTH,
    408: _K.TRANSIENT,
    409: _K.TRANSIENT,
    413: _K.PAYLOAD_TOO_LARGE,
    425: _K.TRANSIENT,
    429: _K.RATE_LIMIT,
}


def _status_hint(status: int | None) -> ErrorKind:
    """The kind an HTTP status suggests when nothing more specific was found."""
    if status is None:
        return ErrorKind.OTHER
    if status in _STATUS_HINTS:
        return _STATUS_HINTS[status]
    if 500 <= status <= 599:
        return ErrorKind.TRANSIENT
    return ErrorKind.INVALID_REQUEST if 400 <= status <= 499 else ErrorKind.OTHER


# --------------------------------------------------------------------------------------------
# Number extraction: templates where `{field}` is a number captured into that ErrorInfo field
# and a space matches any run of whitespace (servers pad their messages unpredictably).
# `{output_limit_excl}` is an exclusive upper bound (Vertex), stored minus one.
# --------------------------------------------------------------------------------------------

_NUMBER_TEMPLATES: Final = (
    r"{prompt_tokens} \+ {max_tokens} > {limit}",  # Anthropic "199759 + 8192 > 200000"
    r"maximum context length is {limit}",  # OpenAI, Azure, vLLM, DeepSeek, FastChat
    r"(?:messages|prompt) resulted in {~}{prompt_tokens} tokens",
    r"you requested {requested_tokens} tokens \({prompt_tokens} (?:in|for) (?:the messages"
    r"|your prompt)[;,] {max_tokens} (?:in|for) the completion\)",
    r"too large: {max_tokens}",  # "max_tokens is too large: 8192"
    # Parts of the above when the breakdown differs ("... 730 in the functions, and 800 in
    # the completion)", OpenAI) or is missing (vLLM, OpenRouter "about N tokens (N of text
    # input)"): the sum, and the completion, each on its own.
    r"you requested {~}{requested_tokens} tokens",
    r"(?:,|\band) {max_tokens} (?:in|for) the completion\)",
    r"\({prompt_tokens} of text input\)",
    r"your request has {prompt_tokens} input tokens",  # vLLM max_tokens validation
    r"you requested {max_tokens} output tokens",  # newest vLLM wording
    r"prompt contains at least {prompt_tokens} input tokens",
    r"for a total of at least {requested_tokens} tokens",
    r"prompt is too long: {prompt_tokens} tokens > {limit}",  # Anthropic / Bedrock
    r"input token count \({prompt_tokens}\) exceeds the maximum number of tokens allowed"
    r" \(?{limit}",  # Gemini
    r"`inputs` tokens \+ `max_new_tokens` must be <= {limit}\. Given: {prompt_tokens}"
    r" `inputs` tokens and {max_tokens} `max_new_tokens`",  # TGI
    r"`inputs` must have less than {limit} tokens\. Given: {prompt_tokens}",  # TGI
    r"current length is {prompt_tokens} while limit is {limit}",  # Cerebras
    r"prompt token count of {prompt_tokens} exceeds the limit of {limit}",  # GitHub Copilot
    r"\(length {prompt_tokens}\) is longer than the maximum model length of {limit}",  # vLLM
    r"\(total length {prompt_tokens}\) is too long to fit into the model \(context length"
    r" {limit}\)",  # vLLM
    # "(N tokens) exceeds/is longer than <the limit's name> (M tokens)": llama.cpp server,
    # LocalAI, SGLang, oMLX, xAI ("Current message (N tokens) exceeds budget (M tokens)").
    r"\({prompt_tokens} tokens\) (?:exceeds|is longer than|is larger than) [^()\n]{0,60}?"
    r"\({limit} tokens\)",
    # TensorRT-LLM: "Prompt length (N) exceeds maximum sequence length (M)", "The sum of
    # prompt length (N.0), query length (0) should not exceed max_num_tokens (M)".
    r"prompt length \({prompt_tokens}(?:\.0+)?\)[^\n]{0,40}?\bexceeds? [a-z_\s]{0,40}?\({limit}\)",
    # DashScope: "Range of input length should be [1, N]".
    r"(?:input|prompt) (?:length|tokens?) (?:should|must) be (?:in )?\[\d+, {limit}\]",
    # llama-cpp-python: the number is len(prompt_tokens) (llama_cpp/llama.py).
    r"requested tokens \({prompt_tokens}\) exceed context window of {limit}",
    r"max length: {limit}",
    r"number of tokens \({prompt_tokens}\) exceeded maximum context length \({limit}\)",
    r"limit={limit} prompt={prompt_tokens}",  # Ollama "truncating input prompt" log line
    r"keep the first {prompt_tokens} tokens.{0,160}?context length of only {limit}",  # LM Studio
    r"n_keep\W{0,3}{prompt_tokens}\)?\s*>=?\s*n_ctx\W{0,3}{limit}",  # LM Studio
    r"cannot exceed {limit} - received {requested_tokens}",  # Cohere
    r"maximum prompt length is {limit} but the request contains {prompt_tokens} tokens",  # xAI
    r"configured limit of {limit} tokens",  # GPT-5
    r"max(?:imum)? size:? {limit} tokens",  # GitHub Models
    r"expected maxLength: {limit_chars}, actual: {input_chars}",  # Bedrock
    r"at most {output_limit} (?:completion|output) tokens",
    r"expected a value <= {output_limit}, but got {max_tokens}",
    r"max_tokens: {max_tokens} > {output_limit}",
    r"exceeds the model(?:'s)? limit of {output_limit}",  # Bedrock
    r"range of max_\w*tokens (?:is|should be) \[\d+, {output_limit}\]",  # DeepSeek
    r"{max_tokens} is not less or equal to {output_limit}",
    r"value of {max_tokens} but the supported range is from \d+ \(inclusive\) to"
    r" {output_limit_excl} \(exclusive\)",
    r"(?<!\+\s)`max_new_tokens` must be <= {output_limit}",
)


# `{~}` in a template: a size stated approximately ("about N tokens", "over N tokens").
_APPROXIMATELY: Final = r"(?:(?:about|approximately|around|roughly|over|more\s+than|~)\s*)?"


def _compile_template(template: str) -> re.Pattern[str]:
    regex = template.replace(" ", r"\s+").replace("{~}", _APPROXIMATELY)
    regex = re.sub(r"\{([a-z_]+)\}", lambda m: rf"(?P<{m[1]}>{_N})", regex)
    return re.compile(regex, re.IGNORECASE)


_NUMBER_PATTERNS: Final = tuple(_compile_template(t) for t in _NUMBER_TEMPLATES)

# Structured fields that state numbers (llama.cpp server's exceed_context_size_error).
_NUMBER_KEYS: Final = {"n_prompt_tokens": "prompt_tokens", "n_ctx": "limit"}


def _to_int(text: str) -> int:
    return int(text.replace(",", "").replace("_", ""))


def _numbers_in(text: str) -> dict[str, int]:
    found: dict[str, int] = {}
    for pattern in _NUMBER_PATTERNS:
        for match in pattern.finditer(text):
            for field, raw in match.groupdict().items():
                value = _to_int(raw)
                if field.endswith("_excl"):
                    field, value = field.removesuffix("_excl"), value - 1
                found.setdefault(field, value)
    return found


# --------------------------------------------------------------------------------------------
# Evidence gathering
# --------------------------------------------------------------------------------------------

_CODE_KEYS: Final = frozenset(
    {"code", "type", "status", "error_code", "errortype", "name", "reason", "__type"}
)
_MESSAGE_KEYS: Final = frozenset({"message", "errormessage", "error", "detail", "msg", "details"})
_STATUS_KEYS: Final = frozenset({"status_code", "statuscode", "httpstatuscode", "http_status"})
_HEADER_KEYS: Final = frozenset({"headers", "httpheaders"})
_EXCEPTION_CODE_ATTRS: Final = ("status_code", "status", "code", "type", "error_code")
_EXCEPTION_VALUE_ATTRS: Final = ("body", "details", "response_json")
_EXCEPTION_TEXT_ATTRS: Final = ("message", "api_message")

# Identifier-like words in free text: snake_case / SCREAMING_CASE codes and exception names.
_IDENTIFIER: Final = re.compile(
    r"\b[A-Za-z][A-Za-z0-9]*(?:_[A-Za-z0-9]+)+\b|\b[A-Z][A-Za-z]*(?:Exception|Error)\b"
)
_REASON_PHRASES: Final = "|".join(
    re.escape(s.phrase) for s in HTTPStatus if 400 <= s.value <= 599 and s.phrase
)
_STATUS_IN_TEXT: Final = re.compile(
    r"(?:^\s*|\b(?:error|status|http|code)(?:\s+code)?['\"]?\s*[:=]?\s*)([45]\d\d)\b(?!\s*tokens)"
    rf"|\b([45]\d\d)\s+(?:{_REASON_PHRASES})\b",
    re.IGNORECASE,
)
_RETRY_IN_TEXT: Final = re.compile(
    r"\b(?:retry|try again)\s+(?:after|in)\s+(\d+(?:\.\d+)?)\s*"
    r"(ms|milliseconds?|s|secs?|seconds?|m|mins?|minutes?)\b",
    re.IGNORECASE,
)
# Bounds on the work done for one error, whatever it is handed: error bodies are small, and
# the classifier must stay cheap and total on adversarial input.
_MAX_DEPTH: Final = 8
_MAX_ITEMS: Final = 2_000
_MAX_TEXT: Final = 100_000
_MAX_TEXTS: Final = 256
_MAX_PARSE_ATTEMPTS: Final = 16
_MAX_CHAIN: Final = 16


class _Evidence:
    """What was found in an error: texts, codes, statuses, numbers. Built once, then read."""

    def __init__(self) -> None:
        self.texts: list[str] = []
        self.messages: list[str] = []
        self.codes: list[str] = []  # every code-like word, for the rules
        self.fields: list[str] = []  # codes read from code/type/status fields, in order
        self.status: int | None = None
        self.numbers: dict[str, int] = {}
        self.retry_after: float | None = None
        self._items = 0

    @property
    def text(self) -> str:
        return "\n".join(self.texts)

    def add_text(self, text: str, depth: int = 0) -> None:
        text = text[:_MAX_TEXT]
        if len(self.texts) >= _MAX_TEXTS or not text.strip():
            return
        if any(text in seen for seen in self.texts):
            return
        self.texts.append(text)
        self.codes.extend(m.lower() for m in _IDENTIFIER.findall(text))
        for value in _embedded_values(text):
            self.add_value(value, depth + 1)

    def add_value(self, value: object, depth: int = 0) -> None:
        self._items += 1
        if depth > _MAX_DEPTH or self._items > _MAX_ITEMS:
            return
        if isinstance(value, str):
            self.add_text(value, depth)
        elif isinstance(value, Mapping):
            for key, item in value.items():
                self._add_field(str(key).lower(), item, depth)
        elif isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
            for item in value:
                self.add_value(item, depth + 1)
        elif isinstance(value, bytes | bytearray):
            self.add_text(bytes(value).decode("utf-8", "replace"), depth)

    def _add_field(self, key: str, item: object, depth: int) -> None:
        if key in _CODE_KEYS or key in _STATUS_KEYS:
            self.add_code(item)
        if key in _MESSAGE_KEYS and isinstance(item, str) and item.strip():
            self.messages.append(item.strip())
        if key in _NUMBER_KEYS and isinstance(item, int) and not isinstance(item, bool):
            self.numbers.setdefault(_NUMBER_KEYS[key], item)
        if key in _HEADER_KEYS and isinstance(item, Mapping):
            self.add_headers(item)
        if key == "retrydelay" and isinstance(item, str):  # Gemini RetryInfo "39s"
            self._set_retry(_seconds(item.removesuffix("s"), "s"))
        self.add_value(item, depth + 1)

    def add_code(self, value: object) -> None:
        """A status/code/type field: an HTTP status when numeric, else a code word."""
        if isinstance(value, bool):
            return
        if isinstance(value, int) or (isinstance(value, str) and value.strip().isdigit()):
            number = int(value)
            if 100 <= number <= 599 and self.status is None:
                self.status = number
        elif isinstance(value, str) and value.strip():
            self.fields.append(value.strip())
            self.codes.append(value.strip().lower())

    def add_headers(self, headers: object) -> None:
        for name, unit in (("retry-after-ms", "ms"), ("retry-after", "s")):
            raw = _header(headers, name)
            if raw is not None:
                self._set_retry(_seconds(raw, unit))

    def add_exception(self, exc: BaseException) -> None:
        self.codes.extend(cls.__name__.lower() for cls in type(exc).__mro__)
        for attr in _EXCEPTION_CODE_ATTRS:
            self.add_code(_attr(exc, attr))
        for attr in _EXCEPTION_VALUE_ATTRS:
            self.add_value(_attr(exc, attr))
        for attr in _EXCEPTION_TEXT_ATTRS:
            message = _attr(exc, attr)
            if isinstance(message, str):
                self.add_text(message)
        self.add_text(_safe_str(exc))
        self._add_response(_attr(exc, "response"))

    def _add_response(self, response: object) -> None:
        if isinstance(response, Mapping):  # botocore ClientError.response
            self.add_value(response)
            return
        if response is not None:
            self.add_code(_attr(response, "status_code"))
            self.add_headers(_attr(response, "headers"))

    def _set_retry(self, seconds: float | None) -> None:
        if seconds is not None and self.retry_after is None:
            self.retry_after = seconds


def _attr(obj: object, name: str) -> object:
    """getattr that survives properties which raise (an unread streaming response, ...)."""
    try:
        return getattr(obj, name, None)
    except Exception:
        return None


def _safe_str(obj: object) -> str:
    try:
        return str(obj)
    except Exception:
        return ""


def _header(headers: object, name: str) -> str | None:
    get = _attr(headers, "get")
    if isinstance(headers, Mapping):
        for key, value in headers.items():
            if str(key).lower() == name:
                return str(value)
    elif callable(get):  # httpx-style case-insensitive Headers
        try:
            value = get(name)
        except Exception:
            return None
        return None if value is None else str(value)
    return None


_UNIT_SECONDS: Final = {
    "ms": 0.001,
    "millisecond": 0.001,
    "milliseconds": 0.001,
    "s": 1.0,
    "sec": 1.0,
    "secs": 1.0,
    "second": 1.0,
    "seconds": 1.0,
    "m": 60.0,
    "min": 60.0,
    "mins": 60.0,
    "minute": 60.0,
    "minutes": 60.0,
}


def _seconds(raw: str, unit: str) -> float | None:
    try:
        value = float(raw.strip()) * _UNIT_SECONDS[unit.lower()]
    except (ValueError, KeyError):
        return None  # e.g. an HTTP-date Retry-After: turning it into a delay needs a clock
    return value if 0 <= value < float("inf") else None


def _embedded_values(text: str) -> Iterator[object]:
    """JSON or Python-repr objects embedded in a message ("API Error: 400 {...}", "b'{...}'")."""
    pos, attempts = 0, 0
    while attempts < _MAX_PARSE_ATTEMPTS:
        start = min((i for i in (text.find("{", pos), text.find("[", pos)) if i >= 0), default=-1)
        if start < 0:
            return
        attempts += 1
        value, end = _parse_at(text, start)
        if end > start:
            yield value
            pos = end
        else:
            pos = start + 1


def _parse_at(text: str, start: int) -> tuple[object, int]:
    """Parse a JSON value, else a Python literal (str() of a dict), at `start`; (None, -1)."""
    try:
        return json.JSONDecoder().raw_decode(text, start)
    except (ValueError, RecursionError):
        pass
    end = _balanced_end(text, start)
    if end < 0:
        return None, -1
    try:
        return ast.literal_eval(text[start:end]), end
    # literal_eval can fail in many ways on arbitrary text (deep nesting included).
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return None, -1


def _balanced_end(text: str, start: int) -> int:
    """Index just past the bracket that closes the one at `start`, skipping quoted strings."""
    depth, quote, escaped = 0, "", False
    for index in range(start, len(text)):
        char = text[index]
        if quote:
            if escaped:
                escaped = False
            elif char == "\\":
                escaped = True
            elif char == quote:
                quote = ""
            continue
        if char in "'\"":
            quote = char
        elif char in "{[":
            depth += 1
        elif char in "}]":
            depth -= 1
            if depth == 0:
                return index + 1
    return -1


def _exception_chain(exc: BaseException) -> Iterator[BaseException]:
    seen: set[int] = set()
    current: BaseException | None = exc
    while current is not None and id(current) not in seen and len(seen) < _MAX_CHAIN:
        seen.add(id(current))
        yield current
        cause = current.__cause__
        if cause is None and not current.__suppress_context__:
            cause = current.__context__
        current = cause


def _gather(error: object) -> tuple[_Evidence, ErrorInfo | None]:
    """Evidence from an exception (whole chain), a string or a parsed body.

    Returns the info of a chatcli error found in the chain: it was classified already.
    """
    evidence = _Evidence()
    if isinstance(error, BaseException):
        for exc in _exception_chain(error):
            info = _attr(exc, "info")
            if isinstance(exc, ChatcliError) and isinstance(info, ErrorInfo):
                return evidence, info
            evidence.add_exception(exc)
    else:
        evidence.add_value(error)
    if evidence.status is None:
        evidence.status = _status_in_text(evidence.text)
    if evidence.retry_after is None:
        evidence.retry_after = _retry_in_text(evidence.text)
    return evidence, None


def _status_in_text(text: str) -> int | None:
    match = _STATUS_IN_TEXT.search(text)
    return None if match is None else int(match[1] or match[2])


def _retry_in_text(text: str) -> float | None:
    match = _RETRY_IN_TEXT.search(text)
    return None if match is None else _seconds(match[1], match[2].lower())


# --------------------------------------------------------------------------------------------
# Deciding
# --------------------------------------------------------------------------------------------


# The kinds whose numbers recovery uses, and that a 429 can never be.
_TOKEN_KINDS: Final = frozenset({ErrorKind.CONTEXT_OVERFLOW, ErrorKind.OUTPUT_CAP})


def _first_rule(evidence: _Evidence) -> tuple[_Rule, str] | None:
    """The first rule of the table that matches, with the code or text it matched."""
    text = evidence.text
    for rule in _RULES:
        if rule.source == "code":
            hit = next((c for c in evidence.codes if rule.pattern.fullmatch(c)), None)
        else:
            found = rule.pattern.search(text)
            hit = None if found is None else found[0]
        if hit is not None:
            return rule, hit
    return None


def _decide(evidence: _Evidence, status: int | None) -> tuple[ErrorKind, str | None, str | None]:
    """(kind, reason, code) for the evidence; the HTTP status is only a fallback hint."""
    found = _first_rule(evidence)
    if found is None:
        kind = _status_hint(status)
        return kind, (None if kind is ErrorKind.OTHER else f"http:{status}"), None
    rule, hit = found
    if status == 429 and rule.source == "text" and rule.kind in _TOKEN_KINDS:
        # A 429 is a throttle whatever its wording ("... reduce the prompt length").
        return ErrorKind.RATE_LIMIT, "http:429", None
    if status in (401, 403) and rule.kind is ErrorKind.INVALID_REQUEST:
        # A generic "invalid request" type says less than the status that refused the caller.
        return ErrorKind.AUTH, f"http:{status}", (hit if rule.source == "code" else None)
    return rule.kind, rule.name, (hit if rule.source == "code" else None)


# Credentials a provider or a proxy may echo in an error (an "Invalid key: Bearer sk-..." body,
# a URL with ?key=): they never reach a message chatcli shows, logs or stores.
_SECRETS = (
    (re.compile(r"(?i)\b(bearer|basic)\s+[A-Za-z0-9._~+/=-]{6,}"), r"\1 ***"),
    (
        re.compile(
            r"(?i)\b(api[-_ ]?key|x-api-key|x-goog-api-key|access[-_ ]?token|authorization)"
            r"([\"']?\s*[:=]\s*[\"']?)[^\s\"',;&}]{6,}"
        ),
        r"\1\2***",
    ),
    (re.compile(r"([?&](?:key|api_key|access_token)=)[^&\s\"']+"), r"\1***"),
    (re.compile(r"\b(sk-(?:ant-|proj-)?)[A-Za-z0-9_-]{6,}"), r"\1***"),
    (re.compile(r"\bAIza[0-9A-Za-z_-]{20,}"), "AIza***"),
)


def redact_secrets(text: str) -> str:
    """`text` with API keys, bearer tokens and key query parameters replaced by ***."""
    for pattern, replacement in _SECRETS:
        text = pattern.sub(replacement, text)
    return text


def classify_error(error: object, *, status: int | None = None) -> ErrorInfo:
    """Classify an exception, a message string or a parsed JSON body into an `ErrorInfo`.

    `status` is the HTTP status when the caller knows it (it wins over one found in the
    error). Never raises: anything unrecognised is `ErrorKind.OTHER` (or what the status
    suggests). A chatcli error that carries an `ErrorInfo` returns it unchanged.
    """
    evidence, known = _gather(error)
    if known is not None:
        return known
    status = status if status is not None else evidence.status
    kind, reason, code = _decide(evidence, status)
    numbers: dict[str, int] = {}
    if kind in _TOKEN_KINDS:
        numbers = {**_numbers_in(evidence.text), **evidence.numbers}
    return ErrorInfo(
        kind=kind,
        message=redact_secrets(
            evidence.messages[0] if evidence.messages else evidence.text.strip()
        ),
        status=status,
        code=code or next(iter(evidence.fields), None),
        retry_after=evidence.retry_after,
        reason=reason,
        prompt_tokens=numbers.get("prompt_tokens"),
        limit=numbers.get("limit"),
        max_tokens=numbers.get("max_tokens"),
        output_limit=numbers.get("output_limit"),
        requested_tokens=numbers.get("requested_tokens"),
        input_chars=numbers.get("input_chars"),
        limit_chars=numbers.get("limit_chars"),
    )

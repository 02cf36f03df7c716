"""The classification rules, as data: one ordered table, tried top to bottom, the first rule
that matches deciding the kind; and the kind an HTTP status suggests when none matches.

A rule full-matches a code (an `error.code` / `type` / `status` field, a snake_case word or an
exception class name) or searches the message text. The order is the point:

1. Structured codes whose meaning is specific, look-alikes first: a rate limit or a quota
   error must never be read as an overflow.
2. Message patterns: look-alike guards (a limit per period of time, a quota, a credit limit,
   an output asked for that is larger than the whole window) before the overflow patterns they
   resemble; byte limits and other output caps after the token-worded overflow patterns; the
   generic phrases last.
3. Generic codes and exception class names, which only say which HTTP family the error is
   in, after every message pattern.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Final, Literal

from chatcli.errors.kinds import ErrorKind
from chatcli.errors.numbers import NUMBER
from chatcli.overflow_signs import CONTEXT_WINDOW_STOPS

__all__ = ["RULES", "Rule", "status_hint"]


_Source = Literal["code", "text"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Rule:
    """One row of the table: `pattern` full-matches a code or searches the message text."""

    name: str
    kind: ErrorKind
    source: _Source
    pattern: re.Pattern[str]


def _code(kind: ErrorKind, name: str, codes: str) -> Rule:
    """`codes` is space-separated; they are compared case-insensitively, as whole codes."""
    alternatives = "|".join(re.escape(code.lower()) for code in codes.split())
    return Rule(name=name, kind=kind, source="code", pattern=re.compile(alternatives))


def _text(kind: ErrorKind, name: str, regex: str) -> Rule:
    return Rule(name=name, kind=kind, source="text", pattern=re.compile(regex, re.IGNORECASE))


_K = ErrorKind
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

RULES: Final[tuple[Rule, ...]] = (
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
        " tokens_limit_reached input_too_large"
        # llamafile's plain-text reasons (llamafile/server/v1_chat_completions.cpp, slot.cpp).
        " out_of_context out_of_context_due_to_long_message " + " ".join(CONTEXT_WINDOW_STOPS),
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
    # An output asked for that is larger than the whole window (vLLM "max_tokens=N cannot be
    # greater than max_model_len=M. Please request fewer output tokens."): lowering max_tokens
    # is the fix, though the message names the context length the overflow patterns look for.
    _text(
        _K.OUTPUT_CAP,
        "text:output_over_window",
        rf"\bmax_\w*tokens\s*=\s*(?:{NUMBER})\s+cannot\s+be\s+greater\s+than\b"
        r"|\brequest\s+fewer\s+output\s+tokens\b",
    ),
    # Overflow worded around the context window: "exceeds the available context size",
    # "exceed context limit", "longer than the model's context length", "does not fit the
    # context length of N tokens" (SGLang), "context length of only N tokens", "maximum context
    # length is N", "maximum model length of N", ...
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:exceeds_context",
        r"(?:exceed|overflow|longer than|larger than|greater than|too long|too large|beyond"
        rf"|(?:does not|doesn't|cannot|can't) fit)[^.\n]{{0,80}}?{_CTX}",
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
    # "total number of tokens (prompt and prediction) cannot exceed N" (Cohere), "The sum of
    # prompt length (N.0) and query length (0) max_tokens (M) should not exceed" (TensorRT-LLM),
    # "the questions take N tokens, more than the M this model reads" (vLLM decisions), ...
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
        rf"{_SAME_SENTENCE}{{0,80}}?\bexceed",
    ),
    _text(
        _K.CONTEXT_OVERFLOW,
        "text:prompt_more_than",
        r"\b(?:prompt|input|questions?|messages?)\b[^.\n]{0,30}?\b(?:has|have|takes?|contains?)"
        rf"\s+(?:{NUMBER})\s+tokens?,?\s+more\s+than\b",
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
        rf"\bmax(?:imum)?\s+size:?\s*(?:{NUMBER})\s+tokens\b",
    ),
    # Bedrock's JSON-schema check on the prompt string (a limit in characters).
    _text(_K.CONTEXT_OVERFLOW, "text:max_length_chars", r"\bexpected\s+maxLength:"),
    # Byte limits of proxies and APIs, after the token-worded patterns above.
    _text(
        _K.PAYLOAD_TOO_LARGE,
        "text:payload",
        r"\brequest\s+(?:entity|body|payload)\s+(?:is\s+)?too\s+large\b|\bpayload\s+too\s+large\b"
        r"|\bexceeds\s+the\s+maximum\s+(?:request\s+)?size\b|\bpayload\s+size\s+exceeds\b"
        rf"|\bmax(?:imum)?\s*:?\s*\(?(?:{NUMBER})\s*(?:[kmg]i?b|bytes)\b",
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


def status_hint(status: int | None) -> ErrorKind:
    """The kind an HTTP status suggests when nothing more specific was found."""
    if status is None:
        return ErrorKind.OTHER
    if status in _STATUS_HINTS:
        return _STATUS_HINTS[status]
    if 500 <= status <= 599:
        return ErrorKind.TRANSIENT
    return ErrorKind.INVALID_REQUEST if 400 <= status <= 499 else ErrorKind.OTHER

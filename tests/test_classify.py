"""Unit tests of `classify_error`: each kind, exception chains, numbers, retry delays, stop
reasons, the rule table, and messages found in public reports beyond the corpus.

Provider wording here is quoted from the issue or source cited next to it; the few inputs
that are not provider text (separators, the 429 guard, chains) test our own logic and say so.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import anthropic
import httpx
import httpx2
import openai
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st

from chatcli.errors import (
    ContextRecoveryError,
    ErrorInfo,
    ErrorKind,
    ProviderError,
    classify_error,
    is_context_window_stop,
    redact_secrets,
)
from chatcli.errors.rules import RULES

K = ErrorKind
RECORDS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "provider-errors.json").read_text()
)
# Messages read in the inference servers' source (tests/test_server_source_errors.py checks them).
SERVER_TEMPLATES: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "server-source-errors.json").read_text()
)["templates"]


def http_response(status: int, *, headers: dict[str, str] | None = None) -> httpx2.Response:
    request = httpx2.Request("POST", "http://127.0.0.1/v1/chat/completions")
    return httpx2.Response(status, headers=headers, request=request)


# (source, text, status, expected kind, expected numbers) -- messages NOT in the corpus.
DOCUMENTED = [
    (
        "https://github.com/cline/cline/issues/3120 (xAI Grok)",
        "400 \"This model's maximum prompt length is 131072 but the request contains 136973"
        ' tokens."',
        None,
        K.CONTEXT_OVERFLOW,
        {"limit": 131072, "prompt_tokens": 136973},
    ),
    (
        "https://github.com/cline/cline/issues/5474 (GPT-5: no 'context' word)",
        "400 Input tokens exceed the configured limit of 272000 tokens. Your messages resulted"
        " in 289650 tokens. Please reduce the length of the messages.",
        None,
        K.CONTEXT_OVERFLOW,
        {"limit": 272000, "prompt_tokens": 289650},
    ),
    (
        "https://github.com/eslint/tsc-meetings/pull/593 (GitHub Models, HTTP 413)",
        '{"error":{"code":"tokens_limit_reached","message":"Request body too large for gpt-4o'
        ' model. Max size: 8000 tokens.","details":"Request body too large for gpt-4o model.'
        ' Max size: 8000 tokens."}}',
        413,
        K.CONTEXT_OVERFLOW,
        {"limit": 8000},
    ),
    (
        "https://github.com/RooCodeInc/Roo-Code/issues/887 (GitHub Models, text only)",
        "413 Request body too large for deepseek-r1 model. Max size: 4000 tokens.",
        None,
        K.CONTEXT_OVERFLOW,
        {"limit": 4000},
    ),
    (
        "https://github.com/h2oai/h2ogpt/issues/373 (TGI)",
        "Input validation error: `inputs` must have less than 2048 tokens. Given: 2222",
        None,
        K.CONTEXT_OVERFLOW,
        {"limit": 2048, "prompt_tokens": 2222},
    ),
    (
        "https://github.com/Gitlawb/openclaude/issues/353 (LM Studio)",
        'API Error: 400 {"error":"The number of tokens to keep from the initial prompt is'
        " greater than the context length (n_keep: 13055>= n_ctx: 4096). Try to load the model"
        ' with a larger context length, or provide a shorter input."}',
        None,
        K.CONTEXT_OVERFLOW,
        {"prompt_tokens": 13055, "limit": 4096},
    ),
    (
        "https://github.com/anomalyco/opencode/issues/11141 (LM Studio)",
        '"Cannot truncate prompt with n_keep (15028) >= n_ctx (7424)"',
        None,
        K.CONTEXT_OVERFLOW,
        {"prompt_tokens": 15028, "limit": 7424},
    ),
    (
        # The number is len(prompt_tokens): abetlen/llama-cpp-python llama_cpp/llama.py
        "https://github.com/abetlen/llama-cpp-python/issues/416 (llama-cpp-python ValueError)",
        "ValueError: Requested tokens (630) exceed context window of 256",
        None,
        K.CONTEXT_OVERFLOW,
        {"prompt_tokens": 630, "limit": 256},
    ),
    (
        "https://github.com/abetlen/llama-cpp-python/issues/416 (issue title)",
        "llama_tokenize: too many tokens",
        None,
        K.CONTEXT_OVERFLOW,
        {},
    ),
    (
        "ggml-org/llama.cpp tools/server/server-context.cpp (newer wording)",
        '{"error":{"code":400,"message":"request (5584 tokens) exceeds the available context'
        ' size (4096 tokens), try increasing it","type":"exceed_context_size_error"}}',
        None,
        K.CONTEXT_OVERFLOW,
        {"prompt_tokens": 5584, "limit": 4096},
    ),
    (
        "https://github.com/nano-step/nano-brain/issues/208 (Ollama /api/embed)",
        'ollama: unexpected status 400: {"error":"the input length exceeds the context length"}',
        None,
        K.CONTEXT_OVERFLOW,
        {},
    ),
    (
        "https://github.com/marella/ctransformers/issues/153",
        "Number of tokens (757) exceeded maximum context length (512).",
        None,
        K.CONTEXT_OVERFLOW,
        {"prompt_tokens": 757, "limit": 512},
    ),
    (
        "https://github.com/stanford-crfm/helm/issues/94 (old OpenAI completions, comma)",
        "OpenAI error: This model's maximum context length is 2049 tokens, however you"
        " requested 2054 tokens (2049 in your prompt, 5 for the completion). Please reduce your"
        " prompt or completion length.",
        None,
        K.CONTEXT_OVERFLOW,
        {"limit": 2049, "requested_tokens": 2054, "prompt_tokens": 2049, "max_tokens": 5},
    ),
    (
        "https://github.com/google-gemini/gemini-cli/issues/10196 (JSON inside a JSON string)",
        '[API Error: {"error":{"message":"{\\n  \\"error\\": {\\n    \\"code\\": 400,\\n    '
        '\\"message\\": \\"The input token count (209809)   exceeds the maximum number of tokens'
        ' allowed (131072).\\",\\n    \\"status\\": \\"INVALID_ARGUMENT\\"\\n    }\\n}\\n",'
        '"code":400,"status":"Bad Request"}}]',
        None,
        K.CONTEXT_OVERFLOW,
        {"prompt_tokens": 209809, "limit": 131072},
    ),
    # Look-alikes.
    (
        "https://github.com/can1357/oh-my-pi/issues/9569 (OpenRouter 402, mentions max_tokens)",
        "402 This request requires more credits, or fewer max_tokens. You requested up to"
        " 65536 tokens",
        None,
        K.QUOTA,
        {},
    ),
    (
        "https://github.com/anthropics/claude-code/issues/4684 (a 400, yet a quota)",
        'Error: 400 {"type":"error","error":{"type":"invalid_request_error","message":"Your'
        " credit balance is too low to access the Anthropic API. Please go to Plans & Billing"
        ' to upgrade or purchase credits."}}',
        None,
        K.QUOTA,
        {},
    ),
    (
        "https://github.com/ITSpecialist111/ai_automation_suggester/issues/61 (Groq TPM)",
        'Groq API error: {"error":{"message":"Request too large for model `llama-3.3-70b-'
        "versatile` in organization `org_01jp8byqwpfx9sp1m0dbhb6a1e` service tier `on_demand`"
        " on tokens per minute (TPM): Limit 6000, Requested 14810, please reduce your message"
        ' size and try again.","type":"tokens","code":"rate_limit_exceeded"}}',
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/Alishahryar1/free-claude-code/issues/1265 (byte cap)",
        "Request too large (max 32MB). Accumulated images and attachments in the conversation"
        " pushed the request over the limit.",
        None,
        K.PAYLOAD_TOO_LARGE,
        {},
    ),
    (
        "BerriAI/litellm litellm_core_utils/exception_mapping_utils.py (Mistral 429 text)",
        "Service tier capacity exceeded for this model.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "BerriAI/litellm litellm_core_utils/exception_mapping_utils.py (param validation)",
        "Invalid 'user': string too long. Expected a string with maximum length 64, but got a"
        " string with length 100 instead.",
        400,
        K.INVALID_REQUEST,
        {},
    ),
    (
        "tests/data/README.md notes (Bedrock throttle, as text without the exception name)",
        "Too many tokens, please wait before trying again.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/google-gemini/gemini-cli/issues/5191 (Gemini 503)",
        '[API Error: got status: UNAVAILABLE. {"error":{"code":503,"message":"The model is'
        ' overloaded. Please try again later.","status":"UNAVAILABLE"}}]',
        None,
        K.TRANSIENT,
        {},
    ),
    (
        "https://github.com/cequence-io/openai-scala-client/issues/109 (Gemini bad key is 400)",
        '{"error": {"code": 400, "message": "API key not valid. Please pass a valid API key.",'
        ' "status": "INVALID_ARGUMENT", "details": [{"@type":'
        ' "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID"}]}}',
        None,
        K.AUTH,
        {},
    ),
    (
        "https://github.com/google-gemini/gemini-cli/issues/4690 (key error, text only)",
        "[API Error: API key not valid. Please pass a valid API key. (Status: INVALID_ARGUMENT)]",
        None,
        K.AUTH,
        {},
    ),
    # Rate-limit and quota look-alikes WITHOUT an HTTP status (a proxy or a log line that
    # kept only the text): the words alone must keep them away from truncation.
    (
        "https://github.com/xtekky/gpt4free/issues/3456 (a daily token allowance, sent as a 500)",
        "500 - Token limit (500,000 per day) exceeded. Used: 508,311 tokens. Sign up at"
        " g4f.dev/members.html for higher limits.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/meta-llama/llama-models/issues/354 (Llama API 429 detail alone)",
        "You have exceeded the maximum number of tokens allowed within a given time frame."
        " Wait a bit and try again.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/continuedev/continue/issues/9233 (Ollama cloud 429 text)",
        "you've reached your hourly usage limit, please wait or upgrade to continue",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/anthropics/claude-code/issues/1440 (Vertex per-minute token quota)",
        "Quota exceeded for aiplatform.googleapis.com/online_prediction_input_tokens_per_minute"
        "_per_base_model with base model: anthropic-claude-opus-4. Please submit a quota increase"
        " request. https://cloud.google.com/vertex-ai/docs/generative-ai/quotas-genai.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/continuedev/continue/issues/10062 (Gemini quota line, no period)",
        "Quota exceeded for metric: generativelanguage.googleapis.com/generate_content_free_tier"
        "_input_token_count, limit: 0, model: gemini-2.5-pro",
        None,
        K.QUOTA,
        {},
    ),
    (
        "https://github.com/anomalyco/opencode/issues/7463 (Cerebras: 'too many tokens' + TPM)",
        "Tokens per minute limit exceeded - too many tokens processed.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/continuedev/continue/issues/10920 (Groq tokens per day)",
        "429 Rate limit reached for model `llama-3.3-70b-versatile` in organization"
        " `org_01kjh7p9n8f1qs6nz2bz77vy6b` service tier `on_demand` on tokens per day (TPD):"
        " Limit 100000, Used 97050, Requested 3619. Please try again in 9m38.016s.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/MoonshotAI/kimi-cli/issues/2318 (Moonshot TPD)",
        "request reached organization TPD rate limit, current: 1505241",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/dyad-sh/dyad/issues/1849 (Azure OpenAI, newer wording)",
        "Your requests to gpt-5.1 for gpt-5.1 in East US 2 have exceeded the token rate limit for"
        " your current AIServices S0 pricing tier. Please retry after 60 seconds.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/stanford-crfm/helm/issues/97 (old OpenAI, 'N / min')",
        "OpenAI error: Rate limit reached for tokens. Limit: 150000.000000 / min. Current:"
        " 176000.000000 / min. Contact support@openai.com if you continue to have issues.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/togethercomputer/MoA/issues/27 (Together, queries per minute)",
        "You have been rate limited. Your rate limit is 60 queries per minute. Please navigate to"
        " https://api.together.xyz/settings/billing to upgrade to a paid plan.",
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/pydantic/pydantic-ai/issues/1885 (Mistral 429 body)",
        '{"message":"Requests rate limit exceeded"}',
        None,
        K.RATE_LIMIT,
        {},
    ),
    (
        "https://github.com/Aider-AI/aider/issues/3936 (OpenRouter free models per day)",
        "Rate limit exceeded: free-models-per-day. Add 10 credits to unlock 1000 free model"
        " requests per day",
        None,
        K.RATE_LIMIT,
        {},
    ),
]
TOKEN_FIELDS = ("prompt_tokens", "limit", "max_tokens", "output_limit", "requested_tokens")


def numbers_of(info: ErrorInfo) -> dict[str, int]:
    return {f: getattr(info, f) for f in TOKEN_FIELDS if getattr(info, f) is not None}


@pytest.mark.parametrize(
    ("source", "text", "status", "kind", "numbers"), DOCUMENTED, ids=[d[0] for d in DOCUMENTED]
)
def test_documented_messages(
    source: str, text: str, status: int | None, kind: ErrorKind, numbers: dict[str, int]
) -> None:
    info = classify_error(text, status=status)
    assert info.kind is kind
    assert numbers_of(info) == numbers


# --- rate limits and quotas that read like overflow ----------------------------------------
#
# A limit per period of time is a rate limit, however long the period: providers code their
# per-day limits as rate limits too (OpenAI and Groq `rate_limit_exceeded` for RPD/TPD, Bedrock
# ThrottlingException "Too many tokens per day" in corpus pe-093, Moonshot "TPD rate limit"),
# and the text without its code must classify as the coded body does. Such a window resets by
# itself; the retry policy does not wait out a Retry-After longer than its cap. QUOTA is for
# what only money or a plan change resets (credits, billing, monthly key limits).

# The reviewer's reproductions (not provider text): each was read as overflow with no status.
REVIEW_REPROS = [
    "token limit exceeded per minute",
    "TPM token limit exceeded",
    "daily token limit exceeded",
    "input token limit exceeded for model, 40000 tokens/min",
]

# Overflow-like stems (the generic phrases and prompt wording of the rule table) crossed with
# the ways providers name a rate window or a quota. Our own combinations, not provider text.
OVERFLOW_STEMS = [
    "token limit exceeded",
    "input token limit exceeded",
    "request too large",
    "too many tokens",
    "prompt tokens exceed the limit",
]
RATE_MARKERS = [
    "per second",
    "per minute",
    "per min",
    "per hour",
    "per day",
    "(100,000 per day)",
    "40000 tokens/min",
    "10 requests/s",
    "100 / min",
    "TPM",
    "TPD",
    "RPM",
    "RPD",
    "ITPM",
    "on tokens per minute (TPM)",
    "rate limit",
    "within a given time frame",
    "hourly",
    "daily",
]


@pytest.mark.parametrize("text", REVIEW_REPROS)
def test_reviewed_rate_limit_repros_are_rate_limits(text: str) -> None:
    info = classify_error(text)
    assert (info.kind, info.status) == (K.RATE_LIMIT, None)
    assert numbers_of(info) == {}


@pytest.mark.parametrize("marker", RATE_MARKERS)
@pytest.mark.parametrize("stem", OVERFLOW_STEMS)
def test_a_rate_window_is_never_overflow(stem: str, marker: str) -> None:
    for text in (f"{stem} {marker}", f"{marker} {stem}", f"{stem} ({marker})"):
        assert classify_error(text).kind is K.RATE_LIMIT, text


@pytest.mark.parametrize("stem", OVERFLOW_STEMS)
def test_a_quota_is_never_overflow(stem: str) -> None:
    for text in (f"quota exceeded: {stem}", f"{stem}: quota exceeded", f"{stem} (quota)"):
        assert classify_error(text).kind is K.QUOTA, text


@pytest.mark.parametrize("stem", OVERFLOW_STEMS)
def test_the_stems_alone_are_overflow(stem: str) -> None:
    # The other half of the contrast: without a window or quota, the same words are overflow.
    assert classify_error(stem).kind is K.CONTEXT_OVERFLOW


@pytest.mark.parametrize(
    "text",
    [
        # Slashes and unit letters that are not rates: URL paths and versions.
        "maximum context length is 4096 tokens, see https://example.com/v1/d/limits",
        "maximum context length is 4096 tokens (api/v2/s)",
        # "per" followed by something that is not a period of time.
        "maximum context length is 4096 tokens per request",
        # Words that merely contain a period or an abbreviation.
        "maximum context length is 4096 tokens; see the hyper-minute notes in RPMs.txt",
    ],
)
def test_rate_markers_need_a_real_window(text: str) -> None:
    # Our inputs: the window guard must not swallow real overflow wording around it.
    assert classify_error(text).kind is K.CONTEXT_OVERFLOW


# --- each kind, through the forms adapters hand over ------------------------------------------


def test_anthropic_overloaded_529_is_transient() -> None:
    # Anthropic's documented 529 body (docs.anthropic.com/en/api/errors).
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    info = classify_error(body, status=529)
    assert (info.kind, info.code, info.status) == (K.TRANSIENT, "overloaded_error", 529)


@pytest.mark.parametrize(
    "exc",
    [
        TimeoutError("timed out"),
        ConnectionResetError(104, "Connection reset by peer"),
        httpx.ReadTimeout("The read operation timed out"),
        openai.APIConnectionError(request=httpx2.Request("POST", "http://127.0.0.1/")),
        openai.APITimeoutError(request=httpx2.Request("POST", "http://127.0.0.1/")),
    ],
    ids=lambda e: type(e).__name__,
)
def test_network_failures_are_transient(exc: Exception) -> None:
    assert classify_error(exc).kind is K.TRANSIENT


def test_sdk_status_errors_without_a_body_fall_back_on_their_status() -> None:
    limited = openai.RateLimitError("Error code: 429", response=http_response(429), body=None)
    denied = openai.AuthenticationError("Error code: 401", response=http_response(401), body=None)
    too_big = anthropic.RequestTooLargeError(
        "Error code: 413", response=http_response(413), body=None
    )
    assert classify_error(limited).kind is K.RATE_LIMIT
    assert classify_error(denied).kind is K.AUTH
    assert classify_error(too_big).kind is K.PAYLOAD_TOO_LARGE
    assert classify_error(too_big).status == 413


def test_openai_invalid_key_is_auth() -> None:
    # OpenAI's 401 body for a wrong key (platform.openai.com/docs/guides/error-codes).
    body = {
        "message": "Incorrect API key provided: sk-abc. You can find your API key at ...",
        "type": "invalid_request_error",
        "param": None,
        "code": "invalid_api_key",
    }
    exc = openai.AuthenticationError("Error code: 401", response=http_response(401), body=body)
    info = classify_error(exc)
    assert (info.kind, info.code, info.status) == (K.AUTH, "invalid_api_key", 401)
    assert info.message.startswith("Incorrect API key provided")


def test_generic_invalid_request_type() -> None:
    body = {"type": "error", "error": {"type": "invalid_request_error", "message": "bad role"}}
    assert classify_error(body).kind is K.INVALID_REQUEST


@pytest.mark.parametrize(
    ("status", "kind"),
    [
        (None, K.OTHER),
        (200, K.OTHER),
        (400, K.INVALID_REQUEST),
        (401, K.AUTH),
        (402, K.QUOTA),
        (403, K.AUTH),
        (404, K.INVALID_REQUEST),
        (413, K.PAYLOAD_TOO_LARGE),
        (429, K.RATE_LIMIT),
        (500, K.TRANSIENT),
        (503, K.TRANSIENT),
        (529, K.TRANSIENT),
    ],
)
def test_status_is_only_a_fallback_hint(status: int | None, kind: ErrorKind) -> None:
    assert classify_error("something went wrong", status=status).kind is kind


def test_status_never_overrides_a_stated_overflow() -> None:
    # Overflow arrives as 413 (Anthropic), 422 (TGI), 500 (early llama.cpp): the words win.
    for status in (413, 422, 500):
        info = classify_error("prompt is too long: 215000 tokens > 200000 maximum", status=status)
        assert info.kind is K.CONTEXT_OVERFLOW


def test_a_429_is_never_read_as_overflow() -> None:
    # Our guard, not provider text: whatever a 429 says, it is a throttle.
    info = classify_error("prompt is too long: 215000 tokens > 200000 maximum", status=429)
    assert info.kind is K.RATE_LIMIT
    assert info.prompt_tokens is None


def test_explicit_status_wins_over_the_one_in_the_text() -> None:
    assert classify_error("Error code: 400 - nope", status=503).status == 503
    assert classify_error("Error code: 400 - nope").status == 400


# --- numbers --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "prompt is too long: 215,000 tokens > 200,000 maximum",
        "prompt is too long: 215_000 tokens > 200_000 maximum",
        "prompt   is too long:\n215000  tokens >   200000 maximum",
    ],
)
def test_numbers_with_separators_and_odd_spacing(text: str) -> None:
    info = classify_error(text)
    assert (info.prompt_tokens, info.limit) == (215000, 200000)


def test_a_comma_ending_a_clause_is_not_a_thousands_separator() -> None:
    info = classify_error("This model's maximum context length is 8192, however your request")
    assert info.limit == 8192


def test_python_repr_bodies_with_escaped_quotes_are_parsed() -> None:
    # str() of an SDK error embeds the body as a Python dict; a message holding both quote
    # kinds is repr'd with escaped single quotes, which the bracket matcher must skip.
    message = "prompt is too long: 5 tokens > 4 maximum (pattern 'a}}' in \"x\")"
    text = f"Error code: 400 - {{'error': {{'message': {message!r}, 'type': 'x'}}}}"
    assert "\\'" in text
    info = classify_error(text)
    assert info.message == message
    assert (info.kind, info.status, info.prompt_tokens, info.limit) == (
        K.CONTEXT_OVERFLOW,
        400,
        5,
        4,
    )


def test_structured_numbers_come_from_the_llama_cpp_fields() -> None:
    body = {"error": {"type": "exceed_context_size_error", "n_prompt_tokens": 9, "n_ctx": 8}}
    info = classify_error(body)
    assert (info.prompt_tokens, info.limit) == (9, 8)


def test_numbers_are_only_read_for_token_kinds() -> None:
    # OpenRouter's key limit looks like "prompt > limit" but is a quota (corpus pe-104).
    info = classify_error("Prompt tokens limit exceeded: 230799 > 91442.")
    assert info.kind is K.QUOTA
    assert numbers_of(info) == {}


def test_vertex_exclusive_bound_becomes_the_real_cap() -> None:
    info = classify_error(
        "Unable to submit request because it has a maxOutputTokens value of 9000 but the"
        " supported range is from 1 (inclusive) to 8193 (exclusive)."
    )
    assert (info.kind, info.max_tokens, info.output_limit) == (K.OUTPUT_CAP, 9000, 8192)


def test_bedrock_range_check_of_small_parameters_is_not_output_cap() -> None:
    # Same validator, other parameters (temperature, top_k <= 500): not an output cap.
    info = classify_error("Malformed input request: 600 is not less or equal to 500", status=400)
    assert info.kind is K.INVALID_REQUEST


# --- retry delays ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("headers", "seconds"),
    [
        ({"retry-after": "7"}, 7.0),
        ({"retry-after-ms": "1500", "retry-after": "2"}, 1.5),
        ({"Retry-After": "0.5"}, 0.5),
        ({"retry-after": "Wed, 21 Oct 2015 07:28:00 GMT"}, None),  # a date needs a clock
        ({}, None),
    ],
)
def test_retry_after_from_response_headers(headers: dict[str, str], seconds: float | None) -> None:
    exc = openai.RateLimitError(
        "Error code: 429", response=http_response(429, headers=headers), body=None
    )
    assert classify_error(exc).retry_after == seconds


def test_retry_after_from_text_and_gemini_retry_info() -> None:
    # OpenAI TPM messages end "Please try again in 1.5s."; Gemini 429 bodies carry RetryInfo.
    assert classify_error("Rate limit reached. Please try again in 1.5s.").retry_after == 1.5
    assert classify_error("Rate limit reached. Please try again in 120ms.").retry_after == 0.12
    gemini = {
        "error": {
            "code": 429,
            "status": "RESOURCE_EXHAUSTED",
            "details": [{"@type": "type.googleapis.com/google.rpc.RetryInfo", "retryDelay": "39s"}],
        }
    }
    assert classify_error(gemini).retry_after == 39.0


def test_retry_after_from_a_botocore_style_response() -> None:
    class ClientError(Exception):
        """Shape of botocore.exceptions.ClientError: `.response` is a dict."""

        def __init__(self) -> None:
            super().__init__("An error occurred (ThrottlingException): Rate exceeded")
            self.response = {
                "Error": {"Code": "ThrottlingException", "Message": "Rate exceeded"},
                "ResponseMetadata": {"HTTPStatusCode": 429, "HTTPHeaders": {"retry-after": "3"}},
            }

    info = classify_error(ClientError())
    assert (info.kind, info.status, info.retry_after) == (K.RATE_LIMIT, 429, 3.0)


# --- exception chains ------------------------------------------------------------------------


def overflow_sdk_error() -> openai.BadRequestError:
    body = {
        "message": "This model's maximum context length is 8192 tokens. However, your messages"
        " resulted in 9000 tokens. Please reduce the length of the messages.",
        "type": "invalid_request_error",
        "param": "messages",
        "code": "context_length_exceeded",
    }
    return openai.BadRequestError("Error code: 400", response=http_response(400), body=body)


def test_cause_chain_is_walked() -> None:
    try:
        try:
            raise overflow_sdk_error()
        except openai.BadRequestError as exc:
            raise RuntimeError("agent step failed") from exc
    except RuntimeError as outer:
        info = classify_error(outer)
    assert (info.kind, info.status, info.limit, info.prompt_tokens) == (
        K.CONTEXT_OVERFLOW,
        400,
        8192,
        9000,
    )


def test_implicit_context_is_walked_but_not_when_suppressed() -> None:
    try:
        try:
            raise overflow_sdk_error()
        except openai.BadRequestError:
            raise ValueError("while handling") from None
    except ValueError as suppressed:
        assert classify_error(suppressed).kind is K.OTHER
    try:
        try:
            raise overflow_sdk_error()
        except openai.BadRequestError:
            raise ValueError("while handling")  # noqa: B904 - the implicit context is the point
    except ValueError as implicit:
        assert classify_error(implicit).kind is K.CONTEXT_OVERFLOW


def test_cyclic_chain_terminates() -> None:
    first, second = RuntimeError("a"), RuntimeError("b")
    first.__cause__, second.__cause__ = second, first
    assert classify_error(first).kind is K.OTHER


def test_chatcli_errors_return_their_info_unchanged() -> None:
    info = ErrorInfo(kind=K.CONTEXT_OVERFLOW, message="x", limit=10)
    assert classify_error(ProviderError(info)) is info
    recovery = ContextRecoveryError("gave up", info=info, attempts=("level 1",))
    assert classify_error(recovery) is info
    try:
        raise RuntimeError("wrapped") from ProviderError(info)
    except RuntimeError as outer:
        assert classify_error(outer) is info


def test_unreadable_attributes_do_not_break_classification() -> None:
    class Hostile(Exception):
        @property
        def body(self) -> object:
            raise RuntimeError("response not read")

        def __str__(self) -> str:
            raise RuntimeError("no str either")

    assert classify_error(Hostile()).kind is K.OTHER


# --- stop reasons ------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "window_full"),
    [
        ("model_context_window_exceeded", True),
        ("MODEL_CONTEXT_WINDOW_EXCEEDED", True),
        ("model_length", True),
        ("ERROR_LIMIT", True),
        ("length", False),  # ambiguous: max_tokens or window; decided by usage, not here
        ("max_tokens", False),
        ("MAX_TOKENS", False),
        ("end_turn", False),
        ("", False),
        (None, False),
    ],
)
def test_is_context_window_stop(raw: str | None, window_full: bool) -> None:
    assert is_context_window_stop(raw) is window_full


# --- the rule table --------------------------------------------------------------------------


def all_samples() -> list[ErrorInfo]:
    corpus = [classify_error(r["body"], status=r["http_status"]) for r in RECORDS]
    documented = [classify_error(text, status=status) for _, text, status, _, _ in DOCUMENTED]
    server_source = [
        classify_error(example["text"], status=template["status"])
        for template in SERVER_TEMPLATES
        for example in template["examples"]
    ]
    exceptions = [
        classify_error(TimeoutError()),
        classify_error({"error": {"type": "invalid_request_error", "message": "bad role"}}),
        classify_error({"error": {"type": "overloaded_error", "message": "Overloaded"}}),
        classify_error({"error": {"code": "invalid_api_key", "message": "Incorrect key"}}),
        # LiteLLM's class name, alone (tests/test_integration_litellm.py raises the real one).
        classify_error("litellm.ContextWindowExceededError: the request failed"),
    ]
    return corpus + documented + server_source + exceptions


def test_every_rule_decides_at_least_one_real_sample() -> None:
    decided_by = {info.reason for info in all_samples()}
    unused = [rule.name for rule in RULES if rule.name not in decided_by]
    assert unused == [], "rules no sample exercises (dead or shadowed)"


def test_every_kind_has_a_rule() -> None:
    kinds_with_rules = {rule.kind for rule in RULES}
    assert kinds_with_rules == set(ErrorKind) - {K.OTHER}
    assert len({rule.name for rule in RULES}) == len(RULES)


# --- totality ----------------------------------------------------------------------------------

json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(["error", "code", "type", "status", "message", "n_ctx", "headers"])
            | st.text(max_size=8),
            children,
            max_size=4,
        )
    ),
    max_leaves=20,
)
corpus_bodies = st.sampled_from([r["body"] for r in RECORDS])


@settings(max_examples=150, deadline=None)
@given(
    value=json_values
    | st.text(max_size=300)
    | st.builds(
        lambda body, cut, noise: body[:cut] + noise + body[cut:],
        corpus_bodies,
        st.integers(0, 400),
        st.text(max_size=20),
    ),
    status=st.none() | st.integers(0, 999),
)
@example(value={"code": "²"}, status=None)  # a digit int() cannot read (found by hypothesis)
def test_never_raises_and_is_deterministic(value: object, status: int | None) -> None:
    info = classify_error(value, status=status)
    assert isinstance(info.kind, ErrorKind)
    assert classify_error(value, status=status) == info
    for field in (*TOKEN_FIELDS, "input_chars", "limit_chars"):
        number = getattr(info, field)
        assert number is None or (isinstance(number, int) and number >= 0)


@pytest.mark.parametrize(
    "text",
    ["{" * 5000, "[" * 3000 + "]" * 3000, '{"a":' * 2000 + "1" + "}" * 2000, "b'{" + "x" * 50000],
    ids=["open-braces", "deep-list", "deep-json", "long-unclosed"],
)
def test_pathological_text_is_handled(text: str) -> None:
    assert classify_error(text).kind is K.OTHER


# --- secrets never reach a message --------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "secret"),
    [
        ("Invalid key: Bearer sk-SECRET123abc", "sk-SECRET123abc"),
        (
            '{"error": {"message": "Incorrect API key provided: sk-proj-AbCdEf123456"}}',
            "AbCdEf123456",
        ),
        (
            "401 for url https://x.googleapis.com/v1/models?key=AIzaSyA1234567890abcdefghij",
            "AIzaSyA1234567890abcdefghij",
        ),
        ("bad header x-api-key: sk-ant-api03-zzzzzzzzzz", "zzzzzzzzzz"),
        ("Authorization=Basic dXNlcjpwYXNzd29yZA==", "dXNlcjpwYXNzd29yZA=="),
        ("access_token=ya29.a0AfH6SMBx", "ya29.a0AfH6SMBx"),
    ],
)
def test_credentials_echoed_in_an_error_are_redacted(text: str, secret: str) -> None:
    info = classify_error(text, status=401)
    assert secret not in info.message and "***" in info.message
    assert info.kind is ErrorKind.AUTH
    assert secret not in redact_secrets(text)


def test_ordinary_messages_are_untouched() -> None:
    text = "prompt is too long: 215000 tokens > 200000 maximum (request id req_011CS)"
    assert redact_secrets(text) == text

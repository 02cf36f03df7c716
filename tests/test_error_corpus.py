"""`classify_error` against every real provider body in tests/data/provider-errors.json.

Each record is classified in every form a library meets it: the text with its HTTP status,
the parsed JSON body, and the exception a real SDK raises when a (local) server answers with
that body and status. Overflow records must come out as overflow with exactly the numbers
they state; look-alikes must not; output-cap errors are OUTPUT_CAP; stop-reason fragments are
not errors, except the ones that say the context window filled up.
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anthropic
import httpx2
import openai
import pytest
from google.genai import errors as genai_errors

from chatcli.errors import ErrorInfo, ErrorKind, classify_error, is_context_window_stop
from tests.replay import ReplayServer, Scripted, replay_server

RECORDS: list[dict[str, Any]] = json.loads(
    (Path(__file__).parent / "data" / "provider-errors.json").read_text()
)

# ErrorInfo fields that a record's `numbers` may name; other keys (tpm_limit, ubatch,
# thoughts_tokens, ...) describe look-alikes and stop reasons and have no field.
NUMBER_FIELDS = (
    "prompt_tokens",
    "limit",
    "max_tokens",
    "output_limit",
    "requested_tokens",
    "input_chars",
    "limit_chars",
)

# The specific kind of every look-alike, read from each record's body and source note.
NOT_OVERFLOW_KINDS = {
    "pe-030": ErrorKind.RATE_LIMIT,  # OpenAI TPM "Request too large ... tokens per min"
    "pe-031": ErrorKind.RATE_LIMIT,
    "pe-033": ErrorKind.RATE_LIMIT,  # Azure "token rate limit"
    "pe-046": ErrorKind.RATE_LIMIT,  # Groq 413 over the TPM limit
    "pe-063": ErrorKind.PAYLOAD_TOO_LARGE,  # Anthropic 32 MB request cap
    "pe-064": ErrorKind.PAYLOAD_TOO_LARGE,
    "pe-082": ErrorKind.INVALID_REQUEST,  # llama.cpp physical batch size (server setting)
    "pe-083": ErrorKind.QUOTA,
    "pe-085": ErrorKind.INVALID_REQUEST,  # tool description too long
    "pe-087": ErrorKind.INVALID_REQUEST,  # max_tokens not supported: use max_completion_tokens
    "pe-089": ErrorKind.RATE_LIMIT,  # Anthropic 429 "Please reduce the prompt length"
    "pe-090": ErrorKind.RATE_LIMIT,
    "pe-091": ErrorKind.RATE_LIMIT,
    "pe-093": ErrorKind.RATE_LIMIT,  # Bedrock "Too many tokens per day, please wait"
    "pe-096": ErrorKind.RATE_LIMIT,  # Gemini per-minute input-token quota
    "pe-099": ErrorKind.PAYLOAD_TOO_LARGE,  # nginx 413 HTML page
    "pe-100": ErrorKind.PAYLOAD_TOO_LARGE,
    "pe-101": ErrorKind.PAYLOAD_TOO_LARGE,  # "Max 50KB allowed"
    "pe-104": ErrorKind.QUOTA,  # OpenRouter per-key limit "Prompt tokens limit exceeded"
    "pe-156": ErrorKind.RATE_LIMIT,  # Cerebras 429 "Tokens per minute ... too many tokens"
    "pe-157": ErrorKind.RATE_LIMIT,  # Cerebras per-minute limit coded request_quota_exceeded
    "pe-158": ErrorKind.QUOTA,  # DeepSeek "Insufficient Balance" (HTTP 402)
    "pe-159": ErrorKind.QUOTA,  # Zhipu 1113: account in arrears, sent as 429
    "pe-160": ErrorKind.QUOTA,  # Zhipu: insufficient balance, sent as 429
    "pe-161": ErrorKind.QUOTA,  # Moonshot exceeded_current_quota_error (403)
    "pe-167": ErrorKind.RATE_LIMIT,  # Gemini Code Assist daily quota (a per-day limit)
    "pe-168": ErrorKind.INVALID_REQUEST,  # Mistral 422: max_completion_tokens not permitted
}

# Stop-reason fragments that mean "the window filled up" (Anthropic, Bedrock, Mistral).
CONTEXT_WINDOW_STOP_IDS = {"pe-112", "pe-118", "pe-119"}
STOP_REASON_KEYS = {"finish_reason", "finishReason", "stop_reason", "stopReason", "done_reason"}


def records(kind: str) -> list[Any]:
    return [pytest.param(r, id=r["id"]) for r in RECORDS if r["kind"] == kind]


def stated_numbers(record: dict[str, Any]) -> dict[str, int]:
    numbers = record.get("numbers") or {}
    return {k: v for k, v in numbers.items() if k in NUMBER_FIELDS and isinstance(v, int)}


def parsed_body(record: dict[str, Any]) -> Any:
    try:
        return json.loads(record["body"])
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class Sdks:
    """Real SDK clients pointed at a local replay server (no retries: one call, one error)."""

    server: ReplayServer
    openai: openai.OpenAI
    anthropic: anthropic.Anthropic


@pytest.fixture(scope="module")
def sdks() -> Iterator[Sdks]:
    with (
        replay_server() as server,
        openai.OpenAI(api_key="test", base_url=f"{server.url}/v1", max_retries=0) as openai_client,
        anthropic.Anthropic(api_key="test", base_url=server.url, max_retries=0) as anthropic_client,
    ):
        # Closed on exit: a pooled keep-alive socket left open is a ResourceWarning (an error).
        yield Sdks(server=server, openai=openai_client, anthropic=anthropic_client)


def sdk_errors(sdks: Sdks, record: dict[str, Any]) -> Iterator[tuple[str, Exception]]:
    """The exceptions the real SDKs raise when a server answers with the record's body."""
    status, body = record["http_status"], record["body"].encode()
    sdks.server.add(Scripted(status=status, body=body), Scripted(status=status, body=body))
    user = [{"role": "user", "content": "hi"}]
    with pytest.raises(openai.APIStatusError) as openai_error:
        sdks.openai.chat.completions.create(model="m", messages=user)
    yield "openai", openai_error.value
    with pytest.raises(anthropic.APIStatusError) as anthropic_error:
        sdks.anthropic.messages.create(model="m", max_tokens=8, messages=user)
    yield "anthropic", anthropic_error.value
    # google-genai's own translation of an HTTP response into its exception classes.
    request = httpx2.Request("POST", f"{sdks.server.url}/v1beta/models/m:generateContent")
    with pytest.raises(genai_errors.APIError) as genai_error:
        genai_errors.APIError.raise_for_response(
            httpx2.Response(status, content=body, request=request)
        )
    yield "google-genai", genai_error.value


def all_forms(sdks: Sdks, record: dict[str, Any]) -> Iterator[tuple[str, ErrorInfo]]:
    """The record classified as text (with and without its status), as a parsed body, and as
    the exceptions real SDKs raise."""
    status = record["http_status"]
    yield "text", classify_error(record["body"], status=status)
    # Without the status (a log line, a proxy that kept only the text): the words alone
    # must decide, and a look-alike must not fall through to an overflow pattern.
    yield "text, no status", classify_error(record["body"])
    body = parsed_body(record)
    if body is not None:
        yield "parsed", classify_error(body, status=status)
    if status is not None and status >= 400:
        for name, exc in sdk_errors(sdks, record):
            yield name, classify_error(exc)
            try:
                raise RuntimeError("the provider call failed") from exc
            except RuntimeError as wrapped:
                yield f"{name} (chained)", classify_error(wrapped)


def test_corpus_is_the_expected_sample() -> None:
    assert len(RECORDS) == 119
    assert len({r["id"] for r in RECORDS}) == 119
    assert Counter(r["kind"] for r in RECORDS) == {
        "context_overflow": 72,
        "not_overflow": 27,
        "max_tokens_truncation": 10,
        "output_cap_error": 10,
    }
    assert set(NOT_OVERFLOW_KINDS) == {r["id"] for r in RECORDS if r["kind"] == "not_overflow"}


@pytest.mark.parametrize("record", records("context_overflow"))
def test_overflow_is_detected_with_its_numbers(sdks: Sdks, record: dict[str, Any]) -> None:
    expected = stated_numbers(record)
    for form, info in all_forms(sdks, record):
        assert info.kind is ErrorKind.CONTEXT_OVERFLOW, (form, info)
        extracted = {f: getattr(info, f) for f in NUMBER_FIELDS if getattr(info, f) is not None}
        # Exactly the stated numbers: none missed, none invented. Placeholder records
        # ("{N}", "%d": source templates) state no number, so nothing may be extracted.
        assert extracted == expected, form


@pytest.mark.parametrize("record", records("output_cap_error"))
def test_output_cap_is_not_overflow(sdks: Sdks, record: dict[str, Any]) -> None:
    expected = stated_numbers(record)
    for form, info in all_forms(sdks, record):
        assert info.kind is ErrorKind.OUTPUT_CAP, (form, info)
        extracted = {f: getattr(info, f) for f in NUMBER_FIELDS if getattr(info, f) is not None}
        assert extracted == expected, form


@pytest.mark.parametrize("record", records("not_overflow"))
def test_look_alikes_are_not_overflow(sdks: Sdks, record: dict[str, Any]) -> None:
    retry_after = (record.get("numbers") or {}).get("retry_after_s")
    for form, info in all_forms(sdks, record):
        assert info.kind is NOT_OVERFLOW_KINDS[record["id"]], (form, info)
        assert not info.is_overflow
        if retry_after is not None:
            assert info.retry_after == retry_after, form


def stop_reasons(value: Any) -> list[str]:
    """Every stop/finish reason in a stop-signal fragment, at any depth."""
    if isinstance(value, dict):
        found = [v for k, v in value.items() if k in STOP_REASON_KEYS and isinstance(v, str)]
        details = value.get("incomplete_details")
        if isinstance(details, dict):
            found.append(details["reason"])
        return found + [r for v in value.values() for r in stop_reasons(v)]
    if isinstance(value, list):
        return [r for v in value for r in stop_reasons(v)]
    return []


@pytest.mark.parametrize("record", records("max_tokens_truncation"))
def test_stop_reason_fragments(sdks: Sdks, record: dict[str, Any]) -> None:
    body = parsed_body(record)
    # Sessions-API turn errors carry the signal as an error code instead (pe-110).
    reasons = stop_reasons(body) or [body["code"]]
    window_full = any(is_context_window_stop(r) for r in reasons)
    assert window_full == (record["id"] in CONTEXT_WINDOW_STOP_IDS), reasons
    for form, info in all_forms(sdks, record):
        # A window-full stop is overflow (SPEC 2); a plain max_tokens stop is no error at all.
        expected = ErrorKind.CONTEXT_OVERFLOW if window_full else ErrorKind.OTHER
        assert info.kind is expected, (form, info)

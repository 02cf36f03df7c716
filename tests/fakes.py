"""Test providers: one that really enforces a context window, and one that follows a script.

`WindowedProvider` counts the prompt with its own tokenizer (deliberately NOT chatcli's
default estimate: ~3.3 chars/token + 7 per message, like a code-heavy BPE and a chat template,
so chatcli's uncalibrated estimate is ~20% low, as it is against real models), rejects a
prompt that does not fit by raising the real SDK exception for a real error body from the
corpus, and really stops at max_tokens (4 chars per output token). Every request is recorded.

Error bodies come from `tests/data/provider-errors.json` (see `corpus_error`): a record whose
evidence is a source template gets the real numbers of the request substituted; an observed
record is sent verbatim, and may only be used where the request really has the numbers it
states (anything else would be a made-up body).
"""

from __future__ import annotations

import functools
import json
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

import anthropic
import httpx2
import openai

from chatcli.continuation import CONTINUATION_MESSAGE
from chatcli.messages import Message, Role, StopReason, Usage, total_chars
from chatcli.providers.base import Request, Response

CORPUS_PATH = Path(__file__).parent / "data" / "provider-errors.json"

Sdk = Literal["openai", "anthropic"]


@functools.cache
def corpus() -> Mapping[str, Mapping[str, Any]]:
    records = json.loads(CORPUS_PATH.read_text(encoding="utf-8"))
    return {record["id"]: record for record in records}


def corpus_error(
    record_id: str,
    *,
    sdk: Sdk,
    envelope: str | None = None,
    headers: Mapping[str, str] | None = None,
    **numbers: int | None,
) -> Exception:
    """The exception the `sdk` raises when the server answers with corpus record `record_id`.

    `numbers` are the request's real values (prompt_tokens, limit, max_tokens, ...); only the
    ones the record states are used. The wire body is the JSON inside the record's body (the
    record often holds a client's `str(exc)` around it); a plain-text record is put in the
    JSON envelope of record `envelope` (the same server's real error shape) when given.
    """
    record = corpus()[record_id]
    text = _with_numbers(record, numbers)
    status = record["http_status"]
    if (wire := _wire_json(text)) is not None:
        text = json.dumps(wire)
    elif envelope is not None:
        outer = corpus()[envelope]
        text = json.dumps(_with_message(_wire_json(outer["body"]), text))
        status = status or outer["http_status"]
    if not isinstance(status, int):
        raise ValueError(f"{record_id} has no HTTP status; pass an envelope record that has one")
    return _sdk_exception(sdk, status, text, headers or {})


def _with_numbers(record: Mapping[str, Any], numbers: Mapping[str, int | None]) -> str:
    body: str = record["body"]
    stated: Mapping[str, Any] = record["numbers"] or {}
    template = str(record["evidence"]).startswith("source_template")
    for key, placeholder in stated.items():
        if key not in numbers:
            continue
        actual = numbers[key]
        if template:
            body = body.replace(str(placeholder), str(actual), 1)
        elif placeholder != actual:
            raise AssertionError(
                f"{record['id']} states {key}={placeholder} but the request has {actual}: "
                "use a template record, or size the request to match"
            )
    return body


def _wire_json(body: str) -> Any:
    """The JSON object or array inside `body` (after a client's prefix), else None."""
    starts = [i for i in (body.find("{"), body.find("[")) if i >= 0]
    if not starts:
        return None
    try:
        value, _ = json.JSONDecoder().raw_decode(body, min(starts))
    except json.JSONDecodeError:
        return None
    return value


def _with_message(envelope: Any, message: str) -> Any:
    error = dict(envelope["error"])
    error["message"] = message
    return {**envelope, "error": error}


@functools.cache
def _sdk_client(sdk: Sdk) -> Any:
    # Built once, never used to send: only its own error factory is called.
    if sdk == "openai":
        return openai.OpenAI(api_key="test", base_url="http://127.0.0.1:9/v1", max_retries=0)
    return anthropic.Anthropic(api_key="test", base_url="http://127.0.0.1:9", max_retries=0)


def _sdk_exception(sdk: Sdk, status: int, body: str, headers: Mapping[str, str]) -> Exception:
    """Exactly what the SDK raises for this HTTP answer (its own response-to-error factory)."""
    path = "/v1/chat/completions" if sdk == "openai" else "/v1/messages"
    request = httpx2.Request("POST", f"http://127.0.0.1:9{path}")
    content_type = "application/json" if body.lstrip()[:1] in ("{", "[") else "text/plain"
    response = httpx2.Response(
        status,
        content=body.encode(),
        headers={"content-type": content_type, **headers},
        request=request,
    )
    error: Exception = _sdk_client(sdk)._make_status_error_from_response(response)
    return error


# -- the windowed provider -----------------------------------------------------------------


def latest_request_text(messages: Sequence[Message]) -> str:
    """The text of the latest real user request (not a continuation prompt)."""
    for message in reversed(messages):
        if message.role is Role.USER and message.text and message.text != CONTINUATION_MESSAGE:
            return message.text
    return ""


def echo_answer(messages: Sequence[Message]) -> str:
    """The default answer: names the request it answers, so tests can see it survived."""
    return f"Answer to: {latest_request_text(messages)}"


@dataclass(frozen=True, slots=True, kw_only=True)
class Overflow:
    """How a provider rejects a prompt that does not fit: a corpus record, through an SDK."""

    record: str = "pe-038"  # vLLM's prompt-length template (states prompt and limit) ...
    envelope: str | None = "pe-035"  # ... in vLLM's observed JSON error envelope, HTTP 400
    sdk: Sdk = "openai"
    counts_output: bool = False  # True: prompt + max_tokens must fit (Anthropic, pe-004)
    # The record for a prompt that fits with a max_tokens that does not, when the provider
    # checks the two apart (vLLM's `_validate_input`: the prompt alone first, then prompt +
    # max_tokens, "'max_tokens' ... is too large", pe-029 / pe-035).
    output_record: str | None = None


@dataclass(kw_only=True)
class WindowedProvider:
    """A model with a real context window and a real output limit (see the module docstring).

    `answer(messages)` is the full answer it wants to give; a continuation request (the
    partial answer + the continuation message) gets the rest of it, starting `repeat` chars
    early (models often repeat a little at the seam). Without max_tokens it stops at
    `default_max_tokens`. A max_tokens above `output_cap` raises record pe-024 (OpenAI's
    "max_tokens is too large"), which states 8192 and 4096: use it with exactly those.
    """

    window: int
    overflow: Overflow = field(default_factory=Overflow)
    answer: Callable[[Sequence[Message]], str] = echo_answer
    output_cap: int | None = None
    default_max_tokens: int = 4096
    declares_limits: bool = True
    chars_per_token: float = 3.3
    per_message: int = 7
    repeat: int = 0
    requests: list[Request] = field(default_factory=list)

    @property
    def context_window(self) -> int | None:
        return self.window if self.declares_limits else None

    @property
    def max_output_tokens(self) -> int | None:
        return self.output_cap if self.declares_limits else None

    def count(self, messages: Sequence[Message]) -> int:
        """This provider's own tokenizer."""
        chars = total_chars(messages)
        return math.ceil(chars / self.chars_per_token) + self.per_message * len(messages)

    def complete(self, request: Request) -> Response:
        self.requests.append(request)
        prompt = self.count(request.messages)
        self._check_output_cap(request.max_tokens)
        record = self._rejection(prompt, request.max_tokens)
        if record is not None:
            raise corpus_error(
                record,
                sdk=self.overflow.sdk,
                envelope=self.overflow.envelope,
                prompt_tokens=prompt,
                limit=self.window,
                max_tokens=request.max_tokens,
            )
        return self._answer(request, prompt)

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)

    def _rejection(self, prompt: int, max_tokens: int | None) -> str | None:
        """The corpus record this request is rejected with, None when it fits."""
        output_too = prompt + (max_tokens or 0) > self.window
        if prompt > self.window or (output_too and self.overflow.counts_output):
            return self.overflow.record
        return self.overflow.output_record if output_too else None

    def _check_output_cap(self, max_tokens: int | None) -> None:
        if self.output_cap is not None and max_tokens is not None and max_tokens > self.output_cap:
            raise corpus_error(
                "pe-024", sdk="openai", max_tokens=max_tokens, output_limit=self.output_cap
            )

    def _answer(self, request: Request, prompt: int) -> Response:
        messages, done = _split_continuation(request.messages)
        full = self.answer(messages)
        if not full.startswith(done):
            raise AssertionError("the continuation request does not hold this model's answer")
        start = max(0, len(done) - self.repeat) if done else 0
        rest = full[start:]
        budget = 4 * (request.max_tokens or self.default_max_tokens)
        stop = StopReason.MAX_TOKENS if len(rest) > budget else StopReason.END_TURN
        text = rest[:budget]
        usage = Usage(input_tokens=prompt, output_tokens=math.ceil(len(text) / 4))
        return Response(message=Message.assistant(text), stop_reason=stop, usage=usage)


def _split_continuation(messages: tuple[Message, ...]) -> tuple[tuple[Message, ...], str]:
    """(the conversation, the partial answer so far) of a continuation request."""
    if len(messages) >= 2 and messages[-1].text == CONTINUATION_MESSAGE:
        partial = messages[-2]
        if partial.role is Role.ASSISTANT:
            return messages[:-2], partial.text
    return messages, ""


# -- the scripted provider -----------------------------------------------------------------


def response(
    text: str = "ok",
    *,
    stop: StopReason = StopReason.END_TURN,
    usage: Usage | None = None,
    message: Message | None = None,
) -> Response:
    """A provider answer, for scripts."""
    answer = message if message is not None else Message.assistant(text)
    return Response(message=answer, stop_reason=stop, usage=usage or Usage(10, 2))


@dataclass(kw_only=True)
class ScriptedProvider:
    """Answers (or raises) from `script`, in order; records every request it is sent."""

    script: list[Response | Exception]
    context_window: int | None = None
    max_output_tokens: int | None = None
    requests: list[Request] = field(default_factory=list)

    def complete(self, request: Request) -> Response:
        self.requests.append(request)
        if not self.script:
            raise AssertionError(f"unexpected call #{len(self.requests)}: the script is done")
        step = self.script.pop(0)
        if isinstance(step, Exception):
            raise step
        return step

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)

"""The Gemini adapter, with the real `google-genai` SDK talking to a local replay server.

Bodies replayed are real: provider-errors.json and the streams of tests/data/sse/gemini-*.txt
(each file cites its source).
"""

from __future__ import annotations

import base64
import json
import logging
import traceback
from collections.abc import AsyncIterator
from typing import Any

import pytest

from chatcli.errors import ErrorKind, ProviderError
from chatcli.messages import Message, StopReason, ToolCall
from chatcli.providers.base import Request, Response, StreamChunk, TextDelta, ToolSpec
from chatcli.providers.gemini import Gemini, merge_text_parts
from chatcli.request_settings import Settings
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, adapters_closed, replay_server

KEY = "AIzaSy-test-0123456789abcdef"
GEMINI_RECORDS = ("google-gemini", "google-vertex-ai")


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():
        yield


@pytest.fixture
def provider(server: ReplayServer) -> Gemini:
    return Gemini("gemini-3-pro-preview", api_key=KEY, base_url=server.url)


def ask(text: str = "How many r's are in strawberry?") -> Request:
    return Request(messages=(Message.user(text),), max_tokens=1024)


def recorded(name: str) -> list[dict[str, Any]]:
    """The chunks of a recorded stream, parsed."""
    return [json.loads(data) for _, data in sse_events(name)]


def signature_bytes(text: str) -> bytes:
    """A base64 thought signature as bytes. The API accepts both alphabets (protobuf JSON);
    Gemini sends the standard one, the SDK sends the URL-safe one."""
    return base64.urlsafe_b64decode(text.replace("+", "-").replace("/", "_"))


def final(chunks: list[StreamChunk]) -> Response:
    assert isinstance(chunks[-1], Response)
    assert not any(isinstance(c, Response) for c in chunks[:-1])
    return chunks[-1]


async def collect(provider: Gemini, request: Request, mode: str) -> list[StreamChunk]:
    if mode == "sync":
        return list(provider.stream(request))
    return [chunk async for chunk in provider.astream(request)]


# -- errors: real bodies, real statuses -----------------------------------------------------

_ERROR_RECORDS = [r for r in provider_errors(*GEMINI_RECORDS) if (r["http_status"] or 0) >= 400]
_EXPECTED_KIND = {
    "context_overflow": ErrorKind.CONTEXT_OVERFLOW,
    "output_cap_error": ErrorKind.OUTPUT_CAP,
}
_NUMBER_FIELDS = ("prompt_tokens", "limit", "max_tokens", "output_limit", "requested_tokens")


def assert_classified(info: Any, record: dict[str, Any]) -> None:
    assert info.status == record["http_status"]
    if record["kind"] == "not_overflow":
        assert info.kind in (ErrorKind.RATE_LIMIT, ErrorKind.QUOTA)
    else:
        assert info.kind is _EXPECTED_KIND[record["kind"]]
    for name, value in (record["numbers"] or {}).items():
        if name in _NUMBER_FIELDS:
            assert getattr(info, name) == value, name


@pytest.mark.parametrize("mode", ["sync", "async"])
@pytest.mark.parametrize("record", _ERROR_RECORDS, ids=[r["id"] for r in _ERROR_RECORDS])
async def test_real_error_bodies_are_classified(
    server: ReplayServer, provider: Gemini, record: dict[str, Any], mode: str
) -> None:
    server.add(replayed_error(record))
    with pytest.raises(ProviderError) as caught:
        if mode == "sync":
            provider.complete(ask())
        else:
            await provider.acomplete(ask())
    assert type(caught.value.__cause__).__module__ == "google.genai.errors"
    assert_classified(caught.value.info, record)
    assert len(server.requests) == 1  # the SDK does not retry on its own


def test_the_record_set_covers_overflow_quota_and_output_cap() -> None:
    assert {r["kind"] for r in _ERROR_RECORDS} == {
        "context_overflow",
        "not_overflow",
        "output_cap_error",
    }


def test_max_tokens_answer_with_only_thoughts(server: ReplayServer, provider: Gemini) -> None:
    (record,) = [r for r in provider_errors("google-gemini") if r["id"] == "pe-114"]
    server.add(Scripted(body=record["body"].encode(), headers={"content-type": "application/json"}))
    response = provider.complete(ask())
    assert response.stop_reason is StopReason.MAX_TOKENS
    assert response.message.text == ""
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (82088, 8192, 8192)
    assert response.model == "gemini-2.5-pro-preview-03-25"


# -- request mapping: the JSON the SDK sent -------------------------------------------------

WEATHER = ToolSpec(
    name="weather",
    description="Get the weather in a location",
    parameters={
        "type": "object",
        "properties": {"location": {"type": "string"}},
        "additionalProperties": False,
    },
)


def test_tool_call_round_trip(server: ReplayServer, provider: Gemini) -> None:
    """A recorded functionCall without id comes back as a stable synthetic id; the next
    request sends the call with its signature and the result, both without the id."""
    server.add(Scripted(events=sse_events("gemini-tool-call.txt")))
    first = final(list(provider.stream(Request(messages=(Message.user("SF?"),), tools=(WEATHER,)))))
    assert first.stop_reason is StopReason.TOOL_USE
    (call,) = first.message.tool_calls
    assert (call.name, dict(call.arguments), call.incomplete) == (
        "weather",
        {"location": "San Francisco"},
        False,
    )
    assert call.id.startswith("gemini-")

    history = (
        Message.system("Be brief."),
        Message.user("SF?"),
        first.message,
        Message.tool(call.id, "18C, sunny"),
        Message.system("Use Celsius."),
    )
    server.add(Scripted(events=sse_events("gemini-text.txt")))
    list(provider.stream(Request(messages=history, max_tokens=50, tools=(WEATHER,))))
    sent = server.requests[1].json()
    signature = recorded("gemini-tool-call.txt")[0]["candidates"][0]["content"]["parts"][0][
        "thoughtSignature"
    ]
    sent_part = sent["contents"][1]["parts"][0]
    assert signature_bytes(sent_part.pop("thoughtSignature")) == signature_bytes(signature)
    assert sent["contents"] == [
        {"role": "user", "parts": [{"text": "SF?"}]},
        {
            "role": "model",
            "parts": [
                {
                    "functionCall": {"name": "weather", "args": {"location": "San Francisco"}},
                }
            ],
        },
        {
            "role": "user",
            "parts": [
                {"functionResponse": {"name": "weather", "response": {"output": "18C, sunny"}}}
            ],
        },
    ]
    assert sent["systemInstruction"]["parts"] == [{"text": "Be brief."}, {"text": "Use Celsius."}]
    assert sent["generationConfig"]["maxOutputTokens"] == 50
    assert sent["tools"] == [
        {
            "functionDeclarations": [
                {
                    "name": "weather",
                    "description": "Get the weather in a location",
                    # the SDK sends declarations under their proto field names, which the
                    # API accepts as well as camelCase (proto3 JSON mapping)
                    "parameters_json_schema": dict(WEATHER.parameters),
                }
            ]
        }
    ]
    assert server.requests[1].path.endswith(":streamGenerateContent?alt=sse")


def test_synthetic_ids_are_stable(server: ReplayServer, provider: Gemini) -> None:
    server.add(*[Scripted(events=sse_events("gemini-tool-call.txt")) for _ in range(2)])
    ids = [final(list(provider.stream(ask()))).message.tool_calls[0].id for _ in range(2)]
    assert ids[0] == ids[1]


def test_gemini_ids_and_errors_are_sent_back(server: ReplayServer, provider: Gemini) -> None:
    call = ToolCall(id="fc-7", name="weather", arguments={"location": "Oslo"})
    history = (
        Message.user("Oslo and Rome?"),
        Message.assistant("Checking.", tool_calls=(call,)),
        Message.tool("fc-7", "service down", is_error=True),
        Message.user("And now?"),
    )
    server.add(Scripted(events=sse_events("gemini-text.txt")))
    list(provider.stream(Request(messages=history, settings=Settings(temperature=0.5))))
    sent = server.requests[0].json()
    assert sent["contents"][1:] == [
        {
            "role": "model",
            "parts": [
                {"text": "Checking."},
                {"functionCall": {"id": "fc-7", "name": "weather", "args": {"location": "Oslo"}}},
            ],
        },
        {
            "role": "user",
            "parts": [
                {
                    "functionResponse": {
                        "id": "fc-7",
                        "name": "weather",
                        "response": {"error": "service down"},
                    }
                },
                {"text": "And now?"},
            ],
        },
    ]
    # No max_tokens in the request: the model's cap from the catalog is sent.
    assert sent["generationConfig"] == {"temperature": 0.5, "maxOutputTokens": 65_536}


def test_orphan_tool_result_is_refused(provider: Gemini) -> None:
    with pytest.raises(ValueError, match="no matching tool call"):
        provider.complete(Request(messages=(Message.user("x"), Message.tool("nope", "r"))))


# -- streaming ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_stream_text_keeps_the_thought_signature(
    server: ReplayServer, provider: Gemini, mode: str
) -> None:
    server.add(Scripted(events=sse_events("gemini-text.txt")))
    chunks = await collect(provider, ask(), mode)
    response = final(chunks)
    texts = [c.text for c in chunks if isinstance(c, TextDelta)]
    assert texts == [
        'There are **3** "r"s in',
        " strawberry.\n\nHere is the breakdown: st**r**awbe**rr**y.",
    ]
    assert response.message.text == "".join(texts)
    assert response.stop_reason is StopReason.END_TURN
    usage = response.usage
    assert (usage.input_tokens, usage.output_tokens, usage.reasoning_tokens) == (9, 29 + 256, 256)
    (part,) = response.message.parts
    signature = recorded("gemini-text.txt")[-1]["candidates"][0]["content"]["parts"][0][
        "thoughtSignature"
    ]
    assert part.provider_details == {"gemini": {"thought_signature": signature}}

    server.add(Scripted(events=sse_events("gemini-text.txt")))
    follow_up = (Message.user("q"), response.message, Message.user("Sure?"))
    await collect(provider, Request(messages=follow_up), mode)
    (sent_part,) = server.requests[1].json()["contents"][1]["parts"]
    assert signature_bytes(sent_part.pop("thoughtSignature")) == signature_bytes(signature)
    assert sent_part == {"text": response.message.text}


async def test_acomplete(server: ReplayServer, provider: Gemini) -> None:
    (record,) = [r for r in provider_errors("google-gemini") if r["id"] == "pe-114"]
    server.add(Scripted(body=record["body"].encode(), headers={"content-type": "application/json"}))
    response = await provider.acomplete(ask())
    assert response.stop_reason is StopReason.MAX_TOKENS


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_error_inside_a_stream_is_classified(
    server: ReplayServer, provider: Gemini, mode: str
) -> None:
    events = sse_events("gemini-text.txt")[:1] + sse_events("gemini-error.txt")
    server.add(Scripted(events=events))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(), mode)
    assert caught.value.info.kind is ErrorKind.TRANSIENT
    assert caught.value.info.status == 503
    assert "overloaded" in str(caught.value)


@pytest.mark.parametrize("close_early", [False, True], ids=["clean-end", "connection-drop"])
@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_stream_without_finish_reason_raises(
    server: ReplayServer, provider: Gemini, close_early: bool, mode: str
) -> None:
    server.add(Scripted(events=sse_events("gemini-text.txt")[:2], close_early=close_early))
    with pytest.raises(ProviderError) as caught:
        await collect(provider, ask(), mode)
    assert caught.value.info.kind is ErrorKind.TRANSIENT


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_empty_stream_raises(server: ReplayServer, provider: Gemini, mode: str) -> None:
    server.add(Scripted(events=[]))
    with pytest.raises(ProviderError, match="empty") as caught:
        await collect(provider, ask(), mode)
    assert caught.value.info.kind is ErrorKind.TRANSIENT


def test_merge_text_parts_never_moves_a_signature_backwards() -> None:
    parts = [
        {"text": "a"},
        {"text": "b", "thought_signature": "S"},
        {"text": "c"},
        {"thought": True, "text": "t"},
        {"function_call": {"name": "f"}},
    ]
    assert merge_text_parts(parts) == [
        {"text": "ab", "thought_signature": "S"},
        {"text": "c"},
        {"thought": True, "text": "t"},
        {"function_call": {"name": "f"}},
    ]
    assert parts[0] == {"text": "a"}  # input untouched


def test_thought_parts_are_kept_apart_and_sent_back(server: ReplayServer) -> None:
    thought = {"text": "Counting letters.", "thought": True}
    answer = {
        "candidates": [
            {
                "content": {"role": "model", "parts": [thought, {"text": "3"}]},
                "finishReason": "STOP",
            }
        ]
    }
    server.add(Scripted(body=answer), Scripted(body=answer))
    provider = Gemini("m", api_key=KEY, base_url=server.url)
    response = provider.complete(ask())
    assert response.message.text == "3"
    provider.complete(Request(messages=(Message.user("q"), response.message, Message.user("?"))))
    assert server.requests[1].json()["contents"][1]["parts"] == [thought, {"text": "3"}]


# -- keys -----------------------------------------------------------------------------------


@pytest.mark.parametrize("variable", ["GEMINI_API_KEY", "GOOGLE_API_KEY"])
def test_key_from_environment_and_never_shown(
    server: ReplayServer, caplog: pytest.LogCaptureFixture, variable: str
) -> None:
    caplog.set_level(logging.DEBUG)
    provider = Gemini("m", base_url=server.url, environ={variable: KEY})
    server.add(
        Scripted(
            status=400,
            body={
                "error": {
                    "code": 400,
                    "message": "API key not valid. Please pass a valid API key.",
                    "status": "INVALID_ARGUMENT",
                }
            },
        )
    )
    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())
    assert server.requests[0].headers["x-goog-api-key"] == KEY  # the key was used...
    shown = [
        repr(provider),
        str(caught.value),
        repr(caught.value.info),
        caplog.text,
        "".join(traceback.format_exception(caught.value)),
    ]
    assert not any(KEY in text for text in shown)  # ...and is nowhere to be seen


def test_gemini_key_wins_over_google_key(server: ReplayServer) -> None:
    provider = Gemini(
        "m", base_url=server.url, environ={"GOOGLE_API_KEY": "other", "GEMINI_API_KEY": KEY}
    )
    server.add(Scripted(events=sse_events("gemini-text.txt")))
    list(provider.stream(ask()))
    assert server.requests[0].headers["x-goog-api-key"] == KEY


def test_connection_error_is_classified_without_the_key() -> None:
    with replay_server() as dead:
        url = dead.url
    provider = Gemini("m", api_key=KEY, base_url=url)
    with pytest.raises(ProviderError) as caught:
        provider.complete(ask())
    assert caught.value.info.kind is ErrorKind.TRANSIENT
    assert KEY not in "".join(traceback.format_exception(caught.value))


def test_missing_key_names_the_variables() -> None:
    with pytest.raises(Exception, match="GEMINI_API_KEY or GOOGLE_API_KEY"):
        Gemini("m", environ={})


def test_declares_model_limits() -> None:
    provider = Gemini("m", api_key=KEY, context_window=1_048_576, max_output_tokens=65_536)
    assert (provider.context_window, provider.max_output_tokens) == (1_048_576, 65_536)
    assert repr(provider) == "Gemini(model='m', base_url=None)"

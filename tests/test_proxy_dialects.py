"""Each client dialect both ways against real recorded bodies, validated by the SDKs' own types."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import anthropic.types
import openai.types.chat
import pytest
from pydantic import TypeAdapter

from chatcli.errors import ContextRecoveryError, ErrorInfo, ErrorKind, ProviderError
from chatcli.messages import Role, StopReason, Usage
from chatcli.providers.anthropic import response_from_message
from chatcli.providers.base import Response
from chatcli.providers.openai import chat_response
from chatcli.proxy.failures import failure_from
from chatcli.recovery import Reply
from chatcli.wire.anthropic import AnthropicDialect
from chatcli.wire.dialect import FailureKind
from chatcli.wire.items import StreamItem, final_items
from chatcli.wire.openai_chat import OpenAIDialect
from tests.recorded import DATA, provider_errors
from tests.test_anthropic_adapter import DOCS_TOOL_USE_RESPONSE
from tests.test_openai_adapter import CHAT_TOOLS

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema


def as_reply(response: Response) -> Reply:
    return Reply(
        message=response.message,
        usage=response.usage,
        events=(),
        truncated=False,
        view=(),
        stop_reason=response.stop_reason,
        calls=1,
    )


def collect(stream: AsyncIterator[bytes]) -> list[str]:
    async def run() -> list[str]:
        return [chunk.decode() async for chunk in stream]

    return asyncio.run(run())


async def items_of(reply: Reply) -> AsyncIterator[StreamItem]:
    for item in final_items(reply, ""):
        yield item


def data_lines(chunks: list[str]) -> list[str]:
    return [line[6:] for c in chunks for line in c.splitlines() if line.startswith("data: ")]


def test_openai_reply_of_a_recorded_answer_is_a_valid_chat_completion() -> None:
    recorded = openai.types.chat.ChatCompletion.model_validate(CHAT_TOOLS)
    reply = as_reply(chat_response(recorded))
    wire = OpenAIDialect().reply(None, reply, model="gpt-4o")  # type: ignore[arg-type]
    parsed = openai.types.chat.ChatCompletion.model_validate(wire)
    assert parsed.choices[0].finish_reason == "tool_calls"
    assert [c.model_dump() for c in parsed.choices[0].message.tool_calls or ()] == [
        {**c, "function": {**c["function"], "arguments": _compact(c["function"]["arguments"])}}
        for c in CHAT_TOOLS["choices"][0]["message"]["tool_calls"]
    ]
    assert parsed.usage is not None and parsed.usage.total_tokens == 209


def _compact(arguments: str) -> str:
    return json.dumps(json.loads(arguments), ensure_ascii=False, separators=(",", ":"))


def test_openai_stream_chunks_are_valid_and_carry_the_answer() -> None:
    reply = as_reply(chat_response(openai.types.chat.ChatCompletion.model_validate(CHAT_TOOLS)))
    dialect = OpenAIDialect()
    request = dialect.parse(
        {"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": True}}
    )
    lines = data_lines(collect(dialect.stream(request, items_of(reply), model="gpt-4o")))
    assert lines[-1] == "[DONE]"
    chunks = [openai.types.chat.ChatCompletionChunk.model_validate_json(x) for x in lines[:-1]]
    calls = [
        c for chunk in chunks if chunk.choices for c in chunk.choices[0].delta.tool_calls or ()
    ]
    assert [c.function.name for c in calls if c.function] == ["GetWeatherArgs", "get_stock_price"]
    assert chunks[-1].usage is not None and chunks[-1].usage.prompt_tokens == 149


def test_openai_parse_of_a_recorded_sdk_request() -> None:
    recorded = json.loads((DATA / "llama-server-stream.json").read_text())["request"]["json"]
    request = OpenAIDialect().parse(recorded)
    assert [(m.role, m.text) for m in request.messages] == [(Role.USER, "Say something.")]
    assert (request.max_tokens, request.stream, request.include_usage) == (10, True, True)
    assert request.passthrough == {}


def test_openai_parse_maps_settings_and_keeps_the_rest() -> None:
    body = {
        "model": "gpt-4o",
        "messages": [
            {"role": "system", "content": "s"},
            {
                "role": "assistant",
                "content": None,
                "tool_calls": CHAT_TOOLS["choices"][0]["message"]["tool_calls"],
            },
            {"role": "tool", "tool_call_id": "call_fdNz3vOBKYgOIpMdWotB9MjY", "content": "12C"},
        ],
        "temperature": 0.5,
        "stop": ["x"],
        "user": "u1",
    }
    request = OpenAIDialect().parse(body)
    assert request.settings == {"temperature": 0.5, "stop": ["x"]}
    assert request.passthrough == {"temperature": 0.5, "stop": ["x"], "user": "u1"}
    assert request.messages[1].tool_calls[0].arguments == {
        "city": "Edinburgh",
        "country": "GB",
        "units": "c",
    }
    assert request.messages[2].tool_result is not None


def test_anthropic_reply_of_a_recorded_answer_is_a_valid_message() -> None:
    reply = as_reply(response_from_message(DOCS_TOOL_USE_RESPONSE))
    wire = AnthropicDialect().reply(None, reply, model="claude")  # type: ignore[arg-type]
    parsed = anthropic.types.Message.model_validate(wire)
    assert parsed.stop_reason == "tool_use"
    assert [b.model_dump(exclude_none=True) for b in parsed.content] == [
        {k: v for k, v in b.items()} for b in DOCS_TOOL_USE_RESPONSE["content"]
    ]


def test_anthropic_stream_events_are_valid_and_carry_the_answer() -> None:
    reply = as_reply(response_from_message(DOCS_TOOL_USE_RESPONSE))
    dialect = AnthropicDialect()
    request = dialect.parse({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    lines = data_lines(collect(dialect.stream(request, items_of(reply), model="claude")))
    adapter: Any = anthropic.types.RawMessageStreamEvent
    from pydantic import TypeAdapter

    events = [TypeAdapter(adapter).validate_json(x) for x in lines]
    assert next(e.type for e in events) == "message_start"
    assert [e.type for e in events][-2:] == ["message_delta", "message_stop"]
    deltas = [e.delta for e in events if e.type == "content_block_delta"]
    assert "".join(getattr(d, "partial_json", "") for d in deltas) == json.dumps(
        DOCS_TOOL_USE_RESPONSE["content"][1]["input"], separators=(",", ":")
    )


def test_anthropic_parse_splits_a_user_turn_and_remembers_its_origin() -> None:
    body = {
        "max_tokens": 10,
        "system": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}],
        "messages": [
            {"role": "user", "content": "go"},
            {"role": "assistant", "content": DOCS_TOOL_USE_RESPONSE["content"]},
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "toolu_01A09q90qw90lq917835lq9",
                        "content": [{"type": "text", "text": "15C"}],
                    },
                    {"type": "text", "text": "thanks"},
                ],
            },
            {"role": "assistant", "content": "ok"},
            {
                "role": "user",
                "content": [
                    {
                        "type": "image",
                        "source": {"type": "base64", "media_type": "image/png", "data": "iVBO"},
                    }
                ],
            },
        ],
    }
    request = AnthropicDialect().parse(body)
    assert "".join(m.role.value[0] for m in request.messages) == "ssuatuau"
    assert request.origins == (None, None, 0, 1, 2, 2, 3, 4)
    assert request.messages[3].tool_calls[0].arguments == {
        "location": "San Francisco, CA",
        "unit": "celsius",
    }
    assert request.messages[4].text == "15C"


def test_error_envelopes_have_the_providers_recorded_shape() -> None:
    openai_record = next(r for r in provider_errors("openai") if r["id"] == "pe-056")
    recorded = json.loads(openai_record["body"][openai_record["body"].index("{") :])
    failure = failure_from(
        ContextRecoveryError(
            "no fit",
            info=ErrorInfo(kind=ErrorKind.CONTEXT_OVERFLOW, prompt_tokens=5848, limit=4097),
            attempts=(),
        )
    )
    ours = OpenAIDialect().error(failure)
    assert set(ours["error"]) == set(recorded["error"])
    assert ours["error"]["code"] == recorded["error"]["code"] == "context_length_exceeded"
    assert ours["error"]["message"].startswith(
        "This model's maximum context length is 4097 tokens. "
        "However, your messages resulted in 5848 tokens."
    )
    anthropic_record = next(r for r in provider_errors("anthropic") if r["id"] == "pe-004")
    recorded = json.loads(anthropic_record["body"])
    mine = AnthropicDialect().error(failure)
    assert set(mine) == set(recorded) and set(mine["error"]) == set(recorded["error"])
    assert mine["error"]["type"] == "invalid_request_error"
    assert mine["error"]["message"].startswith(
        "prompt is too long: 5848 tokens > 4097 maximum (chatcli: "
    )


def test_an_overflow_tells_the_client_what_was_tried_and_what_it_can_do() -> None:
    from chatcli.policy.run import RECOVERY_ADVICE

    attempts = ("level 2 (emergency truncation) skipped: predicted 36,399 > 16,384 tokens",)
    error = ContextRecoveryError(
        f"the conversation does not fit the context window: boom. {RECOVERY_ADVICE}",
        info=ErrorInfo(kind=ErrorKind.CONTEXT_OVERFLOW, prompt_tokens=36771, limit=16384),
        attempts=attempts,
    )
    message = AnthropicDialect().error(failure_from(error))["error"]["message"]
    assert message.startswith("prompt is too long: 36771 tokens > 16384 maximum")
    assert "16,384-token context window" in message and attempts[0] in message
    assert "compact or clear the conversation" in message
    assert "/clear" not in message and "--context-window" not in message  # the chat's words


def test_failures_by_kind() -> None:
    def of(kind: ErrorKind, status: int | None, **more: Any) -> Any:
        return failure_from(ProviderError(ErrorInfo(kind=kind, status=status, message="m", **more)))

    assert (
        of(ErrorKind.CONTEXT_OVERFLOW, 500).status,
        of(ErrorKind.CONTEXT_OVERFLOW, 413).status,
    ) == (400, 400)
    limited = of(ErrorKind.RATE_LIMIT, 429, retry_after=7.0)
    assert (limited.status, limited.headers()) == (429, {"retry-after": "7"})
    assert (of(ErrorKind.AUTH, 403).kind, of(ErrorKind.AUTH, 403).status) == (
        FailureKind.PERMISSION,
        403,
    )
    assert of(ErrorKind.AUTH, None).status == 401
    assert of(ErrorKind.TRANSIENT, 500).status == 502
    assert of(ErrorKind.TRANSIENT, 529).kind is FailureKind.OVERLOADED
    assert of(ErrorKind.INVALID_REQUEST, 422).status == 422
    assert failure_from(RuntimeError("sk-secret")).message == "the upstream call failed"


def test_usage_and_stop_reasons_map_for_every_stop_reason() -> None:
    for stop in StopReason:
        reply = as_reply(
            Response(
                message=response_from_message(DOCS_TOOL_USE_RESPONSE).message,
                stop_reason=stop,
                usage=Usage(input_tokens=3, output_tokens=4),
            )
        )
        assert OpenAIDialect().reply(None, reply, model="m")["usage"]["total_tokens"] == 7  # type: ignore[arg-type]
        assert AnthropicDialect().reply(None, reply, model="m")["stop_reason"]  # type: ignore[arg-type]


def test_cross_dialect_settings_become_neutral_settings() -> None:
    from chatcli.request_settings import Settings
    from chatcli.wire.forwarding import plan

    anthropic_request = AnthropicDialect().parse(
        {
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
            "tool_choice": {"type": "tool", "name": "get_weather"},
            "stop_sequences": ["END"],
            "top_k": 3,
            "temperature": 0,
        }
    )
    to_openai = plan(anthropic_request, "openai")
    assert to_openai.settings == Settings(temperature=0, tool_choice="get_weather", stop=("END",))
    assert to_openai.dropped == ("top_k",)
    openai_request = OpenAIDialect().parse(
        {
            "messages": [{"role": "user", "content": "hi"}],
            "tool_choice": "required",
            "stop": "END",
            "seed": 7,
            "logprobs": True,
        }
    )
    to_anthropic = plan(openai_request, "anthropic")
    assert to_anthropic.settings == Settings(tool_choice="required", stop=("END",))
    assert to_anthropic.dropped == ("logprobs", "seed")
    any_tool = AnthropicDialect().parse(
        {
            "max_tokens": 5,
            "messages": [{"role": "user", "content": "hi"}],
            "tool_choice": {"type": "any"},
        }
    )
    assert plan(any_tool, "openai").settings.tool_choice == "required"
    # gemini, llama-cpp: temperature only
    assert plan(anthropic_request, None).settings == Settings(temperature=0)
    assert plan(anthropic_request, None).dropped == ("stop_sequences", "tool_choice", "top_k")
    same = plan(openai_request, "openai")
    assert same.same_dialect and same.dropped == ()
    assert same.settings == Settings(extra=openai_request.passthrough)


def test_a_setting_out_of_range_is_the_clients_error() -> None:
    from chatcli.wire.dialect import RequestError
    from chatcli.wire.forwarding import plan

    request = AnthropicDialect().parse(
        {"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}], "top_p": 3}
    )
    with pytest.raises(RequestError) as caught:
        plan(request, "openai")
    assert caught.value.failure.status == 400
    assert "top_p must be between 0 and 1" in caught.value.failure.message


def test_claude_codes_recorded_request_parses_with_its_system_turn() -> None:
    body = json.loads((DATA / "claude-code" / "messages-request.json").read_text())
    request = AnthropicDialect().parse(body)
    roles = [m.role for m in request.messages]
    # The system blocks, the user turn, then the system turn where Claude Code put it.
    assert roles[-2:] == [Role.USER, Role.SYSTEM] and set(roles[:-2]) == {Role.SYSTEM}
    assert request.messages[-1].text.startswith("# Environment")
    assert [t.name for t in request.tools][:2] == ["Agent", "Bash"] and len(request.tools) == 12


def test_an_answer_reports_its_last_calls_usage_and_the_rest_apart() -> None:
    from dataclasses import replace

    from chatcli.wire.usage import recovery_headers

    response = response_from_message(DOCS_TOOL_USE_RESPONSE)
    final = Usage(input_tokens=900, output_tokens=30, cache_read_tokens=100)
    total = final + Usage(input_tokens=800, output_tokens=20, cache_read_tokens=1000)
    reply = replace(as_reply(response), usage=total, final_usage=final, calls=3)
    asked = {"model": "m", "max_tokens": 9, "messages": [{"role": "user", "content": "hi"}]}
    usage = AnthropicDialect().reply(AnthropicDialect().parse(asked), reply, model="m")["usage"]
    assert (usage["input_tokens"], usage["cache_read_input_tokens"]) == (900, 100)
    assert usage["output_tokens"] == 30
    asked = {"model": "m", "messages": [{"role": "user", "content": "hi"}]}
    openai_usage = OpenAIDialect().reply(OpenAIDialect().parse(asked), reply, model="m")["usage"]
    assert openai_usage["prompt_tokens"] == 1000
    assert recovery_headers(reply) == {
        "x-chatcli-recovery-calls": "2",
        "x-chatcli-recovery-usage": "input_tokens=800, output_tokens=20, "
        "cache_read_tokens=1000, cache_write_tokens=0",
    }
    assert recovery_headers(as_reply(response)) == {}


PAUSED = json.loads((Path(__file__).parent / "data" / "native-compaction.json").read_text())[
    "anthropic_paused"
]


def test_a_paused_compaction_reaches_an_anthropic_client_as_the_api_sent_it() -> None:
    """An answer that paused after compacting (`pause_after_compaction`): an Anthropic client
    gets the block and `stop_reason` "compaction" (the beta SDK's types validate it), whole
    and streamed; an OpenAI client a finished answer."""
    reply = as_reply(response_from_message(PAUSED, model="claude-sonnet-4-6"))
    dialect = AnthropicDialect()
    wire = dialect.reply(None, reply, model="claude")  # type: ignore[arg-type]
    parsed = anthropic.types.beta.BetaMessage.model_validate(wire)
    assert parsed.stop_reason == "compaction"
    assert [b.model_dump(exclude_none=True) for b in parsed.content] == PAUSED["content"]
    request = dialect.parse({"max_tokens": 5, "messages": [{"role": "user", "content": "hi"}]})
    lines = data_lines(collect(dialect.stream(request, items_of(reply), model="claude")))
    adapter: Any = anthropic.types.beta.BetaRawMessageStreamEvent
    events = [TypeAdapter(adapter).validate_json(x) for x in lines]
    start = next(e for e in events if e.type == "content_block_start")
    assert start.content_block.type == "compaction"
    (delta,) = [e.delta for e in events if e.type == "content_block_delta"]
    assert delta.content == PAUSED["content"][0]["content"]
    (ending,) = [e for e in events if e.type == "message_delta"]
    assert ending.delta.stop_reason == "compaction"
    openai_wire = OpenAIDialect().reply(None, reply, model="m")  # type: ignore[arg-type]
    assert openai_wire["choices"][0]["finish_reason"] == "stop"

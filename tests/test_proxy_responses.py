"""The proxy's Responses dialect (`POST /v1/responses`): the dialect against the recorded API
streams of tests/data/sse and the SDK's own types, then the official `openai` SDK's
`responses.create` against the proxy in front of a replay server playing real recorded Chat
Completions bodies, which captures what the proxy forwards."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import openai
import pytest
from openai.types.responses import Response, ResponseStreamEvent
from pydantic import TypeAdapter

from chatcli.messages import Message, Role, StopReason, ToolCall, Usage
from chatcli.providers.base import TextDelta
from chatcli.recovery import Reply
from chatcli.wire.dialect import Failure, FailureKind, RequestError
from chatcli.wire.forwarding import plan
from chatcli.wire.items import FinalReply, StreamItem, ToolCallDelta
from chatcli.wire.responses import ResponsesDialect
from tests import test_proxy_wire as wire
from tests.recorded import DATA, sse_events
from tests.replay import ReplayServer, Scripted
from tests.test_openai_adapter import CHAT_TEXT, CHAT_TOOLS
from tests.test_proxy_wire import oa, record, replayed_error

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

# The replay server, and the proxy in front of it as an OpenAI upstream, of test_proxy_wire.
upstream, openai_proxy, _close_clients = wire.upstream, wire.openai_proxy, wire._close_clients

DIALECT = ResponsesDialect()
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
TEXT = CHAT_TEXT["choices"][0]["message"]["content"]  # type: ignore[index]

# A Codex-like conversation: instructions, a developer message, a tool call and its result.
CODEX_INPUT: list[dict[str, Any]] = [
    {"type": "message", "role": "developer", "content": [{"type": "input_text", "text": "Dev."}]},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "List."}]},
    {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": "gAAAA"},
    {
        "type": "message",
        "role": "assistant",
        "content": [{"type": "output_text", "text": "Running ls."}],
    },
    {"type": "function_call", "call_id": "call_1", "name": "shell", "arguments": '{"c":"ls"}'},
    {"type": "function_call_output", "call_id": "call_1", "output": "a.txt\nb.txt"},
    {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Now?"}]},
]
SHELL_TOOL = {
    "type": "function",
    "name": "shell",
    "description": "Runs a command.",
    "parameters": {"type": "object", "properties": {"c": {"type": "string"}}},
    "strict": False,
}


def reply_of(
    text: str = "", calls: tuple[ToolCall, ...] = (), stop: StopReason = StopReason.END_TURN
) -> Reply:
    return Reply(
        message=Message.assistant(text, calls),
        usage=Usage(input_tokens=12, output_tokens=5),
        events=(),
        truncated=stop is StopReason.MAX_TOKENS,
        view=(),
        stop_reason=stop,
        calls=1,
    )


def streamed(items: list[StreamItem], body: dict[str, Any] | None = None) -> list[Any]:
    """What the dialect writes for `items`, each event validated into the SDK's own type."""
    request = DIALECT.parse(body or {"model": "m", "input": "hi", "stream": True})

    async def feed() -> AsyncIterator[StreamItem]:
        for item in items:
            yield item

    async def written() -> bytes:
        return b"".join([c async for c in DIALECT.stream(request, feed(), model="m")])

    events = []
    for block in asyncio.run(written()).decode().split("\n\n"):
        data = [line[6:] for line in block.splitlines() if line.startswith("data: ")]
        if data:
            events.append(EVENTS.validate_python(json.loads(data[0])))
    return events


def kinds(types: list[str]) -> list[str]:
    """Event types with runs of deltas collapsed to one."""
    return [t for i, t in enumerate(types) if not (t.endswith(".delta") and types[i - 1] == t)]


# Codex's freeform apply_patch: a custom tool, which the model calls with free text.
APPLY_PATCH: Any = {
    "type": "custom",
    "name": "apply_patch",
    "description": "Edits files.",
    "format": {"type": "grammar", "syntax": "lark", "definition": "start: /.+/"},
}
# The first request of `codex exec` with its default tools, as recorded (tests/data).
CODEX_FIRST = json.loads((DATA / "codex-first-request.json").read_text())["body"]

# --- the dialect ------------------------------------------------------------------------------


def test_a_codex_conversation_is_read_into_whole_turns() -> None:
    body = {"model": "m", "instructions": "Be brief.", "input": CODEX_INPUT, "tools": [SHELL_TOOL]}
    parsed = DIALECT.parse(body)
    assert [m.role for m in parsed.messages] == [
        Role.SYSTEM,
        Role.SYSTEM,
        Role.USER,
        Role.ASSISTANT,
        Role.TOOL,
        Role.USER,
    ]
    assert parsed.messages[0].text == "Be brief." and parsed.raw_system == "Be brief."
    assistant = parsed.messages[3]
    assert assistant.text == "Running ls." and [c.name for c in assistant.tool_calls] == ["shell"]
    assert parsed.messages[4].tool_result.call_id == "call_1"  # type: ignore[union-attr]  # the pair is whole
    assert parsed.origins == (None, 0, 1, 2, 3, 4)
    assert [t.name for t in parsed.tools] == ["shell"] and parsed.unreadable == ()


def test_the_settings_reach_another_dialect_in_neutral_form() -> None:
    body = {
        "model": "m",
        "input": "hi",
        "temperature": 0.5,
        "tool_choice": {"type": "function", "name": "shell"},
        "reasoning": {"effort": "low", "summary": "auto"},
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    forwarding = plan(DIALECT.parse(body), "openai")
    settings = forwarding.settings
    assert (settings.temperature, settings.tool_choice, settings.reasoning_effort) == (
        0.5,
        "shell",
        "low",
    )
    assert forwarding.dropped == ("include", "store")  # said in x-chatcli-dropped


@pytest.mark.parametrize(
    ("extra", "named"),
    [
        ({"previous_response_id": "resp_1"}, "previous_response_id"),
        ({"tools": [APPLY_PATCH]}, "tools[0] of type 'custom'"),
        (
            {
                "tools": [
                    {"type": "namespace", "name": "n", "description": "", "tools": [APPLY_PATCH]}
                ]
            },
            "tools[0].tools[0] of type 'custom'",
        ),
        (
            {"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]},
            "input[0].content part of type 'input_image'",
        ),
    ],
)
def test_what_another_dialect_cannot_take_is_refused_by_name(
    extra: dict[str, Any], named: str
) -> None:
    parsed = DIALECT.parse({"model": "m", "input": "hi", **extra})
    with pytest.raises(RequestError, match=named.replace("[", r"\[")):
        plan(parsed, "openai")
    assert plan(parsed, "responses").same_dialect  # a Responses upstream takes it verbatim


def test_codexs_first_request_is_read_with_its_namespace_flat_and_web_search_left_out() -> None:
    parsed = DIALECT.parse(CODEX_FIRST)
    grouped = next(t for t in CODEX_FIRST["tools"] if t["type"] == "namespace")
    members = [f"{grouped['name']}__{t['name']}" for t in grouped["tools"]]
    functions = [t["name"] for t in CODEX_FIRST["tools"] if t["type"] == "function"]
    assert sorted(t.name for t in parsed.tools) == sorted(functions + members)
    assert parsed.unreadable == ()
    assert parsed.omitted == ("tools[8] (web_search)",)
    forwarding = plan(parsed, "openai")
    assert "tools[8] (web_search)" in forwarding.dropped and "store" in forwarding.dropped


def test_a_namespaced_call_goes_flat_to_the_upstream_and_back_as_the_client_named_it() -> None:
    body = {
        **CODEX_FIRST,
        "input": [
            *CODEX_FIRST["input"],
            {
                "type": "function_call",
                "call_id": "call_1",
                "name": "wait_agent",
                "namespace": "multi_agent_v1",
                "arguments": "{}",
            },
            {"type": "function_call_output", "call_id": "call_1", "output": "none"},
        ],
    }
    parsed = DIALECT.parse(body)
    sent = parsed.messages[-2].tool_calls[0]
    assert sent.name == "multi_agent_v1__wait_agent"  # one of the tools the upstream has
    assert sent.name in {t.name for t in parsed.tools}
    calls = (
        ToolCall(id="call_2", name="multi_agent_v1__close_agent", arguments={"target": "a"}),
        ToolCall(id="call_3", name="exec_command", arguments={"cmd": "ls"}),
    )
    whole = Response.model_validate(DIALECT.reply(parsed, reply_of(calls=calls), model="m"))
    written = [(i.name, i.namespace) for i in whole.output if i.type == "function_call"]
    assert written == [("close_agent", "multi_agent_v1"), ("exec_command", None)]
    events = streamed([FinalReply(reply=reply_of(calls=calls))], body)
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [(i.name, i.namespace) for i in done] == written
    assert [(i.name, i.namespace) for i in events[-1].response.output] == written


def test_a_whole_reply_is_the_sdks_response() -> None:
    calls = (ToolCall(id="call_9", name="shell", arguments={"c": "ls"}),)
    body = DIALECT.reply(
        DIALECT.parse({"model": "m", "input": "hi"}), reply_of("Ok.", calls), model="m"
    )
    response = Response.model_validate(body)
    assert response.status == "completed" and response.output_text == "Ok."
    call = response.output[1]
    assert call.type == "function_call" and (call.call_id, call.name) == ("call_9", "shell")
    assert json.loads(call.arguments) == {"c": "ls"}
    assert response.usage is not None and response.usage.total_tokens == 17
    cut = DIALECT.reply(
        DIALECT.parse({"model": "m", "input": "hi"}),
        reply_of("O", stop=StopReason.MAX_TOKENS),
        model="m",
    )
    assert cut["status"] == "incomplete"
    assert cut["incomplete_details"] == {"reason": "max_output_tokens"}


def test_a_streamed_text_answer_has_the_recorded_apis_events() -> None:
    recorded = [json.loads(data)["type"] for _, data in sse_events("openai-responses-text.txt")]
    events = streamed(
        [TextDelta(text="Hel"), TextDelta(text="lo"), FinalReply(reply=reply_of("Hello"))]
    )
    assert kinds([e.type for e in events]) == kinds(recorded)
    assert [e.sequence_number for e in events] == list(range(len(events)))
    done = events[-1].response
    assert done.output_text == "Hello" and done.id == events[0].response.id
    assert done.output[0].id == events[2].item.id  # the item the deltas wrote


def test_streamed_tool_calls_have_the_recorded_apis_events() -> None:
    recorded = [
        json.loads(data)["type"] for _, data in sse_events("openai-responses-reasoning-tool.txt")
    ]
    calls = (ToolCall(id="call_9", name="shell", arguments={"c": "ls"}),)
    delta = ToolCallDelta(index=0, id="call_9", name="shell", arguments='{"c": "ls"}')
    events = streamed([delta, FinalReply(reply=reply_of(calls=calls))])
    # The recorded answer has a reasoning item (added, done) before its call; this one none.
    assert kinds([e.type for e in events]) == kinds(recorded[:2] + recorded[4:])
    done = [e.item for e in events if e.type == "response.output_item.done"]
    assert [(i.call_id, i.name, json.loads(i.arguments)) for i in done] == [
        ("call_9", "shell", {"c": "ls"})
    ]
    assert events[-1].response.output[0].id == done[0].id


def test_a_stream_error_is_the_recorded_apis_error_then_failed_events() -> None:
    recorded = [json.loads(data) for _, data in sse_events("openai-responses-error-quota.txt")]
    failure = Failure(
        kind=FailureKind.OVERFLOW, status=400, message="too long", limit=1024, prompt_tokens=3000
    )
    written = [
        json.loads(line[6:])
        for line in DIALECT.stream_error(failure).decode().splitlines()
        if line.startswith("data: ")
    ]
    assert [e["type"] for e in written] == [e["type"] for e in recorded[2:]]
    assert written[0]["error"].keys() == recorded[2]["error"].keys()
    assert written[0]["error"]["code"] == "context_length_exceeded"
    assert written[1]["response"]["status"] == "failed"
    assert written[1]["response"]["error"]["code"] == "context_length_exceeded"
    assert "maximum context length is 1024 tokens" in written[1]["response"]["error"]["message"]


def test_errors_are_openais_envelope_naming_input() -> None:
    overflow = DIALECT.error(Failure(kind=FailureKind.OVERFLOW, status=400, message="m"))
    assert overflow["error"]["code"] == "context_length_exceeded"
    assert overflow["error"]["param"] == "input"
    with pytest.raises(RequestError, match="input items of type 'item_reference'"):
        DIALECT.parse({"model": "m", "input": [{"type": "item_reference", "id": "x"}]})


# --- the openai SDK against the proxy, in front of a recorded Chat Completions upstream ------


def test_a_responses_client_in_front_of_a_chat_upstream(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(body=CHAT_TEXT))
    raw = oa(openai_proxy).responses.with_raw_response.create(
        model="gpt-4o",
        instructions="Be brief.",
        input="Weather in SF?",
        temperature=0.25,
        max_output_tokens=100,
        store=False,
    )
    response = raw.parse()
    assert response.output_text == TEXT and response.status == "completed"
    assert response.usage is not None and response.usage.input_tokens == 14
    assert raw.headers["x-chatcli-dropped"] == "store"  # the proxy keeps no responses
    forwarded = upstream.requests[0].json()
    assert forwarded["messages"] == [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "Weather in SF?"},
    ]
    assert (forwarded["temperature"], forwarded["max_completion_tokens"]) == (0.25, 100)
    assert "store" not in forwarded and "instructions" not in forwarded


def test_tool_calls_round_trip_as_function_call_items(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(body=CHAT_TOOLS), Scripted(body=CHAT_TEXT))
    client = oa(openai_proxy)
    tools: Any = [SHELL_TOOL]
    first = client.responses.create(model="gpt-4o", input="Weather?", tools=tools)
    calls = [item for item in first.output if item.type == "function_call"]
    assert [(c.call_id, c.name) for c in calls] == [
        ("call_fdNz3vOBKYgOIpMdWotB9MjY", "GetWeatherArgs"),
        ("call_h1DWI1POMJLb0KwIyQHWXD4p", "get_stock_price"),
    ]
    results = [
        {"type": "function_call_output", "call_id": c.call_id, "output": f"result {i}"}
        for i, c in enumerate(calls)
    ]
    history: Any = [{"role": "user", "content": "Weather?"}, *first.output, *results]
    second = client.responses.create(model="gpt-4o", input=history, tools=tools)
    assert second.output_text == TEXT
    sent = upstream.requests[1].json()
    assert sent["tools"] == [
        {
            "type": "function",
            "function": {k: SHELL_TOOL[k] for k in ("name", "description", "parameters")},
        }
    ]
    assistant, *answers = sent["messages"][1:]
    assert [c["id"] for c in assistant["tool_calls"]] == [c.call_id for c in calls]
    assert [json.loads(c["function"]["arguments"]) for c in assistant["tool_calls"]] == [
        json.loads(c.arguments) for c in calls
    ]
    assert answers == [
        {"role": "tool", "tool_call_id": c.call_id, "content": f"result {i}"}
        for i, c in enumerate(calls)
    ]


def test_a_streamed_answer_comes_as_responses_events(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(events=[data for _, data in sse_events("openai-chat-text.txt")]))
    events = list(oa(openai_proxy).responses.create(model="gpt-4o", input="Hi", stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text and events[-1].type == "response.completed"
    assert events[-1].response.output_text == text


def test_an_unrecoverable_overflow_is_openais_400_naming_input(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    long_input: Any = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"m {i} " + "x" * 200}
        for i in range(31)
    ]
    for stream in (False, True):  # a stream that cannot begin is an error status too
        upstream.queue.clear()
        upstream.add(*[replayed_error(record("pe-056"))] * 5)
        with pytest.raises(openai.BadRequestError) as caught:
            oa(openai_proxy).responses.create(model="gpt-4o", input=long_input, stream=stream)
        assert caught.value.code == "context_length_exceeded"
        assert caught.value.param == "input"


def test_a_failure_after_the_stream_began_is_an_error_then_response_failed(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    # The recorded answer stops at max_tokens (the upstream's: the client set none, so the
    # proxy escalates); the continuation call fails with a 500.
    failing = Scripted(status=500, body={"error": {"message": "boom", "type": "server_error"}})
    upstream.add(
        Scripted(events=[data for _, data in sse_events("openai-chat-length.txt")]), failing
    )
    stream = oa(openai_proxy).responses.create(model="gpt-4o", input="Hi", stream=True)
    seen: list[str] = []
    with pytest.raises(openai.APIError, match="boom"):
        seen.extend(e.type for e in stream)
    assert "response.output_text.delta" in seen and "response.completed" not in seen
    upstream.add(
        Scripted(events=[data for _, data in sse_events("openai-chat-length.txt")]), failing
    )
    body = {"model": "gpt-4o", "input": "Hi", "stream": True}
    raw = httpx.post(openai_proxy + "/v1/responses", json=body).text
    assert raw.rstrip().endswith("}") and "event: response.failed" in raw  # what Codex reads


def test_what_a_chat_upstream_cannot_take_is_a_400_not_a_silent_drop(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    client = oa(openai_proxy)
    with pytest.raises(openai.BadRequestError, match="previous_response_id"):
        client.responses.create(model="gpt-4o", input="Hi", previous_response_id="resp_1")
    with pytest.raises(openai.BadRequestError, match="'custom'"):
        client.responses.create(model="gpt-4o", input="Hi", tools=[APPLY_PATCH])
    assert upstream.requests == []  # nothing was sent on


def test_codexs_first_request_reaches_a_chat_upstream_with_function_tools_only(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(events=[data for _, data in sse_events("openai-chat-text.txt")]))
    with httpx.stream("POST", openai_proxy + "/v1/responses", json=CODEX_FIRST) as raw:
        text = raw.read().decode()
    assert raw.status_code == 200 and "event: response.completed" in text
    assert "tools[8] (web_search)" in raw.headers["x-chatcli-dropped"].split(",")
    tools = upstream.requests[0].json()["tools"]
    assert {t["type"] for t in tools} == {"function"}  # the namespace's functions, flat
    assert "multi_agent_v1__spawn_agent" in {t["function"]["name"] for t in tools}
    assert len(tools) == len(DIALECT.parse(CODEX_FIRST).tools)  # web_search left out


@pytest.mark.parametrize(
    "tools",
    [
        [  # a top-level function with the flat name of a namespace's function
            {"type": "function", "name": "ns__x"},
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "x"}]},
        ],
        [  # two namespaces whose seams trim to one flat name
            {"type": "namespace", "name": "ns", "tools": [{"type": "function", "name": "x"}]},
            {"type": "namespace", "name": "ns_", "tools": [{"type": "function", "name": "_x"}]},
        ],
        [{"type": "function", "name": "f"}, {"type": "function", "name": "f"}],
    ],
    ids=["top-level and namespaced", "two namespaces", "one name twice"],
)
def test_tools_that_would_share_a_flat_name_are_refused(tools: list[Any]) -> None:
    with pytest.raises(RequestError, match=r"both '(ns__x|f)'") as caught:
        DIALECT.parse({"model": "m", "input": "hi", "tools": tools})
    assert caught.value.failure.status == 400 and caught.value.failure.param == "tools"
    distinct = [tools[0], {**tools[1], "name": "other"}]
    assert len(DIALECT.parse({"model": "m", "input": "hi", "tools": distinct}).tools) == 2

"""`chatcli.wrap` with the real openai and anthropic SDKs against the replay server (recorded
answers and recorded provider errors): what reaches the wire, what the caller gets back."""

from __future__ import annotations

import asyncio
import copy
import json
from collections.abc import Iterator
from typing import Any

import anthropic
import openai
import pytest

import chatcli
from chatcli import ContextRecoveryError, Event, LevelApplied, OverflowDetected
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_anthropic_adapter import DOCS_TOOL_USE_RESPONSE
from tests.test_openai_adapter import CHAT_TEXT, RESPONSES_TEXT

JSON = {"content-type": "application/json"}


_OPENED: list[Any] = []


@pytest.fixture
def server() -> Iterator[ReplayServer]:
    with replay_server() as running:
        yield running
        while _OPENED:
            _OPENED.pop().close()


def openai_client(server: ReplayServer) -> openai.OpenAI:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="sk-test", max_retries=0)
    _OPENED.append(client)
    return client


def anthropic_client(server: ReplayServer) -> anthropic.Anthropic:
    client = anthropic.Anthropic(base_url=server.url, api_key="sk-test", max_retries=0)
    _OPENED.append(client)
    return client


def history() -> list[dict[str, Any]]:
    """A conversation with a tool round trip (OpenAI's wire shapes)."""
    call = {"id": "call_1", "type": "function", "function": {"name": "ls", "arguments": "{}"}}
    return [
        {"role": "system", "content": "Be brief."},
        {"role": "user", "content": "What is here?"},
        {"role": "assistant", "content": None, "tool_calls": [call]},
        {"role": "tool", "tool_call_id": "call_1", "content": "a.txt b.txt"},
        {"role": "user", "content": [{"type": "text", "text": "And the first file?"}]},
    ]


def anthropic_history() -> list[dict[str, Any]]:
    use = {"type": "tool_use", "id": "toolu_1", "name": "ls", "input": {}}
    result = {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt b.txt"}
    return [
        {"role": "user", "content": "What is here?"},
        {"role": "assistant", "content": [use]},
        {"role": "user", "content": [result, {"type": "text", "text": "And the first one?"}]},
    ]


OPENAI_TOOLS = [{"type": "function", "function": {"name": "ls", "parameters": {"type": "object"}}}]
# Arguments chatcli does not read: they must reach the wire untouched.
OPENAI_EXTRAS: dict[str, Any] = {
    "temperature": 0.3,
    "metadata": {"run": "7"},
    "user": "u-1",
    "extra_headers": {"x-trace": "abc"},
    "extra_body": {"vendor_flag": True},
}
ANTHROPIC_EXTRAS: dict[str, Any] = {
    "system": [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}],
    "metadata": {"user_id": "u-1"},
    "extra_body": {"top_k": 5, "temperature": 0.2},
    "extra_headers": {"x-trace": "abc"},
}


def size(messages: Any) -> int:
    return len(json.dumps(messages))


def sse(name: str) -> Scripted:
    return Scripted(
        events=[data if event is None else (event, data) for event, data in sse_events(name)]
    )


# -- the diff test: nothing to recover, the same bytes on the wire ---------------------------


def _openai_call(client: Any, stream: bool) -> Any:
    answer = client.chat.completions.create(
        model="gpt-4o",
        messages=history(),
        tools=OPENAI_TOOLS,
        max_tokens=64,
        stream=stream,
        **OPENAI_EXTRAS,
    )
    return list(answer) if stream else answer


def responses_input() -> list[dict[str, Any]]:
    """A Responses API conversation with a function call round trip."""
    said = [{"type": "output_text", "text": "Let me look.", "annotations": []}]
    return [
        {"role": "user", "content": "What is here?"},
        {"type": "message", "role": "assistant", "content": said},
        {"type": "function_call", "call_id": "call_1", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_1", "output": "a.txt b.txt"},
        {"role": "user", "content": [{"type": "input_text", "text": "And the first file?"}]},
    ]


RESPONSES_TOOLS = [{"type": "function", "name": "ls", "parameters": {"type": "object"}}]


def _responses_call(client: Any, stream: bool) -> Any:
    answer = client.responses.create(
        model="gpt-4o",
        input=responses_input(),
        instructions="Be brief.",
        tools=RESPONSES_TOOLS,
        max_output_tokens=64,
        stream=stream,
        store=False,
        **OPENAI_EXTRAS,
    )
    return list(answer) if stream else answer


def _responses_text_call(client: Any, stream: bool) -> Any:
    answer = client.responses.create(
        model="gpt-4o", input="Hello", stream=stream, extra_headers={"x-trace": "abc"}
    )
    return list(answer) if stream else answer


def _anthropic_call(client: Any, stream: bool) -> Any:
    answer = client.messages.create(
        model="claude-sonnet-4-5",
        messages=anthropic_history(),
        max_tokens=64,
        stream=stream,
        **ANTHROPIC_EXTRAS,
    )
    return list(answer) if stream else answer


@pytest.mark.parametrize(
    ("make", "call", "whole", "streamed"),
    [
        (openai_client, _openai_call, CHAT_TEXT, "openai-chat-text.txt"),
        (anthropic_client, _anthropic_call, DOCS_TOOL_USE_RESPONSE, "anthropic-text.txt"),
        (openai_client, _responses_call, RESPONSES_TEXT, "openai-responses-text.txt"),
        (openai_client, _responses_text_call, RESPONSES_TEXT, "openai-responses-text.txt"),
    ],
)
@pytest.mark.parametrize("stream", [False, True])
def test_a_request_needing_no_recovery_is_sent_byte_for_byte_as_the_bare_sdk_sends_it(
    server: ReplayServer, make: Any, call: Any, whole: Any, streamed: str, stream: bool
) -> None:
    answer = sse(streamed) if stream else Scripted(body=whole, headers=JSON)
    server.add(answer, answer)
    bare = call(make(server), stream)
    wrapped = call(chatcli.wrap(make(server)), stream)
    sent_bare, sent_wrapped = server.requests
    assert sent_wrapped.path == sent_bare.path
    assert sent_wrapped.body == sent_bare.body  # the same bytes
    assert sent_wrapped.headers["x-trace"] == "abc"
    assert type(wrapped) is type(bare)
    if stream:
        assert [e.model_dump() for e in wrapped] == [e.model_dump() for e in bare]
    else:
        assert wrapped.model_dump() == bare.model_dump()  # the SDK's own object


async def test_the_async_clients_send_the_bare_sdks_bytes_too(server: ReplayServer) -> None:
    for _ in range(2):
        server.add(Scripted(body=CHAT_TEXT, headers=JSON), sse("openai-chat-text.txt"))
    for wrapping in (False, True):
        raw = openai.AsyncOpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
        async with chatcli.wrap(raw) if wrapping else raw as client:
            whole = await client.chat.completions.create(
                model="m", messages=history(), **OPENAI_EXTRAS
            )
            assert whole.choices[0].message.content == CHAT_TEXT["choices"][0]["message"]["content"]
            stream = await client.chat.completions.create(
                model="m", messages=history(), stream=True
            )
            assert [c.id async for c in stream]
    bodies = [r.body for r in server.requests]
    assert bodies[:2] == bodies[2:]


# -- recovery (a model the catalog does not know: no window until learned or declared) ---

OPENAI_OVERFLOW = next(r for r in provider_errors("llama.cpp-server") if r["id"] == "pe-043")
ANTHROPIC_OVERFLOW = next(r for r in provider_errors("anthropic") if r["id"] == "pe-062")


def long_history(turns: int = 30) -> list[dict[str, Any]]:
    out = [{"role": "system", "content": "Be brief."}]
    for i in range(turns):
        out.append({"role": "user" if i % 2 == 0 else "assistant", "content": f"{i} " + "w " * 400})
    out.append({"role": "user", "content": "Sum it up."})
    return out


def test_an_overflow_is_recovered_and_answered_as_a_chat_completion(server: ReplayServer) -> None:
    server.add(replayed_error(OPENAI_OVERFLOW), Scripted(body=CHAT_TEXT, headers=JSON))
    events: list[Event] = []
    client = chatcli.wrap(openai_client(server), on_event=events.append)
    messages = long_history()
    kept = copy.deepcopy(messages)
    answer = client.chat.completions.create(
        model="local-model", messages=messages, max_tokens=64, metadata={"run": "7"}
    )
    assert isinstance(answer, openai.types.chat.ChatCompletion)
    assert answer.choices[0].message.content == CHAT_TEXT["choices"][0]["message"]["content"]
    assert messages == kept  # the caller's list and dicts are untouched
    first, second = (r.json() for r in server.requests)
    assert first["messages"] == kept
    assert size(second["messages"]) < size(kept)
    assert second["messages"][0] == kept[0] and second["messages"][-1] == kept[-1]
    assert second["metadata"] == {"run": "7"} and second["max_tokens"] == 64
    assert any(isinstance(e, OverflowDetected) for e in events)
    assert any(isinstance(e, LevelApplied) for e in events)


def test_an_anthropic_overflow_is_recovered_as_a_message_with_tool_pairs_whole(
    server: ReplayServer,
) -> None:
    server.add(
        replayed_error(ANTHROPIC_OVERFLOW), Scripted(body=DOCS_TOOL_USE_RESPONSE, headers=JSON)
    )
    turns = [*[{"role": r, "content": "x " * 300} for r in ("user", "assistant")] * 8]
    messages = [*turns, *anthropic_history()]
    kept = copy.deepcopy(messages)
    client = chatcli.wrap(anthropic_client(server))
    answer = client.messages.create(model="local-model", max_tokens=64, messages=messages)
    assert isinstance(answer, anthropic.types.Message)
    assert answer.stop_reason == DOCS_TOOL_USE_RESPONSE["stop_reason"]
    assert messages == kept
    sent = server.requests[1].json()["messages"]
    assert size(sent) < size(kept)
    assert sent[-2:] == kept[-2:]  # the tool call and its result, kept together


def test_a_cut_answer_is_continued_into_one_response(server: ReplayServer) -> None:
    cut = copy.deepcopy(CHAT_TEXT)
    cut["choices"][0]["message"]["content"] = "The weather in San Francisco"
    cut["choices"][0]["finish_reason"] = "length"
    rest = copy.deepcopy(CHAT_TEXT)
    rest["choices"][0]["message"]["content"] = " is sunny today."
    server.add(Scripted(body=cut, headers=JSON), Scripted(body=rest, headers=JSON))
    client = chatcli.wrap(openai_client(server))
    answer = client.chat.completions.create(model="local-model", messages=history(), max_tokens=8)
    assert answer.choices[0].message.content == "The weather in San Francisco is sunny today."
    assert answer.choices[0].finish_reason == "stop"
    continued = server.requests[1].json()
    assert continued["max_tokens"] == 16  # escalated
    assert continued["messages"][-2] == {
        "role": "assistant",
        "content": "The weather in San Francisco",
    }
    assert continued["messages"][-1]["content"] == chatcli.CONTINUATION_MESSAGE


def test_a_cut_stream_goes_on_in_the_same_stream(server: ReplayServer) -> None:
    server.add(sse("openai-chat-length.txt"), sse("openai-chat-text.txt"))
    client = chatcli.wrap(openai_client(server))
    chunks = list(
        client.chat.completions.create(
            model="local-model", messages=history(), max_tokens=1, stream=True
        )
    )
    assert all(isinstance(c, openai.types.chat.ChatCompletionChunk) for c in chunks)
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["stop"]  # one answer: the cut one's ending was held back
    assert len({c.id for c in chunks}) == 1
    assert len(server.requests) == 2


def test_an_anthropic_overflow_before_a_stream_streams_the_recovered_answer(
    server: ReplayServer,
) -> None:
    server.add(replayed_error(ANTHROPIC_OVERFLOW), sse("anthropic-text.txt"))
    client = chatcli.wrap(anthropic_client(server))
    messages = [*[{"role": r, "content": "x " * 300} for r in ("user", "assistant")] * 8]
    messages.append({"role": "user", "content": "Hello"})
    stream = client.messages.create(
        model="local-model", max_tokens=64, messages=messages, stream=True
    )
    events = list(stream)
    kinds = [e.type for e in events]
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    text = "".join(e.delta.text for e in events if e.type == "content_block_delta")
    assert text


def test_an_overflow_nothing_can_fix_raises_context_recovery_error(server: ReplayServer) -> None:
    for _ in range(5):
        server.add(replayed_error(OPENAI_OVERFLOW))
    client = chatcli.wrap(openai_client(server), context_window=100)
    with pytest.raises(ContextRecoveryError) as raised:
        client.chat.completions.create(
            model="m",
            messages=[
                {"role": "system", "content": "s " * 2000},
                {"role": "user", "content": "hi"},
            ],
        )
    assert raised.value.attempts


def test_other_errors_are_the_sdks_own(server: ReplayServer) -> None:
    body = {
        "error": {
            "message": "Incorrect API key provided",
            "type": "invalid_request_error",
            "code": "invalid_api_key",
        }
    }
    server.add(Scripted(status=401, body=body, headers=JSON))
    with pytest.raises(openai.AuthenticationError):
        chatcli.wrap(openai_client(server)).chat.completions.create(model="m", messages=history())
    assert len(server.requests) == 1  # no retry by chatcli: the SDK retries on its own


def test_a_declared_window_recovers_before_the_call(server: ReplayServer) -> None:
    server.add(Scripted(body=CHAT_TEXT, headers=JSON))
    events: list[Event] = []
    client = chatcli.wrap(openai_client(server), context_window=2_000, on_event=events.append)
    client.chat.completions.create(model="m", messages=long_history(), max_tokens=64)
    assert len(server.requests) == 1  # no rejected call
    assert size(server.requests[0].json()["messages"]) < size(long_history())
    assert any(type(e).__name__ == "PreflightRecovery" for e in events)


async def test_the_async_wrapper_recovers_too(server: ReplayServer) -> None:
    server.add(
        replayed_error(ANTHROPIC_OVERFLOW), Scripted(body=DOCS_TOOL_USE_RESPONSE, headers=JSON)
    )
    server.add(replayed_error(ANTHROPIC_OVERFLOW), sse("anthropic-text.txt"))
    raw = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
    async with chatcli.wrap(raw) as client:
        await _recover_async(client, server)


async def _recover_async(client: Any, server: ReplayServer) -> None:
    messages = [*[{"role": r, "content": "x " * 300} for r in ("user", "assistant")] * 8]
    messages.append({"role": "user", "content": "Hello"})
    whole = await client.messages.create(model="local-model", max_tokens=64, messages=messages)
    assert isinstance(whole, anthropic.types.Message)
    stream = await client.messages.create(
        model="local-model", max_tokens=64, messages=messages, stream=True
    )
    async with stream:
        kinds = [e.type async for e in stream]
    assert kinds[-1] == "message_stop"
    assert [len(r.json()["messages"]) for r in server.requests][1::2] == [
        len(r.json()["messages"]) for r in server.requests
    ][1::2]
    assert size(server.requests[1].json()["messages"]) < size(messages)


# -- the wrapper itself -----------------------------------------------------------------------


def test_everything_else_is_the_clients_own(server: ReplayServer) -> None:
    client = openai_client(server)
    wrapped = chatcli.wrap(client)
    assert wrapped.models is client.models
    assert wrapped.chat.completions.with_raw_response is not None
    assert wrapped.base_url == client.base_url
    copied = wrapped.with_options(timeout=5)
    assert copied.unwrapped is not client and copied.unwrapped.timeout == 5
    assert copied.chat.completions.create is not client.chat.completions.create
    assert copied.learned_windows is wrapped.learned_windows  # one memory of windows


def test_wrap_refuses_what_it_cannot_wrap(server: ReplayServer) -> None:
    with pytest.raises(TypeError, match=r"openai\.OpenAI"):
        chatcli.wrap(object())
    with pytest.raises(chatcli.ConfigError, match="context_window"):
        chatcli.wrap(openai_client(server), context_window=0)


def test_a_request_chatcli_cannot_read_goes_to_the_sdk_as_it_is(server: ReplayServer) -> None:
    server.add(Scripted(body=CHAT_TEXT, headers=JSON))
    client = chatcli.wrap(openai_client(server))
    weird = [{"role": "function", "name": "f", "content": "x"}, {"role": "user", "content": "hi"}]
    client.chat.completions.create(model="m", messages=weird)
    assert server.requests[0].json()["messages"] == weird


def test_sdk_not_given_sentinels_are_left_out(server: ReplayServer) -> None:
    server.add(Scripted(body=CHAT_TEXT, headers=JSON), Scripted(body=CHAT_TEXT, headers=JSON))
    bare = openai_client(server)
    bare.chat.completions.create(model="m", messages=history(), temperature=openai.NOT_GIVEN)
    chatcli.wrap(bare).chat.completions.create(
        model="m", messages=history(), temperature=openai.omit
    )
    assert server.requests[0].body == server.requests[1].body
    assert "temperature" not in json.loads(server.requests[1].body)


def test_asyncio_is_not_needed_for_sync_clients(server: ReplayServer) -> None:
    assert not asyncio.iscoroutinefunction(
        chatcli.wrap(openai_client(server)).chat.completions.create
    )


# -- the Responses API -----------------------------------------------------------------------


def test_a_responses_overflow_is_recovered_with_function_call_pairs_whole(
    server: ReplayServer,
) -> None:
    server.add(replayed_error(OPENAI_OVERFLOW), Scripted(body=RESPONSES_TEXT, headers=JSON))
    events: list[Event] = []
    client = chatcli.wrap(openai_client(server), on_event=events.append)
    said = [{"type": "output_text", "text": "w " * 300, "annotations": []}]
    turns = [
        {"role": "user", "content": "w " * 300},
        {"type": "message", "role": "assistant", "content": said},
    ]
    items = [*turns * 12, *responses_input()]
    kept = copy.deepcopy(items)
    answer = client.responses.create(
        model="local-model", input=items, instructions="Be brief.", max_output_tokens=64
    )
    assert isinstance(answer, openai.types.responses.Response)
    assert answer.output_text == RESPONSES_TEXT["output"][0]["content"][0]["text"]
    assert items == kept
    first, second = (r.json() for r in server.requests)
    assert first["input"] == kept
    assert second["instructions"] == "Be brief."  # sent as given, never cut
    assert size(second["input"]) < size(kept)
    assert second["input"][-4:] == kept[-4:]  # the assistant turn, its call and its output
    assert any(isinstance(e, LevelApplied) for e in events)


def test_an_incomplete_response_is_continued(server: ReplayServer) -> None:
    cut = copy.deepcopy(RESPONSES_TEXT)
    cut["status"] = "incomplete"
    cut["incomplete_details"] = {"reason": "max_output_tokens"}
    cut["output"][0]["content"][0]["text"] = "The first part"
    rest = copy.deepcopy(RESPONSES_TEXT)
    rest["output"][0]["content"][0]["text"] = " and the rest."
    server.add(Scripted(body=cut, headers=JSON), Scripted(body=rest, headers=JSON))
    client = chatcli.wrap(openai_client(server))
    answer = client.responses.create(model="gpt-4o", input="Hello", max_output_tokens=8)
    assert answer.output_text == "The first part and the rest."
    assert answer.status == "completed"
    continued = server.requests[1].json()
    assert continued["max_output_tokens"] == 16
    assert continued["input"][0] == {"role": "user", "content": "Hello"}
    assert continued["input"][-1]["content"] == chatcli.CONTINUATION_MESSAGE


def test_a_responses_overflow_before_a_stream_streams_the_recovered_answer(
    server: ReplayServer,
) -> None:
    server.add(replayed_error(OPENAI_OVERFLOW), sse("openai-responses-text.txt"))
    client = chatcli.wrap(openai_client(server))
    items = [{"role": "user", "content": f"{i} " + "w " * 400} for i in range(20)]
    events = list(client.responses.create(model="local-model", input=items, stream=True))
    kinds = [e.type for e in events]
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed"
    numbers = [e.sequence_number for e in events]
    assert numbers == sorted(set(numbers))  # in order, none repeated
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text == events[-1].response.output_text


# -- Anthropic's messages.stream(...) helper ---------------------------------------------------


def test_the_stream_helper_recovers_and_gives_the_final_message(server: ReplayServer) -> None:
    server.add(replayed_error(ANTHROPIC_OVERFLOW), sse("anthropic-text.txt"))
    client = chatcli.wrap(anthropic_client(server))
    messages = [*[{"role": r, "content": "x " * 300} for r in ("user", "assistant")] * 8]
    messages.append({"role": "user", "content": "Hello"})
    with client.messages.stream(model="local-model", max_tokens=64, messages=messages) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    assert text and final.content[0].type == "text" and final.content[0].text == text
    assert len(server.requests) == 2 and server.requests[1].json()["stream"] is True
    assert size(server.requests[1].json()["messages"]) < size(messages)


async def test_the_async_stream_helper_recovers(server: ReplayServer) -> None:
    server.add(replayed_error(ANTHROPIC_OVERFLOW), sse("anthropic-text.txt"))
    raw = anthropic.AsyncAnthropic(base_url=server.url, api_key="k", max_retries=0)
    messages = [*[{"role": r, "content": "x " * 300} for r in ("user", "assistant")] * 8]
    messages.append({"role": "user", "content": "Hello"})
    async with chatcli.wrap(raw) as client:
        manager = client.messages.stream(model="local-model", max_tokens=64, messages=messages)
        async with manager as stream:
            text = "".join([t async for t in stream.text_stream])
            final = await stream.get_final_message()
    assert text == final.content[0].text
    assert len(server.requests) == 2


def test_the_stream_helper_sends_the_bare_helpers_body(server: ReplayServer) -> None:
    server.add(sse("anthropic-text.txt"), sse("anthropic-text.txt"))
    for client in (anthropic_client(server), chatcli.wrap(anthropic_client(server))):
        with client.messages.stream(
            model="claude-sonnet-4-5", max_tokens=64, messages=anthropic_history()
        ) as stream:
            stream.get_final_message()
    bare, wrapped = server.requests
    assert wrapped.body == bare.body


# -- tool calls in a recovered stream: written from the final answer -----------------------------


def test_a_recovered_openai_stream_carries_the_answers_tool_calls(server: ReplayServer) -> None:
    server.add(replayed_error(OPENAI_OVERFLOW), sse("openai-chat-tool-calls.txt"))
    client = chatcli.wrap(openai_client(server))
    chunks = list(
        client.chat.completions.create(model="local-model", messages=long_history(), stream=True)
    )
    calls = [call for c in chunks if c.choices for call in c.choices[0].delta.tool_calls or ()]
    recorded = [
        json.loads(data) for _, data in sse_events("openai-chat-tool-calls.txt") if data != "[DONE]"
    ]
    names = [
        call["function"]["name"]
        for chunk in recorded
        for choice in chunk["choices"]
        for call in choice["delta"].get("tool_calls") or ()
        if call["function"].get("name")
    ]
    assert [call.function.name for call in calls] == names
    assert all(json.loads(call.function.arguments) for call in calls)  # whole, parseable
    finishes = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finishes == ["tool_calls"]


def test_a_recovered_anthropic_stream_carries_the_answers_tool_use(server: ReplayServer) -> None:
    server.add(replayed_error(ANTHROPIC_OVERFLOW), sse("anthropic-tool-use.txt"))
    raw = anthropic_client(server)
    messages = [*[{"role": r, "content": "x " * 300} for r in ("user", "assistant")] * 8]
    messages.append({"role": "user", "content": "Weather?"})
    with chatcli.wrap(raw).messages.stream(
        model="local-model", max_tokens=64, messages=messages
    ) as stream:
        final = stream.get_final_message()
    uses = [block for block in final.content if block.type == "tool_use"]
    assert len(uses) == 1 and uses[0].input  # the SDK's helper rebuilt it from the events
    assert final.stop_reason == "tool_use"
    assert [block.type for block in final.content] == ["text", "tool_use"]

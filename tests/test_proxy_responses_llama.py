"""The Responses endpoint for real: the official `openai` SDK's `client.responses.create`
(whole and streamed) pointed at the proxy, in front of the real C++ llama-server running the
tiny random model with a 1,024-token window (tests/test_proxy_llama.py's proxy, an
OpenAI-compatible upstream: every request is converted to Chat Completions and back)."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from typing import Any

import openai
import pytest

from chatcli.chat.tinymodel import TRAINING_TEXT
from chatcli.messages import Message
from chatcli.providers.base import Request
from tests import test_proxy_llama as base
from tests.proxy_harness import running_proxy
from tests.test_proxy_llama import N_CTX, counter, llama_upstream, long_chat, recoveries

# The proxy of tests/test_proxy_llama.py, in front of tests/servers.py's `llama_1024`.
proxy = base.proxy

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

LS_TOOL: Any = {
    "type": "function",
    "name": "ls",
    "description": "Lists the files of a directory.",
    "parameters": {"type": "object", "properties": {"path": {"type": "string"}}},
}


@pytest.fixture
def oa(proxy: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0, timeout=120) as c:
        yield c


def tool_history() -> list[Any]:
    """About 3,000 tokens of the model's training text as Responses items, then a tool round
    trip (`function_call` / `function_call_output`) and the latest question."""
    items: list[Any] = list(long_chat())[:-1]
    items += [
        {"type": "function_call", "call_id": "call_7", "name": "ls", "arguments": "{}"},
        {"type": "function_call_output", "call_id": "call_7", "output": "notes.txt"},
        {"role": "user", "content": "What is in notes.txt?"},
    ]
    return items


def test_an_overflowing_conversation_is_answered(proxy: str, oa: openai.OpenAI) -> None:
    before = recoveries(proxy)
    items: Any = long_chat()
    response = oa.responses.create(model="any", instructions="Answer briefly.", input=items)
    assert response.output_text and response.status in ("completed", "incomplete")
    assert response.usage is not None and 0 < response.usage.input_tokens < N_CTX * 3
    assert recoveries(proxy) > before  # it did not fit: a level was applied


def test_an_overflowing_conversation_streams(proxy: str, oa: openai.OpenAI) -> None:
    before = recoveries(proxy)
    items: Any = long_chat()
    events = list(oa.responses.create(model="any", input=items, stream=True))
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert text and events[-1].response.output_text == text  # type: ignore[union-attr]
    assert recoveries(proxy) > before


def test_an_escalated_continuation_arrives_as_one_stream(proxy: str, oa: openai.OpenAI) -> None:
    escalations = counter(proxy, "chatcli_proxy_escalations_total")
    stream = oa.responses.create(
        model="any", input="Tell me a long story.", max_output_tokens=4, stream=True
    )
    events = list(stream)
    types = [e.type for e in events]
    text = "".join(e.delta for e in events if e.type == "response.output_text.delta")
    assert types.count("response.created") == 1 and types.count("response.output_item.added") == 1
    assert counter(proxy, "chatcli_proxy_escalations_total") == escalations + 2
    final = events[-1]
    assert final.type == "response.incomplete"  # escalations used up: the partial answer
    assert final.response.output_text == text and len(text.split()) > 4
    assert [e.sequence_number for e in events] == list(range(len(events)))


def test_an_unrecoverable_conversation_is_openais_overflow_error(oa: openai.OpenAI) -> None:
    instructions = " ".join([TRAINING_TEXT] * 20)  # a system prompt is always kept
    for stream in (False, True):  # a stream that cannot begin is an error status, too
        with pytest.raises(openai.BadRequestError) as caught:
            oa.responses.create(model="any", instructions=instructions, input="hi", stream=stream)
        assert caught.value.code == "context_length_exceeded"
        assert caught.value.param == "input"


class Recording:
    """The upstream's provider, keeping the view of each call (what llama-server was sent)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.views: list[tuple[Message, ...]] = []

    def __getattr__(self, name: str) -> Any:
        return getattr(self.inner, name)

    def complete(self, request: Request) -> Any:
        raise AssertionError("the proxy calls the async API")

    async def acomplete(self, request: Request) -> Any:
        self.views.append(request.messages)
        return await self.inner.acomplete(request)


def test_a_tool_round_trip_is_answered_with_its_pair_whole(llama_1024: str) -> None:
    up = llama_upstream(llama_1024)
    recording = Recording(up.provider)
    with (
        running_proxy(replace(up, provider=recording)) as url,
        openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=120) as client,
    ):
        response = client.responses.create(model="any", input=tool_history(), tools=[LS_TOOL])
    assert response.output and response.status in ("completed", "incomplete")
    # Every call (the recovered request, then continuations of a cut answer) was sent less
    # than the history, with the pair whole, right before the question.
    assert recording.views and all(len(v) < len(tool_history()) for v in recording.views)
    for view in recording.views:
        at = next(i for i, m in enumerate(view) if m.tool_calls)
        call, result, question = view[at : at + 3]
        assert [c.id for c in call.tool_calls] == ["call_7"]
        assert result.tool_result is not None and result.tool_result.call_id == "call_7"
        assert question.text == "What is in notes.txt?"

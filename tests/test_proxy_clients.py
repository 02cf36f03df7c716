"""Real third-party clients in front of the proxy: LangChain's `ChatOpenAI` and
`ChatAnthropic` (langchain-openai, langchain-anthropic: the `clients` extra), and the official
Anthropic SDK for the escalated stream tests/test_proxy_llama.py does not cover, pointed at
`chatcli proxy`'s app in front of the real llama-server with the tiny model and a
1,024-token window. The clients keep their own retry settings (LangChain's default: two
retries), so a test also sees that an unrecoverable request is not sent again and again."""

from __future__ import annotations

from typing import Any

import anthropic
import httpx
import openai
import pytest

from chatcli.chat.tinymodel import TRAINING_TEXT
from tests import test_proxy_llama as base
from tests.test_proxy_llama import MAX_TOKENS, counter, long_chat, recoveries

# The proxy of tests/test_proxy_llama.py, in front of tests/servers.py's `llama_1024`.
proxy = base.proxy

langchain_openai = pytest.importorskip("langchain_openai", reason="pip install -e '.[clients]'")
langchain_anthropic = pytest.importorskip(
    "langchain_anthropic", reason="pip install -e '.[clients]'"
)
from langchain_core.messages import AIMessageChunk  # noqa: E402  (after the skips)

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

UNFIT_SYSTEM = " ".join([TRAINING_TEXT] * 20)  # system prompts are always kept: no level helps


def chat_openai(proxy: str, **kwargs: Any) -> Any:
    return langchain_openai.ChatOpenAI(
        base_url=proxy + "/v1", api_key="k", model="any", timeout=120, **kwargs
    )


def chat_anthropic(proxy: str, **kwargs: Any) -> Any:
    return langchain_anthropic.ChatAnthropic(
        base_url=proxy, api_key="k", model="any", timeout=120, **kwargs
    )


def requests_to(proxy: str, endpoint: str) -> float:
    """The requests the proxy answered on `endpoint`, whatever their status."""
    prefix = f'chatcli_proxy_requests_total{{endpoint="{endpoint}",'
    lines = httpx.get(proxy + "/metrics").text.splitlines()
    return sum(float(line.rsplit(" ", 1)[1]) for line in lines if line.startswith(prefix))


def streamed(chunks: Any) -> tuple[AIMessageChunk, int]:
    """The chunks of a LangChain stream added up (as LangChain does), and how many had text."""
    total: AIMessageChunk | None = None
    texts = 0
    for chunk in chunks:
        texts += bool(chunk.text)
        total = chunk if total is None else total + chunk
    assert total is not None
    return total, texts


@pytest.mark.parametrize("make", [chat_openai, chat_anthropic], ids=["ChatOpenAI", "ChatAnthropic"])
def test_langchain_gets_an_overflowing_conversation_answered(proxy: str, make: Any) -> None:
    before = recoveries(proxy)
    messages = long_chat(conversation=f"{make.__name__} invoke")
    reply = make(proxy, max_tokens=MAX_TOKENS).invoke(messages)
    assert reply.text and reply.usage_metadata["output_tokens"] > 0
    assert recoveries(proxy) > before  # it did not fit: a level was applied


@pytest.mark.parametrize("make", [chat_openai, chat_anthropic], ids=["ChatOpenAI", "ChatAnthropic"])
def test_langchain_streams_an_overflowing_conversation(proxy: str, make: Any) -> None:
    before = recoveries(proxy)
    messages = long_chat(conversation=f"{make.__name__} stream")
    total, texts = streamed(make(proxy, max_tokens=MAX_TOKENS).stream(messages))
    assert texts > 1 and total.text  # token by token, not one block at the end
    assert recoveries(proxy) > before


def test_langchain_openai_gets_an_escalated_answer_as_one_stream(proxy: str) -> None:
    escalations = counter(proxy, "chatcli_proxy_escalations_total")
    model = chat_openai(proxy, max_tokens=4, stream_usage=True)
    total, texts = streamed(model.stream("Tell me a long story."))
    assert counter(proxy, "chatcli_proxy_escalations_total") == escalations + 2
    assert total.response_metadata["finish_reason"] == "length"  # one finish: one answer
    assert total.usage_metadata is not None and total.usage_metadata["output_tokens"] > 4
    # Live: about a delta per token, the continuations' too (held back, they came as one).
    assert texts > total.usage_metadata["output_tokens"] // 2


def test_langchain_anthropic_gets_an_escalated_answer_as_one_stream(proxy: str) -> None:
    escalations = counter(proxy, "chatcli_proxy_escalations_total")
    total, texts = streamed(chat_anthropic(proxy, max_tokens=4).stream("Tell me a long story."))
    assert counter(proxy, "chatcli_proxy_escalations_total") == escalations + 2
    assert total.response_metadata["stop_reason"] == "max_tokens"
    assert total.usage_metadata is not None and total.usage_metadata["output_tokens"] > 4
    assert texts > total.usage_metadata["output_tokens"] // 2  # live, as above


def test_the_anthropic_sdk_gets_an_escalated_answer_as_one_stream(proxy: str) -> None:
    escalations = counter(proxy, "chatcli_proxy_escalations_total")
    client = anthropic.Anthropic(base_url=proxy, api_key="k", max_retries=0, timeout=120)
    messages: Any = [{"role": "user", "content": "A long story."}]
    with client, client.messages.stream(model="any", max_tokens=4, messages=messages) as stream:
        deltas = [event.text for event in stream if event.type == "text"]
        final = stream.get_final_message()
    assert counter(proxy, "chatcli_proxy_escalations_total") == escalations + 2
    assert len(final.content) == 1 and final.content[0].type == "text"  # one block, one answer
    assert final.content[0].text == "".join(deltas)
    assert final.stop_reason == "max_tokens" and final.usage.output_tokens > 4
    assert len(deltas) > final.usage.output_tokens // 2  # the continuations came live too


def test_langchain_openai_gets_openais_overflow_error_once(proxy: str) -> None:
    sent = requests_to(proxy, "/v1/chat/completions")
    model = chat_openai(proxy, max_tokens=MAX_TOKENS)  # LangChain's default: 2 retries
    with pytest.raises(openai.BadRequestError) as caught:
        model.invoke([("system", UNFIT_SYSTEM), ("user", "hi")])
    assert caught.value.code == "context_length_exceeded"
    assert requests_to(proxy, "/v1/chat/completions") == sent + 1  # a 400: never retried


def test_langchain_anthropic_gets_anthropics_overflow_error_once(proxy: str) -> None:
    sent = requests_to(proxy, "/v1/messages")
    model = chat_anthropic(proxy, max_tokens=MAX_TOKENS)
    with pytest.raises(anthropic.BadRequestError) as caught:
        for _ in model.stream([("system", UNFIT_SYSTEM), ("user", "hi")]):
            pass
    body = caught.value.body
    assert isinstance(body, dict) and body["error"]["message"].startswith("prompt is too long")
    assert requests_to(proxy, "/v1/messages") == sent + 1

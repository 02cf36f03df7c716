"""Settings on a real server: llama.cpp's llama-server answers with temperature, seed and a JSON
schema through `OpenAICompatible` (the tiny random-weight model of tests/servers.py).

The model's words mean nothing, so what is asserted is what the settings do to sampling:
greedy decoding (temperature 0) ignores the seed; at a high temperature the same seed gives
the same answer and another seed another; a JSON schema constrains the answer to parse.
Each would fail if the setting never reached the server (its defaults: temperature 0.8, a
random seed per request, free text).
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from chatcli.messages import Message, StopReason
from chatcli.providers.base import Request, Response, TextDelta
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.request_settings import Settings
from tests.test_e2e_llama_server import connect

pytest_plugins = ("tests.servers",)

PROMPT = (Message.user("Tell me a story."),)
SCHEMA = {
    "type": "object",
    "properties": {"ok": {"type": "boolean"}, "mood": {"enum": ["calm", "busy"]}},
    "required": ["ok", "mood"],
    "additionalProperties": False,
}


@pytest.fixture
def adapter(llama_server: str) -> Iterator[OpenAICompatible]:
    with connect(llama_server) as provider:
        yield provider


def answer(adapter: OpenAICompatible, settings: Settings, max_tokens: int = 24) -> str:
    request = Request(messages=PROMPT, max_tokens=max_tokens, settings=settings)
    return adapter.complete(request).message.text


@pytest.mark.llama_server
def test_temperature_zero_is_greedy_whatever_the_seed(adapter: OpenAICompatible) -> None:
    texts = {answer(adapter, Settings(temperature=0.0, seed=seed)) for seed in (1, 2, 3)}
    assert len(texts) == 1 and texts != {""}


@pytest.mark.llama_server
def test_the_seed_decides_a_hot_sample(adapter: OpenAICompatible) -> None:
    hot = Settings(temperature=1.5, top_p=1.0)
    first, again = (answer(adapter, hot.merge(Settings(seed=11))) for _ in range(2))
    others = {answer(adapter, hot.merge(Settings(seed=seed))) for seed in (12, 13, 14)}
    assert first == again
    assert others - {first}  # at least one other seed samples another answer


@pytest.mark.llama_server
def test_a_json_schema_constrains_the_answer(adapter: OpenAICompatible) -> None:
    request = Request(
        messages=PROMPT, max_tokens=64, settings=Settings(temperature=1.0, response_format=SCHEMA)
    )
    chunks = list(adapter.stream(request))
    final = chunks[-1]
    assert isinstance(final, Response) and final.stop_reason is StopReason.END_TURN
    assert "".join(c.text for c in chunks if isinstance(c, TextDelta)) == final.message.text
    parsed = json.loads(final.message.text)
    assert set(parsed) == {"ok", "mood"}
    assert isinstance(parsed["ok"], bool) and parsed["mood"] in ("calm", "busy")

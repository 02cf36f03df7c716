"""Responses compaction through the proxy in front of the real llama-server (with the 2,048-token
window of tests/test_compaction_llama.py, an OpenAI-compatible upstream): the official `openai`
SDK's `responses.compact` and a `compaction_trigger` request each get exactly one valid
`compaction` item, the next request carrying it is answered, and a token sealed with another
proxy's key is refused with a 400.

The tiny random model cannot write a summary that passes chatcli's checks, so these
compactions keep the conversation whole (the item then stands for the turns as they were, and
the proxy's log says why); tests/test_proxy_compaction.py shows a summary expanded into what
the upstream is sent.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseCompactionItem

from chatcli.proxy.compaction import TOKEN_PREFIX, Sealed, Sealer, compaction_item
from chatcli.proxy.keys import DEFAULT_TTL_S, generated_key
from tests import test_compaction_llama as summaries
from tests.proxy_harness import running_proxy
from tests.test_proxy_llama import MAX_TOKENS, MODEL_NAME, llama_upstream, long_chat

# llama-server with a window a summary call fits in (tests/test_compaction_llama.py's).
summariser_server = summaries.summariser_server

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server


@pytest.fixture(scope="module")
def proxy(summariser_server: str) -> Iterator[str]:
    window = summaries.SUMMARISER_CTX
    upstream = llama_upstream(summariser_server, context_window=window, max_tokens=MAX_TOKENS)
    with running_proxy(upstream) as url:
        yield url


@pytest.fixture
def oa(proxy: str) -> Iterator[openai.OpenAI]:
    with openai.OpenAI(base_url=proxy + "/v1", api_key="k", max_retries=0, timeout=300) as c:
        yield c


def the_item(output: list[Any]) -> ResponseCompactionItem:
    items = [i for i in output if i.type == "compaction"]
    assert len(items) == 1  # what Codex requires ("exactly one compaction output item")
    item = items[0]
    assert isinstance(item, ResponseCompactionItem) and item.id
    assert item.encrypted_content.startswith(TOKEN_PREFIX)
    return item


def rejected(caplog: pytest.LogCaptureFixture) -> bool:
    """Whether the proxy asked the upstream for a summary and its checks refused it."""
    return any("the summary was rejected" in r.getMessage() for r in caplog.records)


def test_responses_compact_gives_one_item_and_the_next_request_is_answered(
    oa: openai.OpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chatcli.proxy")
    history: Any = long_chat(8, conversation="compact")
    compacted = oa.responses.compact(model=MODEL_NAME, input=history)
    assert compacted.object == "response.compaction"
    item = the_item(compacted.output)
    assert compacted.output[-1] is item
    assert rejected(caplog)  # a real summary call, whose random text was caught
    again: Any = [item.model_dump(), {"role": "user", "content": "And then?"}]
    answer = oa.responses.create(model=MODEL_NAME, input=again)
    assert answer.output_text and answer.status in ("completed", "incomplete")


def test_a_compaction_trigger_gives_one_item_and_the_next_request_is_answered(
    oa: openai.OpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="chatcli.proxy")
    history: Any = [*long_chat(8, conversation="trigger"), {"type": "compaction_trigger"}]
    response = oa.responses.create(model=MODEL_NAME, input=history)
    assert response.status == "completed"
    item = the_item(response.output)
    assert [i.type for i in response.output] == ["compaction"]
    assert rejected(caplog)
    again: Any = [*history[:-1], item.model_dump(), {"role": "user", "content": "And then?"}]
    events = list(oa.responses.create(model=MODEL_NAME, input=again, stream=True))
    assert events[-1].type in ("response.completed", "response.incomplete")
    assert events[-1].response.output_text  # type: ignore[union-attr]


def test_a_token_sealed_with_another_key_is_a_400(oa: openai.OpenAI) -> None:
    sealer = Sealer([generated_key()], ttl=DEFAULT_TTL_S)
    token = sealer.seal(Sealed(summary="Made by another proxy."))
    items: Any = [compaction_item(token), {"role": "user", "content": "Hi."}]
    with pytest.raises(openai.BadRequestError) as caught:
        oa.responses.create(model=MODEL_NAME, input=items)
    assert caught.value.status_code == 400
    assert "wrong key" in str(caught.value) and "another proxy" in str(caught.value)


def test_a_compaction_whose_summary_call_is_over_the_window_still_gives_its_item(
    oa: openai.OpenAI, caplog: pytest.LogCaptureFixture
) -> None:
    """The summary call of this conversation is over the server's window (the tiny model's
    tokens outnumber chatcli's estimate): the compaction is not an error the client is stuck
    with; its item keeps the conversation whole, and the next request is recovered."""
    caplog.set_level(logging.INFO, logger="chatcli.proxy")
    history: Any = [*long_chat(conversation="over"), {"type": "compaction_trigger"}]
    response = oa.responses.create(model=MODEL_NAME, input=history)
    item = the_item(response.output)
    assert any("left the conversation whole" in r.getMessage() for r in caplog.records)
    again: Any = [*history[:-1], item.model_dump(), {"role": "user", "content": "And then?"}]
    assert oa.responses.create(model=MODEL_NAME, input=again).output_text

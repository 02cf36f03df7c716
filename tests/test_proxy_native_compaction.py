"""Responses compaction passed to OpenAI through the proxy (`chatcli.proxy.compaction_routes`):
the proxy in front of the `openai` provider with a model that compacts on OpenAI's servers,
played by the replay server with OpenAI's bodies (tests/data/native-compaction.json, each
citing its documentation and SDK type). The replay server's request log shows what OpenAI
was sent: `/responses/compact`, `context_management` and a `compaction_trigger` request as the
client gave them, the client's compaction item unchanged; the answers carry OpenAI's item as it
came; the proxy's log says which path it took. A model without native compaction keeps
chatcli's own (the last test).
"""

from __future__ import annotations

import copy
import json
import logging
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from chatcli.compaction import SUMMARY_HEADER
from chatcli.proxy.app import ProxyOptions
from chatcli.proxy.compaction import TOKEN_PREFIX
from chatcli.proxy.sessions import SessionRecorder
from chatcli.store import SessionStore
from tests import test_proxy_wire as wire
from tests.native_streams import anthropic_events, openai_events
from tests.proxy_harness import running_proxy, upstream_at
from tests.recorded import DATA, replayed_error
from tests.replay import ReplayServer, Scripted
from tests.test_proxy_compaction import conversation, summary_body
from tests.test_proxy_wire import an, oa

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

upstream, _close_clients = wire.upstream, wire._close_clients
anthropic_proxy = wire.anthropic_proxy

BODIES = json.loads((DATA / "native-compaction.json").read_text())
ANSWER = BODIES["openai_response"]  # POST /responses with context_management
COMPACTED = BODIES["openai_compacted"]  # POST /responses/compact
ITEM = ANSWER["output"][0]  # the compaction item OpenAI made
MODEL = "gpt-5.1-codex"  # a model that compacts on OpenAI's servers
EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
PASSED = "passed to OpenAI's compaction"
MANAGEMENT = [{"type": "compaction", "compact_threshold": 150_000}]


@pytest.fixture
def native_proxy(upstream: ReplayServer) -> Iterator[str]:
    """The proxy in front of OpenAI (the replay server) with a model that compacts."""
    env = {"OPENAI_API_KEY": wire.UPSTREAM_KEY, "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai", upstream.url + "/v1", model=MODEL, environ=env)
    assert up.native is not None  # the library's check: this model compacts natively
    with running_proxy(up) as url:
        yield url


@pytest.fixture
def proxy_log(caplog: pytest.LogCaptureFixture) -> pytest.LogCaptureFixture:
    caplog.set_level(logging.INFO, logger="chatcli.proxy")
    return caplog


def with_openai_item() -> list[dict[str, Any]]:
    """A conversation that an earlier answer of OpenAI's compacted: the developer message,
    the turns before the item, OpenAI's item, then a new user turn."""
    return [*conversation()[:3], copy.deepcopy(ITEM), {"role": "user", "content": "Go on."}]


def test_compact_is_sent_to_openai_and_its_answer_returned_verbatim(
    upstream: ReplayServer, native_proxy: str, proxy_log: pytest.LogCaptureFixture
) -> None:
    upstream.add(Scripted(body=COMPACTED))
    given = with_openai_item()
    raw = oa(native_proxy).responses.with_raw_response.compact(model="gpt-4o", input=given)  # type: ignore[arg-type]
    assert json.loads(raw.text) == COMPACTED  # as OpenAI sent it
    assert raw.parse().output[-1].type == "compaction"
    sent = upstream.requests[-1]
    assert sent.path == "/v1/responses/compact"
    assert sent.headers["authorization"] == f"Bearer {wire.UPSTREAM_KEY}"  # the proxy's key
    assert sent.json() == {"model": MODEL, "input": given}  # the item and the turns unchanged
    assert any(PASSED in m and "/responses/compact" in m for m in proxy_log.messages)
    assert not any("compacted (" in m for m in proxy_log.messages)  # not chatcli's own


@pytest.mark.parametrize("stream", [False, True])
def test_context_management_is_sent_and_openai_item_comes_back(
    upstream: ReplayServer, native_proxy: str, proxy_log: pytest.LogCaptureFixture, stream: bool
) -> None:
    """A request with `context_management` and OpenAI's item from an earlier answer: OpenAI is
    sent both as the client gave them (the items before the item dropped, as OpenAI allows),
    and the answer begins with the new item OpenAI made."""
    upstream.add(Scripted(events=openai_events(ANSWER)) if stream else Scripted(body=ANSWER))
    asked: Any = {"model": MODEL, "input": with_openai_item()}
    extra = {"extra_body": {"context_management": MANAGEMENT}}
    if stream:
        events = list(oa(native_proxy).responses.create(**asked, **extra, stream=True))
        done = EVENTS.validate_python(events[-1].model_dump())
        assert done.type == "response.completed"
        output = [i.model_dump(exclude_none=True) for i in done.response.output]
    else:
        answer = oa(native_proxy).responses.create(**asked, **extra)
        output = [i.model_dump(exclude_none=True) for i in answer.output]
    sent = upstream.requests[-1]
    assert sent.path == "/v1/responses"
    body = sent.json()
    assert body["model"] == MODEL
    assert body["context_management"] == MANAGEMENT
    assert body["input"][0] == {"role": "system", "content": "Dev."}  # kept before the item
    assert body["input"][1] == ITEM  # unchanged
    assert body["input"][2:] == [{"role": "user", "content": "Go on."}]
    assert "Turn 0." not in json.dumps(body)  # what the item stands for is not sent again
    assert [i["type"] for i in output].count("compaction") == 1
    assert next(i for i in output if i["type"] == "compaction") == ITEM  # OpenAI's, as it came
    assert any(i["type"] == "message" for i in output)
    assert any(PASSED in m and "context_management sent" in m for m in proxy_log.messages)


def test_a_request_without_compaction_reaches_a_compacting_anthropic_model_without_it(
    upstream: ReplayServer,
) -> None:
    """The proxy compacts only when its client asks: the library's own strategy (`Client` asks
    a model that compacts for it on every request) does not apply to what it forwards (its
    Forwarder claims no `native_compaction_supported`)."""
    message = BODIES["anthropic_message"]
    upstream.add(Scripted(body={**message, "content": message["content"][1:]}))
    up = upstream_at(
        "anthropic", upstream.url, model="claude-sonnet-4-6", environ=wire.ANTHROPIC_ENV
    )
    with running_proxy(up) as url:
        asked: Any = {
            "model": "c",
            "max_tokens": 50,
            "messages": [{"role": "user", "content": "hi"}],
        }
        an(url).messages.create(**asked)
    sent = upstream.requests[-1]
    assert "context_management" not in sent.json()
    assert "compact" not in sent.headers.get("anthropic-beta", "")


@pytest.mark.parametrize("stream", [False, True])
def test_a_compaction_trigger_reaches_openai_as_sent_and_its_answer_comes_back_as_it_came(
    upstream: ReplayServer, native_proxy: str, proxy_log: pytest.LogCaptureFixture, stream: bool
) -> None:
    """Codex's remote compaction (openai/codex, codex-rs/core/src/compact_remote_v2.rs) sends
    its conversation with a `compaction_trigger` last on `POST /responses` and reads the one
    compaction item of the answer: in front of OpenAI the proxy forwards the request as the
    client sent it, every field, and passes OpenAI's answer on as it came, whole or event by
    event (tests/data: `openai_trigger_response`, streamed as the Responses API streams)."""
    answer = BODIES["openai_trigger_response"]
    upstream.add(Scripted(events=openai_events(answer)) if stream else Scripted(body=answer))
    asked: Any = {
        "model": MODEL,
        "input": [*with_openai_item(), {"type": "compaction_trigger"}],
        "instructions": "Dev.",
        "parallel_tool_calls": True,
        "store": False,
        "include": ["reasoning.encrypted_content"],
    }
    client = oa(native_proxy)
    if stream:
        events = list(client.responses.create(**asked, stream=True))
        assert [e.to_dict() for e in events] == [json.loads(e) for e in openai_events(answer)]
    else:
        raw = client.responses.with_raw_response.create(**asked)
        assert json.loads(raw.text) == answer
    sent = upstream.requests[-1]
    assert sent.path == "/v1/responses"
    assert sent.json() == {**asked, **({"stream": True} if stream else {})}
    assert len(upstream.requests) == 1
    assert any(PASSED in m and "compaction_trigger" in m for m in proxy_log.messages)


def test_a_chatcli_item_is_expanded_before_openai_is_sent_the_request(
    upstream: ReplayServer, tmp_path: Path, proxy_log: pytest.LogCaptureFixture
) -> None:
    """A chatcli item (made while the upstream was another model) is opened by the proxy,
    whose key is the store's: OpenAI is sent the summary it stands for, never the token."""
    upstream.add(Scripted(body=summary_body()))
    with store_proxy(tmp_path / "db", upstream, model="gpt-4o") as url:
        item = oa(url).responses.compact(model="gpt-4o", input=conversation()).output[-1]  # type: ignore[arg-type]
    token = item.model_dump()["encrypted_content"]
    assert token.startswith(TOKEN_PREFIX)
    upstream.add(Scripted(body=ANSWER))
    asked = [item.model_dump(exclude_none=True), {"role": "user", "content": "Go on."}]
    with store_proxy(tmp_path / "db", upstream, model=MODEL) as url:
        oa(url).responses.create(
            model=MODEL,
            input=asked,  # type: ignore[arg-type]
            extra_body={"context_management": MANAGEMENT},
        )
    sent = upstream.requests[-1]
    assert sent.path == "/v1/responses"
    assert sent.json()["context_management"] == MANAGEMENT
    assert sent.json()["input"][0]["content"].startswith(SUMMARY_HEADER)
    assert token not in sent.body.decode()
    assert any(PASSED in m and "no compaction item" in m for m in proxy_log.messages)


@contextmanager
def store_proxy(location: Path, server: ReplayServer, *, model: str) -> Iterator[str]:
    """A proxy in front of `server` for `model`, its key in the store at `location`."""
    recorder = SessionRecorder(SessionStore(location), upstream="openai test")
    env = {"OPENAI_API_KEY": wire.UPSTREAM_KEY, "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai", server.url + "/v1", model=model, environ=env)
    with running_proxy(up, options=ProxyOptions(sessions=recorder)) as url:
        yield url


def test_a_model_without_native_compaction_keeps_chatcli_own(
    upstream: ReplayServer, proxy_log: pytest.LogCaptureFixture
) -> None:
    env = {"OPENAI_API_KEY": wire.UPSTREAM_KEY, "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai", upstream.url + "/v1", model="gpt-4o", environ=env)
    assert up.native is None
    upstream.add(Scripted(body=summary_body()))
    with running_proxy(up) as url:
        compacted = oa(url).responses.compact(model="gpt-4o", input=conversation())  # type: ignore[arg-type]
    assert compacted.output[-1].encrypted_content.startswith(TOKEN_PREFIX)  # type: ignore[union-attr]
    assert upstream.requests[-1].path == "/v1/chat/completions"
    assert SUMMARY_HEADER not in upstream.requests[-1].body.decode()
    assert any("compacted (/responses/compact)" in m for m in proxy_log.messages)
    assert not any(PASSED in m for m in proxy_log.messages)


@pytest.mark.parametrize("trigger", [False, True])
def test_openai_refusing_the_compaction_is_the_clients_error(
    upstream: ReplayServer, native_proxy: str, trigger: bool
) -> None:
    """A recorded OpenAI rate limit (tests/data provider errors, pe-030) on `/responses/compact`
    or on a forwarded `compaction_trigger` reaches the client as its own 429 with OpenAI's code
    and Retry-After."""
    limited = replayed_error(wire.record("pe-030"))
    upstream.add(Scripted(status=429, body=limited.body, headers={"retry-after": "7"}))
    client = oa(native_proxy)
    with pytest.raises(openai.RateLimitError) as caught:
        if trigger:
            given = [*with_openai_item(), {"type": "compaction_trigger"}]
            client.responses.create(model=MODEL, input=given)  # type: ignore[arg-type]
        else:
            client.responses.compact(model=MODEL, input=with_openai_item())  # type: ignore[arg-type]
    assert caught.value.code == "rate_limit_exceeded"
    assert caught.value.response.headers["retry-after"] == "7"
    assert upstream.requests[-1].path == ("/v1/responses" if trigger else "/v1/responses/compact")


@pytest.mark.parametrize("stream", [False, True])
def test_an_anthropic_pause_after_compaction_reaches_the_client_as_anthropic_sent_it(
    upstream: ReplayServer, anthropic_proxy: str, stream: bool
) -> None:
    """The anthropic SDK's beta client asks for `pause_after_compaction` through the proxy in
    front of Anthropic: the edit and its beta reach the upstream, and the paused answer (the
    block alone, `stop_reason` "compaction") reaches the client as the API sent it."""
    paused = BODIES["anthropic_paused"]
    upstream.add(Scripted(events=anthropic_events(paused)) if stream else Scripted(body=paused))
    management = {"edits": [{"type": "compact_20260112", "pause_after_compaction": True}]}
    args: Any = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 50,
        "messages": [{"role": "user", "content": "hi"}],
        "betas": ["compact-2026-01-12"],
        "context_management": management,
    }
    client = wire.an(anthropic_proxy)
    if stream:
        with client.beta.messages.stream(**args) as events:
            message = events.get_final_message()
    else:
        message = client.beta.messages.create(**args)
    sent = upstream.requests[0]
    assert sent.json()["context_management"] == management
    assert "compact-2026-01-12" in sent.headers["anthropic-beta"]
    assert message.stop_reason == "compaction"
    assert [b.model_dump(exclude_none=True) for b in message.content] == paused["content"]

"""The library's compaction strategy (`RecoveryConfig.compaction`, `context_editing`): `Client`
asks a supporting adapter for the provider's own compaction on every request, triggered where
chatcli's auto-compaction would run, with the real SDKs talking to the replay server. Bodies:
tests/data/native-compaction.json (each cites its documentation)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from chatcli.client import Client
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.errors import ConfigError
from chatcli.messages import Message
from chatcli.policy.actions import Reply
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import NativeCompaction
from chatcli.providers.openai import OpenAI
from tests.native_streams import anthropic_events
from tests.replay import ReplayServer, Scripted, adapters_closed

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

DATA = json.loads((Path(__file__).parent / "data" / "native-compaction.json").read_text())
KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-sonnet-4-6"
MESSAGE = DATA["anthropic_message"]
PLAIN = {**MESSAGE, "content": MESSAGE["content"][1:]}  # an answer without a compaction
HISTORY = (
    Message.system("You help with Python."),
    Message.user("Build me a price scraper."),
)


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():
        yield


def anthropic(server: ReplayServer, model: str = MODEL, **native: Any) -> Anthropic:
    return Anthropic(
        model,
        api_key=KEY,
        base_url=server.url,
        context_window=200_000,
        native_compaction=NativeCompaction(**native) if native else None,
    )


def compact_edit(trigger: int) -> dict[str, Any]:
    return {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": trigger}}


async def reply_of(client: Client, mode: str) -> Reply:
    if mode == "send":
        return client.send(HISTORY, max_tokens=8000)
    if mode == "asend":
        return await client.asend(HISTORY, max_tokens=8000)
    items = (
        list(client.stream(HISTORY, max_tokens=8000))
        if mode == "stream"
        else [item async for item in client.astream(HISTORY, max_tokens=8000)]
    )
    reply = items[-1]
    assert isinstance(reply, Reply)
    return reply


@pytest.mark.parametrize("mode", ["send", "asend", "stream", "astream"])
async def test_the_default_strategy_asks_a_supporting_model_to_compact(
    server: ReplayServer, mode: str
) -> None:
    streamed = "stream" in mode
    server.add(Scripted(events=anthropic_events(MESSAGE)) if streamed else Scripted(body=MESSAGE))
    reply = await reply_of(Client(anthropic(server)), mode)
    sent = server.requests[0]
    assert sent.headers["anthropic-beta"] == "compact-2026-01-12"
    # The trigger is chatcli's own: 80% (CHATCLI_AUTO_COMPACT_PCT) of (200,000 - 8,000).
    assert sent.json()["context_management"] == {"edits": [compact_edit(153_600)]}
    part = reply.message.compaction  # kept, for the next request to start from
    assert part is not None and (part.provider, part.model) == ("anthropic", MODEL)


def test_the_trigger_follows_the_auto_compaction_share(server: ReplayServer) -> None:
    server.add(Scripted(body=PLAIN))
    client = Client(anthropic(server), compaction=CompactionConfig(auto_compact_pct=50))
    client.send(HISTORY, max_tokens=8000)
    assert server.requests[0].json()["context_management"] == {"edits": [compact_edit(96_000)]}


@pytest.mark.parametrize("strategy", ["chatcli", "off"])
def test_chatcli_s_own_strategies_ask_for_none(server: ReplayServer, strategy: str) -> None:
    server.add(Scripted(body=PLAIN))
    Client(anthropic(server), RecoveryConfig(compaction=strategy)).send(HISTORY)
    sent = server.requests[0]
    assert "context_management" not in sent.json()
    assert "compact" not in sent.headers.get("anthropic-beta", "")


def test_a_model_without_it_is_asked_for_none(server: ReplayServer) -> None:
    server.add(Scripted(body={**PLAIN, "model": "claude-haiku-4-5"}))
    client = Client(anthropic(server, "claude-haiku-4-5"), RecoveryConfig(compaction="native"))
    client.send(HISTORY)
    assert "context_management" not in server.requests[0].json()


def test_the_adapter_s_own_native_compaction_wins(server: ReplayServer) -> None:
    server.add(Scripted(body=PLAIN))
    client = Client(anthropic(server, trigger_tokens=120_000, instructions="Keep paths."))
    client.send(HISTORY, max_tokens=8000)
    edit = {**compact_edit(120_000), "instructions": "Keep paths."}
    assert server.requests[0].json()["context_management"] == {"edits": [edit]}


def test_context_editing_from_the_environment_reaches_the_wire(server: ReplayServer) -> None:
    server.add(Scripted(body=PLAIN))
    config = RecoveryConfig.from_env({"CHATCLI_CONTEXT_EDITING": " Thinking, tool_uses "})
    assert config.context_editing == ("thinking", "tool_uses")
    Client(anthropic(server), config).send(HISTORY, max_tokens=8000)
    sent = server.requests[0]
    assert sent.headers["anthropic-beta"] == "compact-2026-01-12,context-management-2025-06-27"
    assert sent.json()["context_management"]["edits"] == [
        {"type": "clear_thinking_20251015"},
        {"type": "clear_tool_uses_20250919"},
        compact_edit(153_600),
    ]


def test_a_bad_context_edit_names_the_variable() -> None:
    with pytest.raises(ConfigError, match="CHATCLI_CONTEXT_EDITING='tool_uses,images'"):
        RecoveryConfig.from_env({"CHATCLI_CONTEXT_EDITING": "tool_uses,images"})
    with pytest.raises(ConfigError, match="context_editing"):
        RecoveryConfig(context_editing=("tools",))
    assert RecoveryConfig.from_env({"CHATCLI_CONTEXT_EDITING": ""}).context_editing == ()


def openai(server: ReplayServer, model: str) -> OpenAI:
    return OpenAI(
        model,
        api="responses",
        api_key="sk-test-0123456789abcdef",
        base_url=server.url + "/v1",
        context_window=400_000,
    )


def test_openai_responses_asks_a_supporting_model_to_compact(server: ReplayServer) -> None:
    server.add(Scripted(body=DATA["openai_response"]))
    reply = Client(openai(server, "gpt-5.1-codex")).send(HISTORY, max_tokens=16_000)
    # 80% of (400,000 - 16,000).
    expected = [{"type": "compaction", "compact_threshold": 307_200}]
    assert server.requests[0].json()["context_management"] == expected
    assert reply.message.compaction is not None


def test_openai_responses_without_it_and_chatcli_s_strategy_ask_for_none(
    server: ReplayServer,
) -> None:
    plain = {**DATA["openai_response"], "output": DATA["openai_response"]["output"][1:]}
    server.add(Scripted(body={**plain, "model": "gpt-4.1"}), Scripted(body=plain))
    Client(openai(server, "gpt-4.1")).send(HISTORY)
    Client(openai(server, "gpt-5.1-codex"), RecoveryConfig(compaction="chatcli")).send(HISTORY)
    assert ["context_management" in r.json() for r in server.requests] == [False, False]

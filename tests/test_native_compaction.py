"""Provider-native compaction through the adapters, with the real SDKs talking to the replay
server: the edit (or `context_management`) on the wire, the block (or item) kept as the
message's CompactionPart, sent back on the next request, dropped when the model changes, and
its cost counted. Bodies: tests/data/native-compaction.json (each cites its documentation)."""

from __future__ import annotations

import io
import json
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console

from chatcli.catalog import ModelInfo, Prices
from chatcli.chat.session import ChatSession
from chatcli.chat.settings import CliSettings
from chatcli.chat.text import NativeCompactionNote
from chatcli.cli.context import ChatContext
from chatcli.cli.render import event_line
from chatcli.cli.slash import dispatch
from chatcli.cli.ui import Ui
from chatcli.client import Client
from chatcli.config import RecoveryConfig
from chatcli.errors import CompactionError, ConfigError, ProviderError
from chatcli.events import CompactionPaused
from chatcli.messages import Message, StopReason, Usage
from chatcli.policy.actions import Reply
from chatcli.providers.anthropic import Anthropic, supports_native_compaction
from chatcli.providers.base import NativeCompaction, Request, Response, StreamChunk
from chatcli.providers.openai import OpenAI
from chatcli.providers.openai import supports_native_compaction as openai_supports
from chatcli.store import SessionStore
from tests.compaction_fakes import ScriptedSummarizer, conversation_text, faithful_summary
from tests.native_streams import anthropic_events, openai_events
from tests.replay import ReplayServer, Scripted, adapters_closed

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

DATA = json.loads((Path(__file__).parent / "data" / "native-compaction.json").read_text())
KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-sonnet-4-6"
SUMMARY = DATA["anthropic_message"]["content"][0]["content"]


@pytest.fixture(autouse=True)
async def _adapters_closed() -> AsyncIterator[None]:
    async with adapters_closed():
        yield


def anthropic(server: ReplayServer, model: str = MODEL, **native: Any) -> Anthropic:
    return Anthropic(
        model,
        api_key=KEY,
        base_url=server.url,
        native_compaction=NativeCompaction(**native),
    )


def final(chunks: list[StreamChunk]) -> Response:
    last = chunks[-1]
    assert isinstance(last, Response)
    return last


def history() -> tuple[Message, ...]:
    return (
        Message.system("You help with Python."),
        Message.user("Build me a price scraper. " + "details " * 200),
        Message.assistant("Done with the parser. " + "code " * 200),
        Message.user("Go on."),
    )


# -- Anthropic ------------------------------------------------------------------------------


@pytest.mark.parametrize("mode", ["complete", "stream", "acomplete", "astream"])
async def test_anthropic_edit_on_the_wire_and_block_kept(server: ReplayServer, mode: str) -> None:
    message = DATA["anthropic_message"]
    streamed = "stream" in mode
    server.add(Scripted(events=anthropic_events(message)) if streamed else Scripted(body=message))
    provider = anthropic(server, trigger_tokens=120_000)
    request = Request(messages=history(), max_tokens=2048)
    if mode == "complete":
        response = provider.complete(request)
    elif mode == "acomplete":
        response = await provider.acomplete(request)
    elif mode == "stream":
        response = final(list(provider.stream(request)))
    else:
        response = final([c async for c in provider.astream(request)])

    sent = server.requests[0]
    assert sent.path.startswith("/v1/messages")
    assert "compact-2026-01-12" in sent.headers["anthropic-beta"]
    assert "context-management-2025-06-27" not in sent.headers["anthropic-beta"]
    assert sent.json()["context_management"] == {
        "edits": [
            {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 120_000}}
        ]
    }
    part = response.message.compaction
    assert part is not None and part.summary == SUMMARY
    assert (part.provider, part.model) == ("anthropic", MODEL)
    assert part.provider_details == {"type": "compaction", "content": SUMMARY}
    assert response.message.text == message["content"][1]["text"]
    # The summary's own tokens, apart from the answer's (which leave them out).
    assert response.compaction_usage == Usage(input_tokens=180_000, output_tokens=3500)
    assert (response.usage.input_tokens, response.usage.output_tokens) == (23_000, 1000)


def test_anthropic_context_editing_and_trigger_floor(server: ReplayServer) -> None:
    # The answer reports the edit it applied (fields of the SDK's
    # BetaClearToolUses20250919EditResponse; the figures are this test's).
    edit = {
        "type": "clear_tool_uses_20250919",
        "cleared_tool_uses": 8,
        "cleared_input_tokens": 50_000,
    }
    applied = {"context_management": {"applied_edits": [edit]}}
    server.add(Scripted(body={**DATA["anthropic_message"], **applied}))
    provider = anthropic(
        server,
        trigger_tokens=10,
        clear_tool_uses=True,
        clear_thinking=True,
        instructions="Keep paths.",
    )
    response = provider.complete(Request(messages=history(), max_tokens=100))
    assert (
        response.provider_details["anthropic"]["context_management"]
        == applied["context_management"]
    )
    sent = server.requests[0]
    assert sent.headers["anthropic-beta"] == "compact-2026-01-12,context-management-2025-06-27"
    assert sent.json()["context_management"]["edits"] == [
        {"type": "clear_thinking_20251015"},
        {"type": "clear_tool_uses_20250919"},
        {
            "type": "compact_20260112",
            "trigger": {"type": "input_tokens", "value": 50_000},  # the API's least trigger
            "instructions": "Keep paths.",
        },
    ]


def test_anthropic_without_native_compaction_sends_no_edit(server: ReplayServer) -> None:
    message = DATA["anthropic_message"]
    server.add(Scripted(body={**message, "content": message["content"][1:]}))
    Anthropic(MODEL, api_key=KEY, base_url=server.url).complete(Request(messages=history()))
    sent = server.requests[0]
    assert "context_management" not in sent.json()
    assert "compact" not in sent.headers.get("anthropic-beta", "")


def test_anthropic_block_reused_on_the_next_request(server: ReplayServer) -> None:
    """Through the Client: the next request starts from the block, verbatim, and the span it
    replaced is no longer sent: the assistant turn holding it comes first, as Anthropic's
    compaction page appends the response and sends it on (nothing in front of the block)."""
    server.add(Scripted(body=DATA["anthropic_message"]), Scripted(body=DATA["anthropic_message"]))
    provider = anthropic(server)
    client = Client(provider, context_window=200_000)
    reply = client.send(history())
    conversation = (*history(), reply.message, Message.user("And rate limiting?"))
    client.send(conversation)
    sent = server.requests[1].json()
    assert sent["system"][0]["text"] == "You help with Python."
    first = sent["messages"][0]
    assert first["role"] == "assistant"
    assert first["content"][0] == {"type": "compaction", "content": SUMMARY}
    assert first["content"][1]["text"] == DATA["anthropic_message"]["content"][1]["text"]
    assert sent["messages"][-1]["content"][0]["text"] == "And rate limiting?"
    assert "Build me a price scraper" not in json.dumps(sent)


def test_anthropic_block_dropped_when_the_model_changes(server: ReplayServer) -> None:
    message = DATA["anthropic_message"]
    plain = {**message, "content": message["content"][1:], "model": "claude-haiku-4-5"}
    server.add(Scripted(body=message), Scripted(body=plain))
    reply = Client(anthropic(server)).send(history())
    other = Anthropic("claude-haiku-4-5", api_key=KEY, base_url=server.url)
    Client(other).send((*history(), reply.message, Message.user("And rate limiting?")))
    sent = json.dumps(server.requests[1].json())
    assert '"compaction"' not in sent
    assert "Build me a price scraper" in sent  # the span is back, for chatcli's own compaction


def test_a_failed_compaction_block_is_no_compaction(server: ReplayServer) -> None:
    message = dict(DATA["anthropic_message"])
    message["content"] = [{"type": "compaction", "content": None}, *message["content"][1:]]
    server.add(Scripted(body=message))
    response = anthropic(server).complete(Request(messages=history()))
    assert response.message.compaction is None


def test_supported_models() -> None:
    """The `supportedModels` of Anthropic's compaction-threshold and compaction-background
    pages (platform.claude.com/docs/en/build-with-claude/*.md), dated snapshots included."""
    assert supports_native_compaction("claude-sonnet-4-6")
    assert supports_native_compaction("claude-opus-4-6-20260205")
    for model in ("claude-haiku-5-5", "claude-opus-4-8", "claude-sonnet-5", "claude-fable-5-1"):
        assert supports_native_compaction(model)
    assert not supports_native_compaction("claude-haiku-4-5")
    assert not supports_native_compaction("claude-sonnet-4-5")


# -- OpenAI Responses -----------------------------------------------------------------------

OPENAI_KEY = "sk-test-0123456789abcdef"
OPENAI_MODEL = "gpt-5.1-codex"
ITEM = DATA["openai_response"]["output"][0]


def openai(server: ReplayServer, model: str = OPENAI_MODEL, **native: Any) -> OpenAI:
    return OpenAI(
        model,
        api="responses",
        api_key=OPENAI_KEY,
        base_url=server.url + "/v1",
        native_compaction=NativeCompaction(**native) if native else None,
    )


@pytest.mark.parametrize("mode", ["complete", "stream", "acomplete", "astream"])
async def test_openai_context_management_on_the_wire_and_item_kept(
    server: ReplayServer, mode: str
) -> None:
    body = DATA["openai_response"]
    streamed = "stream" in mode
    server.add(Scripted(events=openai_events(body)) if streamed else Scripted(body=body))
    provider = openai(server, "gpt-5.1-codex", trigger_tokens=150_000)
    request = Request(messages=history(), max_tokens=2048)
    if mode == "complete":
        response = provider.complete(request)
    elif mode == "acomplete":
        response = await provider.acomplete(request)
    elif mode == "stream":
        response = final(list(provider.stream(request)))
    else:
        response = final([c async for c in provider.astream(request)])
    sent = server.requests[0]
    assert sent.path == "/v1/responses"
    assert sent.json()["context_management"] == [
        {"type": "compaction", "compact_threshold": 150_000}
    ]
    part = response.message.compaction
    assert part is not None and part.provider_details == ITEM
    assert (part.provider, part.model, part.summary) == ("openai", OPENAI_MODEL, "")
    assert response.message.text == "Next, pagination."


def test_openai_item_reused_on_the_next_request(server: ReplayServer) -> None:
    server.add(Scripted(body=DATA["openai_response"]), Scripted(body=DATA["openai_response"]))
    client = Client(openai(server, trigger_tokens=150_000), context_window=400_000)
    reply = client.send(history())
    client.send((*history(), reply.message, Message.user("And rate limiting?")))
    sent = server.requests[1].json()
    assert sent["input"][0] == {"role": "system", "content": "You help with Python."}
    assert sent["input"][1] == ITEM  # verbatim, the items before it dropped
    assert sent["input"][2]["id"] == "msg_0123456789abcdef"
    assert sent["input"][-1] == {"role": "user", "content": "And rate limiting?"}
    assert "Build me a price scraper" not in json.dumps(sent)


def test_openai_item_dropped_when_the_model_changes(server: ReplayServer) -> None:
    plain = {**DATA["openai_response"], "output": DATA["openai_response"]["output"][1:]}
    server.add(Scripted(body=DATA["openai_response"]), Scripted(body=plain))
    reply = Client(openai(server, trigger_tokens=150_000)).send(history())
    Client(openai(server, "gpt-4.1")).send((*history(), reply.message, Message.user("More?")))
    sent = server.requests[1].json()
    assert "context_management" not in sent  # not asked for on this adapter
    assert all(item.get("type") != "compaction" for item in sent["input"])
    assert "Build me a price scraper" in json.dumps(sent)


def test_openai_chat_completions_reads_no_compaction() -> None:
    chat = OpenAI(OPENAI_MODEL, api_key=OPENAI_KEY, base_url="http://127.0.0.1:9/v1")
    assert chat.compaction_provider is None
    assert openai_supports("gpt-5.1-codex") and not openai_supports("gpt-4.1")


# -- the strategy, in a chat session ---------------------------------------------------------

PRICED = ModelInfo(
    model=MODEL,
    context_window=200_000,
    prices=Prices(input=3.0, output=15.0, cache_read=0.3, cache_write=3.75),
)
# Anthropic's error shape (docs, "Errors"); the message is this test's.
REFUSED = {
    "type": "error",
    "error": {"type": "invalid_request_error", "message": "context_management: unknown edit"},
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[SessionStore]:
    with SessionStore(tmp_path / "s.db") as opened:
        yield opened


def chat(store: SessionStore, provider: Any, compaction: str = "auto") -> ChatSession:
    return ChatSession.open(
        store,
        provider,
        provider_name="anthropic",
        model=MODEL,
        model_info=PRICED,
        max_tokens=8000,
        recovery=RecoveryConfig(compaction=compaction),
    )


def plain_anthropic(server: ReplayServer) -> Anthropic:
    return Anthropic(MODEL, api_key=KEY, base_url=server.url, context_window=200_000)


def test_session_native_compaction_shown_and_counted(
    server: ReplayServer, store: SessionStore
) -> None:
    server.add(Scripted(body=DATA["anthropic_message"]))
    session = chat(store, plain_anthropic(server))
    session.append(history()[:3])
    events: list[Any] = []
    session.send("Go on.", on_event=events.append)
    edits = server.requests[0].json()["context_management"]["edits"]
    # The trigger is chatcli's own: 80% of (200,000 - 8,000).
    assert edits == [
        {"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 153_600}}
    ]
    (note,) = [e for e in events if isinstance(e, NativeCompactionNote)]
    assert event_line(note).plain.startswith("↻ compacted by the provider: 3 messages replaced")
    summary = session.cost_summary()
    compaction = 180_000 * 3.0 / 1e6 + 3500 * 15.0 / 1e6
    assert summary.total.compaction_cost == pytest.approx(compaction)
    answer = 23_000 * 3.0 / 1e6 + 1000 * 15.0 / 1e6
    assert summary.total.cost == pytest.approx(compaction + answer)
    # The next request starts from the block (a cache break the compaction explains); a
    # reopened session too.
    assert session.working_messages()[1].compaction is not None
    plain = {**DATA["anthropic_message"], "content": DATA["anthropic_message"]["content"][1:]}
    server.add(Scripted(body=plain))
    session.send("And rate limiting?")
    assert list(session.cost_summary().cache_breaks.values()) == ["a compaction"]
    reopened = ChatSession.open(
        store,
        plain_anthropic(server),
        provider_name="anthropic",
        model=MODEL,
        resume=session.info.id,
    )
    view = reopened.working_messages()
    assert view[1].compaction is not None and view[2].text == plain["content"][0]["text"]
    assert [m.text for m in view[3:]] == ["And rate limiting?", plain["content"][0]["text"]]
    assert len(view) == 5  # system, compaction, the rest of its answer, the next exchange


def test_session_chatcli_strategy_sends_no_edit(server: ReplayServer, store: SessionStore) -> None:
    message = DATA["anthropic_message"]
    server.add(Scripted(body={**message, "content": message["content"][1:]}))
    chat(store, plain_anthropic(server), "chatcli").send("hi")
    assert "context_management" not in server.requests[0].json()


def test_session_auto_falls_back_when_the_edit_is_refused(
    server: ReplayServer, store: SessionStore
) -> None:
    message = DATA["anthropic_message"]
    server.add(
        Scripted(status=400, body=REFUSED),
        Scripted(body={**message, "content": message["content"][1:]}),
    )
    session = chat(store, plain_anthropic(server))
    events: list[Any] = []
    session.send("hi", on_event=events.append)
    assert "context_management" in server.requests[0].json()
    assert "context_management" not in server.requests[1].json()
    assert session.native_failed is not None and not session.native_active()
    assert any("chatcli compacts" in e.describe() for e in events)


def test_session_native_strategy_does_not_fall_back(
    server: ReplayServer, store: SessionStore
) -> None:
    server.add(Scripted(status=400, body=REFUSED))
    session = chat(store, plain_anthropic(server), "native")
    with pytest.raises(ProviderError):
        session.send("hi")
    assert session.native_failed is None and session.native_active()


def test_session_auto_falls_back_on_an_answer_without_the_block(
    server: ReplayServer, store: SessionStore
) -> None:
    message = DATA["anthropic_message"]
    past = {**message["usage"], "input_tokens": 160_000, "iterations": None}
    plain = {**message, "content": message["content"][1:]}
    server.add(Scripted(body={**plain, "usage": past}), Scripted(body=plain))
    session = chat(store, plain_anthropic(server))
    session.send("hi")
    assert session.native_failed == "an answer past its trigger came without a compaction"
    session.send("Go on.")
    assert "context_management" not in server.requests[1].json()  # no longer asked for


def test_session_unsupported_model_uses_chatcli(server: ReplayServer, store: SessionStore) -> None:
    message = DATA["anthropic_message"]
    server.add(Scripted(body={**message, "content": message["content"][1:]}))
    haiku = Anthropic("claude-haiku-4-5", api_key=KEY, base_url=server.url)
    session = chat(store, haiku)
    assert not session.native_active()
    session.send("hi")
    assert "context_management" not in server.requests[0].json()


def test_compaction_strategy_from_env() -> None:
    assert RecoveryConfig.from_env({}).compaction == "auto"
    assert RecoveryConfig.from_env({"CHATCLI_COMPACTION": " Native "}).compaction == "native"
    with pytest.raises(ConfigError, match="CHATCLI_COMPACTION='sometimes' must be one of"):
        RecoveryConfig.from_env({"CHATCLI_COMPACTION": "sometimes"})
    with pytest.raises(ConfigError, match="compaction='x'"):
        RecoveryConfig(compaction="x")


def test_compact_by_hand_summarises_the_span_the_provider_compacted(
    server: ReplayServer, store: SessionStore
) -> None:
    """/compact ("auto") when the provider's compaction on demand fails: chatcli's own summary
    of the whole span, the provider's compaction removed (its summary is the provider's to
    read), not of the block alone; the chat says why it was not the provider's."""
    server.add(Scripted(body=DATA["anthropic_message"]), Scripted(status=400, body=REFUSED))
    summarizer = ScriptedSummarizer([faithful_summary], context_window=200_000)
    session = ChatSession.open(
        store,
        plain_anthropic(server),
        provider_name="anthropic",
        model=MODEL,
        model_info=PRICED,
        summarizer=summarizer,
    )
    session.append(history()[:3])
    session.send("Go on.")
    session.append((Message.user("Now pagination."), Message.assistant("On it.")))
    events: list[Any] = []
    assert session.compact(on_event=events.append) is not None
    assert server.requests[1].json()["compaction"] == {"type": "summarize"}
    (note,) = events
    assert note.describe().startswith("not compacted by the provider (its compaction on demand")
    assert note.describe().endswith("): chatcli's own summary runs")
    (request,) = summarizer.requests
    assert "Build me a price scraper" in conversation_text(request)
    assert all(m.compaction is None for m in session.working_messages())


# -- compaction on demand (/compact) ---------------------------------------------------------

ON_DEMAND = DATA["anthropic_on_demand"]
BLOCK = ON_DEMAND["content"][0]
COMPACTED = DATA["openai_compact_spec_example"]


def test_anthropic_compaction_on_demand_on_the_wire(server: ReplayServer) -> None:
    """The conversation with `compaction: summarize` and its beta, no threshold edit; the
    answer's block (signature and all) is the window, its tokens (`usage.iterations`) the
    usage."""
    server.add(Scripted(body=ON_DEMAND))
    done = anthropic(server, trigger_tokens=100_000).compact_on_demand(Request(messages=history()))
    sent = server.requests[0]
    assert sent.path.startswith("/v1/messages")
    assert sent.headers["anthropic-beta"] == "compact-2026-09-04"
    body = sent.json()
    assert body["compaction"] == {"type": "summarize"}
    assert "context_management" not in body
    assert body["system"][0]["text"] == "You help with Python."
    (anchor,) = done.window
    assert anchor.compaction is not None and not anchor.parts
    assert anchor.compaction.provider_details == BLOCK  # verbatim, signature included
    assert anchor.compaction.summary == BLOCK["content"] and anchor.compaction.model == MODEL
    assert done.usage == Usage(input_tokens=144, output_tokens=276)


def test_anthropic_compaction_on_demand_without_a_summary(server: ReplayServer) -> None:
    """The docs' "missing summary": a 200 with empty content and the summarisation call's own
    stop reason is no compaction."""
    server.add(Scripted(body={**ON_DEMAND, "content": [], "stop_reason": "max_tokens"}))
    with pytest.raises(ProviderError, match=r"no summary came back .*max_tokens"):
        anthropic(server).compact_on_demand(Request(messages=history()))


def test_anthropic_signed_block_goes_first_with_its_beta_and_no_edit(
    server: ReplayServer,
) -> None:
    """A request carrying the block: the block first, verbatim (Anthropic's page: anything in
    front of a signed block is refused, `compaction_block_misplaced`), the on-demand beta, and
    no threshold edit (the anthropic SDK: the API takes none beside a compaction block)."""
    server.add(Scripted(body=ON_DEMAND), Scripted(body=DATA["anthropic_message"]))
    provider = anthropic(server, trigger_tokens=100_000)
    window = provider.compact_on_demand(Request(messages=history())).window
    Client(provider).send((history()[0], *window, Message.user("Now Ingredient.")))
    sent = server.requests[1]
    assert sent.headers["anthropic-beta"] == "compact-2026-09-04"
    body = sent.json()
    assert "context_management" not in body
    assert body["messages"][0] == {"role": "assistant", "content": [BLOCK]}
    assert body["messages"][1]["content"][0]["text"] == "Now Ingredient."


def test_openai_compaction_on_demand(server: ReplayServer) -> None:
    """`POST /responses/compact`: its output, the user messages then the item, is the window;
    the next request sends every item of it as OpenAI returned it, in that order, the span
    before it no longer."""
    server.add(Scripted(body=COMPACTED), Scripted(body=DATA["openai_response"]))
    provider = openai(server)
    done = provider.compact_on_demand(Request(messages=history()))
    sent = server.requests[0]
    assert sent.path == "/v1/responses/compact"
    assert sent.json()["model"] == OPENAI_MODEL
    assert sent.json()["input"][1]["content"].startswith("Build me a price scraper")
    *kept, anchor = done.window
    assert [m.text for m in kept] == [
        item["content"][0]["text"] for item in COMPACTED["output"][:2]
    ]
    assert anchor.compaction is not None and anchor.compaction.keeps == 2
    assert anchor.compaction.provider_details == COMPACTED["output"][2]
    assert done.usage == Usage(input_tokens=42897, output_tokens=12000)
    Client(provider).send((*history(), *done.window, Message.user("Next?")))
    items = server.requests[1].json()["input"]
    assert items[0] == {"role": "system", "content": "You help with Python."}
    assert items[1:4] == COMPACTED["output"]  # verbatim, not rebuilt from their text
    assert items[4] == {"role": "user", "content": "Next?"}
    assert len(items) == 5


def test_session_compact_uses_the_providers_compaction_on_demand(
    server: ReplayServer, store: SessionStore
) -> None:
    """/compact ("auto", a model that compacts): the provider's compaction on demand, shown
    and counted as compaction; the next request (and a reopened session) starts from it."""
    plain = {**DATA["anthropic_message"], "content": DATA["anthropic_message"]["content"][1:]}
    server.add(Scripted(body=plain), Scripted(body=ON_DEMAND), Scripted(body=plain))
    session = chat(store, plain_anthropic(server))
    session.append(history()[1:3])
    session.send("Go on.")
    events: list[Any] = []
    assert session.compact(on_event=events.append) is None
    (note,) = events
    line = event_line(note).plain
    assert line.startswith("↻ compacted by the provider: 4 messages replaced by a ")
    assert line.endswith("(anthropic, claude-sonnet-4-6, 276 summary tokens)")
    summary = session.cost_summary()
    assert summary.total.compaction_cost == pytest.approx(144 * 3.0 / 1e6 + 276 * 15.0 / 1e6)
    session.send("Now Ingredient.")
    body = server.requests[2].json()
    assert body["messages"][0] == {"role": "assistant", "content": [BLOCK]}
    assert "Build me a price scraper" not in json.dumps(body)
    assert list(session.cost_summary().cache_breaks.values()) == ["a compaction"]
    reopened = ChatSession.open(
        store,
        plain_anthropic(server),
        provider_name="anthropic",
        model=MODEL,
        resume=session.info.id,
    )
    assert reopened.working_messages() == session.working_messages()
    assert reopened.working_messages()[0].compaction is not None


def test_session_compact_with_a_focus_or_no_support_is_chatcli_s_own(
    server: ReplayServer, store: SessionStore
) -> None:
    """A focus is for chatcli's own summary; so is "native" on a model that does not compact
    on the provider's servers; each says why. "chatcli" says nothing: it is its job."""
    summarizer = ScriptedSummarizer([faithful_summary] * 3, context_window=200_000)
    cases = [
        (MODEL, "auto", "Recipe", "a focus is for chatcli's own summary"),
        ("claude-haiku-4-5", "native", None, "claude-haiku-4-5 does not compact on the provider"),
        (MODEL, "chatcli", None, None),
    ]
    for model, strategy, focus, why in cases:
        provider = Anthropic(model, api_key=KEY, base_url=server.url, context_window=200_000)
        session = ChatSession.open(
            store,
            provider,
            provider_name="anthropic",
            model=model,
            recovery=RecoveryConfig(compaction=strategy),
            summarizer=summarizer,
        )
        session.append((*history()[1:], Message.assistant("Pagination next.")))
        events: list[Any] = []
        assert session.compact(focus, on_event=events.append) is not None
        said = [e.describe() for e in events]
        if why is None:
            assert said == []
        else:
            (line,) = said
            assert why in line and line.endswith("): chatcli's own summary runs")
    assert server.requests == []  # the provider was never asked


def test_session_compact_off_refuses(server: ReplayServer, store: SessionStore) -> None:
    session = chat(store, plain_anthropic(server), "off")
    session.append(history()[1:])
    with pytest.raises(CompactionError, match="compaction is off"):
        session.compact()
    assert server.requests == []


def test_count_tokens_reads_compaction_blocks_on_the_beta_endpoint(server: ReplayServer) -> None:
    server.add(Scripted(body={"input_tokens": 2345}))
    provider = anthropic(server)
    part_message = Message.assistant("Next.")
    assert provider.count_tokens((Message.user("hi"), part_message)) == 2345
    sent = server.requests[0]
    assert sent.path.startswith("/v1/messages/count_tokens")
    assert "compact-2026-01-12" in sent.headers["anthropic-beta"]


def test_count_tokens_of_a_compaction_block_uses_the_beta_endpoint_by_itself(
    server: ReplayServer,
) -> None:
    """An adapter not built with `native_compaction` (the Client asks per request) still counts
    a conversation that carries its compaction block where the block is read."""
    server.add(Scripted(body=DATA["anthropic_message"]), Scripted(body={"input_tokens": 2345}))
    provider = plain_anthropic(server)
    asked = Request(messages=history(), native_compaction=NativeCompaction())
    answer = provider.complete(asked).message
    assert provider.count_tokens((*history(), answer, Message.user("More."))) == 2345
    sent = server.requests[1]
    assert sent.path.startswith("/v1/messages/count_tokens")
    assert "compact-2026-01-12" in sent.headers["anthropic-beta"]


def slash_compact(session: ChatSession, store: SessionStore, tmp_path: Path) -> str:
    """What `/compact` prints in the chat for `session`."""
    console = Console(file=io.StringIO(), width=200, highlight=False)
    paths = {"db_path": tmp_path / "db", "history_path": tmp_path / "h", "cache_dir": tmp_path}
    ctx = ChatContext(
        ui=Ui(console=console, interactive=False),
        store=store,
        session=session,
        settings=CliSettings(**paths),
        provider_name="anthropic",
        environ={},
    )
    assert dispatch(ctx, "/compact")
    output = console.file
    assert isinstance(output, io.StringIO)
    return output.getvalue()


def test_slash_compact_says_which_compaction_ran(
    server: ReplayServer, store: SessionStore, tmp_path: Path
) -> None:
    server.add(Scripted(body=ON_DEMAND))
    session = chat(store, plain_anthropic(server))
    session.append(history()[1:])
    shown = slash_compact(session, store, tmp_path)
    size = len(BLOCK["content"])
    assert shown == (
        f"↻ compacted by the provider: 3 messages replaced by a {size}-char summary"
        " (anthropic, claude-sonnet-4-6, 276 summary tokens)\n"
    )
    off = chat(store, plain_anthropic(server), "off")
    off.append(history()[1:])
    shown = slash_compact(off, store, tmp_path)
    assert shown.strip() == (
        "error: /compact: compaction is off (CHATCLI_COMPACTION=off), nothing was compacted"
    )
    assert len(server.requests) == 1


# -- pause after compaction ------------------------------------------------------------------

PAUSED = DATA["anthropic_paused"]
ANSWER = {**DATA["anthropic_message"], "content": DATA["anthropic_message"]["content"][1:]}


def client_reply(client: Client, messages: tuple[Message, ...], mode: str) -> Reply:
    if mode == "send":
        return client.send(messages)
    *items, reply = list(client.stream(messages))
    assert isinstance(reply, Reply)
    paused = [item for item in items if isinstance(item, CompactionPaused)]  # as it happened
    assert len(paused) == (reply.stop_reason is StopReason.COMPACTION)
    return reply


@pytest.mark.parametrize("mode", ["send", "stream"])
def test_anthropic_pause_is_a_compaction_stop_and_the_answer_follows(
    server: ReplayServer, mode: str
) -> None:
    """`pause_after_compaction` on the wire; the paused answer (the block alone, stop reason
    "compaction") is the Reply as it is, said by an event, never an empty finished answer;
    sent again with it appended, as the docs do, the conversation gets its answer."""
    streamed = mode == "stream"
    server.add(
        Scripted(events=anthropic_events(PAUSED)) if streamed else Scripted(body=PAUSED),
        Scripted(events=anthropic_events(ANSWER)) if streamed else Scripted(body=ANSWER),
    )
    client = Client(anthropic(server, pause=True), context_window=200_000)
    reply = client_reply(client, history(), mode)
    (edit,) = server.requests[0].json()["context_management"]["edits"]
    assert edit == {"type": "compact_20260112", "pause_after_compaction": True}
    assert reply.stop_reason is StopReason.COMPACTION and not reply.truncated
    assert reply.message.compaction is not None and reply.message.compaction.summary == SUMMARY
    assert reply.message.text == "" and reply.calls == 1
    assert [type(e) for e in reply.events] == [CompactionPaused]
    answer = client_reply(client, (*history(), reply.message), mode)
    (last,) = server.requests[1].json()["messages"]  # the block first, nothing before it
    assert last == {"role": "assistant", "content": [{"type": "compaction", "content": SUMMARY}]}
    assert answer.stop_reason is StopReason.END_TURN
    assert answer.message.text == ANSWER["content"][0]["text"]


def test_session_answers_after_the_provider_pauses(
    server: ReplayServer, store: SessionStore
) -> None:
    """The chat asks for the answer at once: one turn, two requests, the compaction stored
    and counted, the answer shown."""
    server.add(Scripted(body=PAUSED), Scripted(body=ANSWER))
    session = chat(store, plain_anthropic(server))
    session.append(history()[:3])
    events: list[Any] = []
    turn = session.send("Go on.", on_event=events.append)
    assert len(server.requests) == 2
    assert turn.reply.message.text == ANSWER["content"][0]["text"]
    kinds = [type(e) for e in events]  # the pause said, then the compaction shown
    assert kinds.index(CompactionPaused) < kinds.index(NativeCompactionNote)
    assert kinds.count(NativeCompactionNote) == 1
    last = server.requests[1].json()["messages"][-1]
    assert last == {"role": "assistant", "content": [{"type": "compaction", "content": SUMMARY}]}
    assert [m.role for m in session.transcript[-3:]] == ["user", "assistant", "assistant"]
    assert session.transcript[-2].compaction is not None
    compaction = 180_000 * 3.0 / 1e6 + 3500 * 15.0 / 1e6
    assert session.cost_summary().total.compaction_cost == pytest.approx(compaction)


def test_session_goes_on_once_after_a_pause(server: ReplayServer, store: SessionStore) -> None:
    """A provider that pauses again: the turn ends after the second request (the paused
    answer is the turn's), never a loop of requests."""
    server.add(Scripted(body=PAUSED), Scripted(body=PAUSED), Scripted(body=ANSWER))
    session = chat(store, plain_anthropic(server))
    session.append(history()[:3])
    turn = session.send("Go on.")
    assert len(server.requests) == 2
    assert turn.reply.stop_reason is StopReason.COMPACTION

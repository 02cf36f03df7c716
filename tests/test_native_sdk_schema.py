"""Native compaction checked against the official SDKs' own types and stream accumulators.

Three layers. The schema layer itself (tests/sdk_schema.py): it reads each endpoint with its
SDK type and catches a misnamed field in a request or an answer of a test double. The
requests the adapters send for native compaction, each checked by that layer (this module is
marked `sdk_schema`): compaction on demand without what only shapes a reply, streamed past the
SDK's non-streaming limit, context editing beside a signed block, OpenAI's compacted window
sent back whole. And the proxy end to end: the official SDKs (`anthropic.Anthropic`,
`openai.OpenAI`) pointed at the proxy in front of a replay upstream reassemble every
compaction block and item exactly as the upstream sent it, in its order, whole and streamed
(`.beta.messages.stream(...).get_final_message()`, `.responses.stream(...)
.get_final_response()`), and every answer and event the proxy writes is the SDK's model.

Bodies: tests/data/native-compaction.json, each citing where it came from (Anthropic's
compaction pages, OpenAI's compaction guide, openai/codex's compact_remote_v2.rs, the SDKs'
types); streamed as the APIs stream them (tests/native_streams.py).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anthropic
import openai
import pytest

from chatcli.chat.session import ChatSession
from chatcli.client import Client
from chatcli.messages import Message, Usage
from chatcli.providers.anthropic import Anthropic
from chatcli.providers.base import NativeCompaction, Request, ToolSpec
from chatcli.providers.openai import OpenAI
from chatcli.request_settings import Settings
from chatcli.store import SessionStore
from tests.native_streams import anthropic_events, openai_events
from tests.proxy_harness import running_proxy, upstream_at
from tests.replay import ReplayServer, Scripted, adapters_closed
from tests.sdk_schema import (
    SCHEMAS,
    SchemaError,
    check_answer,
    check_event,
    check_requests,
    request_type,
)

pytestmark = [
    pytest.mark.sdk_schema,
    pytest.mark.skipif(not SCHEMAS, reason="these SDKs have no compaction types (the floors)"),
]

DATA = json.loads((Path(__file__).parent / "data" / "native-compaction.json").read_text())
KEY = "sk-ant-test-0123456789abcdef"
MODEL = "claude-sonnet-4-6"
OPENAI_MODEL = "gpt-5.1-codex"
ENV = {"ANTHROPIC_API_KEY": KEY, "OPENAI_API_KEY": KEY, "CHATCLI_HOME": "/nonexistent"}
ON_DEMAND = DATA["anthropic_on_demand_full"]
THRESHOLD = DATA["anthropic_threshold_full"]
SIGNED = ON_DEMAND["content"][0]
TEXT_ONLY = {**DATA["anthropic_message"], "content": DATA["anthropic_message"]["content"][1:]}


@pytest.fixture(autouse=True)
async def _adapters_closed() -> Any:
    async with adapters_closed():
        yield


def history() -> tuple[Message, ...]:
    return (
        Message.system("You help with Python."),
        Message.user("Build me a price scraper."),
        Message.assistant("Done with the parser."),
        Message.user("Go on."),
    )


def anthropic_adapter(server: ReplayServer, **native: Any) -> Anthropic:
    given = NativeCompaction(**native) if native else None
    return Anthropic(
        MODEL,
        api_key=KEY,
        base_url=server.url,
        max_output_tokens=64_000,
        native_compaction=given,
    )


# -- the layer --------------------------------------------------------------------------------


def test_each_endpoint_is_read_with_its_sdk_type() -> None:
    assert request_type("/v1/messages", stream=False).__module__ == (
        "anthropic.types.message_create_params"
    )
    beta = request_type("/v1/messages", stream=True, beta=True)
    assert (beta.__module__, beta.__name__) == (
        "anthropic.types.beta.message_create_params",
        "MessageCreateParamsStreaming",
    )
    assert request_type("/v1/messages/count_tokens", stream=False, beta=True).__name__ == (
        "MessageCountTokensParams"
    )
    assert request_type("/v1/responses", stream=False).__name__ == (
        "ResponseCreateParamsNonStreaming"
    )
    assert request_type("/v1/responses/compact", stream=False).__name__ == "ResponseCompactParams"
    assert request_type("/v1/chat/completions", stream=True).__name__ == (
        "CompletionCreateParamsStreaming"
    )
    assert request_type("/v1/models", stream=False) is None


# A field each test double misnames, and where the layer finds it.
MISNAMED = [
    pytest.param(
        "anthropic",
        {"stop_sequence": ["END"]},
        ".stop_sequence",
        id="anthropic-top-level",
    ),
    pytest.param(
        "anthropic",
        {"messages": [{"role": "assistant", "content": [{**SIGNED, "signatur": "x"}]}]},
        ".messages[0].content[0].signatur",
        id="anthropic-inside-a-compaction-block",
    ),
    pytest.param(
        "responses",
        {"context_management": [{"type": "compaction", "compaction_threshold": 9}]},
        ".context_management[0].compaction_threshold",
        id="openai-inside-context-management",
    ),
]


@pytest.mark.parametrize(("api", "fields", "where"), MISNAMED)
def test_a_misnamed_request_field_is_caught(
    server: ReplayServer, api: str, fields: dict[str, Any], where: str
) -> None:
    """A test double sends, through the official SDK, one field under a wrong name: the layer
    names it; the same request without it passes (the check is not vacuous)."""
    server.add(*[Scripted(body=TEXT_ONLY if api == "anthropic" else DATA["openai_response"])] * 2)
    for extra in (fields, {}):
        if api == "anthropic":
            client: Any = anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=0)
            messages = fields.get("messages", [{"role": "user", "content": "hi"}])
            body = {k: v for k, v in extra.items() if k != "messages"}
            client.beta.messages.create(
                model=MODEL,
                max_tokens=50,
                messages=messages if extra else [{"role": "user", "content": "hi"}],
                betas=["compact-2026-09-04"],
                extra_body=body,
            )
        else:
            client = openai.OpenAI(api_key=KEY, base_url=server.url + "/v1", max_retries=0)
            client.responses.create(model=OPENAI_MODEL, input="hi", extra_body=extra)
        client.close()
    wrong, right = server.requests
    with pytest.raises(SchemaError, match=re.escape(f"{where} (no such field)")):
        check_requests([wrong])
    check_requests([right])
    server.requests.clear()  # seen failing above: not for the module's own check


def test_a_misnamed_answer_field_is_caught() -> None:
    """An upstream test double's answer with a misnamed field fails the SDK's model; the
    bodies this module's upstream answers with pass."""
    misnamed = {**SIGNED, "signatur": SIGNED["signature"]}
    with pytest.raises(SchemaError, match=r"content\[0\]\.signatur"):
        check_answer("anthropic", {**ON_DEMAND, "content": [misnamed]})
    check_answer("anthropic", ON_DEMAND)
    trigger = DATA["openai_trigger_response"]
    item = {**trigger["output"][0], "encrypted_contents": "x"}
    with pytest.raises(SchemaError, match=r"output\[0\]\.encrypted_contents"):
        check_answer("responses", {**trigger, "output": [item]})
    delta = {"type": "compaction_delta", "content": "s", "encrypted": None}
    with pytest.raises(SchemaError, match=r"delta\.encrypted"):
        check_event("anthropic-event", {"type": "content_block_delta", "index": 0, "delta": delta})
    check_answer("responses", DATA["openai_trigger_response"])
    check_answer("compacted", DATA["openai_compacted_retained"])


# -- what the adapters send ---------------------------------------------------------------


def test_compaction_on_demand_drops_what_only_shapes_a_reply(server: ReplayServer) -> None:
    """Compaction on demand refuses `stop_sequences`, a `tool_choice` of any/tool and
    `output_config.format` (the anthropic SDK's runner drops the same): none is sent, what
    else the request sets is."""
    server.add(Scripted(body=ON_DEMAND), Scripted(body=ON_DEMAND))
    settings = Settings(
        stop=("END",),
        tool_choice="required",
        response_format={"type": "object", "properties": {}},
        reasoning_effort="high",
    )
    tool = ToolSpec(name="get_weather", parameters={"type": "object", "properties": {}})
    provider = anthropic_adapter(server, clear_tool_uses=True)
    asked = Request(messages=history(), tools=(tool,), settings=settings, max_tokens=1000)
    done = provider.compact_on_demand(asked)
    body = server.requests[0].json()
    assert body["compaction"] == {"type": "summarize"}
    assert body["output_config"] == {"effort": "high"}
    for refused in ("stop_sequences", "tool_choice", "context_management"):
        assert refused not in body
    assert body["tools"][0]["name"] == "get_weather"
    assert server.requests[0].headers["anthropic-beta"] == "compact-2026-09-04"
    assert done.window[0].compaction is not None
    assert done.window[0].compaction.provider_details == SIGNED
    auto = Request(messages=history(), tools=(tool,), settings=Settings(tool_choice="auto"))
    provider.compact_on_demand(auto)
    assert server.requests[1].json()["tool_choice"] == {"type": "auto"}  # it takes that one


def test_compaction_on_demand_streams_past_the_sdks_limit(server: ReplayServer) -> None:
    """The anthropic SDK refuses a whole request it expects to take over 10 minutes (a
    ValueError before any byte is sent); compaction on demand asking more than that is
    streamed and folded, its block whole and as it came."""
    sdk = anthropic.Anthropic(api_key=KEY, base_url=server.url, max_retries=0)
    with pytest.raises(ValueError, match="Streaming is required"):
        sdk.beta.messages.create(model=MODEL, max_tokens=64_000, messages=[], betas=[])
    sdk.close()
    assert server.requests == []
    server.add(Scripted(events=anthropic_events(ON_DEMAND)))
    done = anthropic_adapter(server).compact_on_demand(
        Request(messages=history(), max_tokens=64_000)
    )
    assert server.requests[0].json()["stream"] is True
    (anchor,) = done.window
    assert anchor.compaction is not None and anchor.compaction.provider_details == SIGNED
    assert done.usage == Usage(input_tokens=144, output_tokens=276)


@pytest.mark.parametrize("stream", [False, True])
def test_a_signed_block_goes_first_with_context_editing_kept(
    server: ReplayServer, stream: bool
) -> None:
    """A conversation carrying the signed block (every field of it) sends it first, as it
    came, with the on-demand beta; the compaction edit is left out (none beside such a block,
    the SDK says) but context editing the adapter was asked for stays."""
    server.add(Scripted(body=ON_DEMAND))
    provider = anthropic_adapter(server, clear_tool_uses=True, trigger_tokens=100_000)
    window = provider.compact_on_demand(Request(messages=history())).window
    server.add(Scripted(events=anthropic_events(TEXT_ONLY)) if stream else Scripted(body=TEXT_ONLY))
    client = Client(provider)
    conversation = (history()[0], *window, Message.user("Now Ingredient."))
    reply = list(client.stream(conversation))[-1] if stream else client.send(conversation)
    assert reply.message.text == TEXT_ONLY["content"][0]["text"]
    sent = server.requests[1]
    beta = "compact-2026-09-04,context-management-2025-06-27"
    assert sent.headers["anthropic-beta"] == beta
    body = sent.json()
    assert body["messages"][0] == {"role": "assistant", "content": [SIGNED]}
    assert body["context_management"] == {"edits": [{"type": "clear_tool_uses_20250919"}]}


def test_openais_compacted_window_is_sent_back_as_it_came(server: ReplayServer) -> None:
    """`/responses/compact` kept a user message with an image: the next request sends that
    item and the compaction item as OpenAI returned them, in their order."""
    compacted = DATA["openai_compacted_retained"]
    server.add(Scripted(body=compacted), Scripted(body=DATA["openai_response"]))
    provider = OpenAI(OPENAI_MODEL, api="responses", api_key=KEY, base_url=server.url + "/v1")
    done = provider.compact_on_demand(Request(messages=history()))
    kept, anchor = done.window
    assert kept.text == compacted["output"][0]["content"][0]["text"]
    assert anchor.compaction is not None and anchor.compaction.keeps == 1
    Client(provider).send((*history(), *done.window, Message.user("Next?")))
    items = server.requests[1].json()["input"]
    assert items[1:3] == compacted["output"]
    assert items[3] == {"role": "user", "content": "Next?"}


@pytest.mark.parametrize("made_by", ["on demand", "threshold"])
def test_the_store_keeps_the_block_as_it_came(
    server: ReplayServer, tmp_path: Path, made_by: str
) -> None:
    """A chat session's block (every field) is stored as Anthropic sent it: a reopened session
    sends it first, unchanged."""
    made = ON_DEMAND if made_by == "on demand" else THRESHOLD
    server.add(Scripted(body=made), Scripted(body=TEXT_ONLY))
    with SessionStore(tmp_path / "s.db") as store:
        provider = Anthropic(MODEL, api_key=KEY, base_url=server.url, context_window=200_000)
        session = ChatSession.open(store, provider, provider_name="anthropic", model=MODEL)
        session.append(history()[1:])
        if made_by == "on demand":
            assert session.compact() is None  # the provider's: compaction on demand
        else:
            session.send("And rate limiting?")
        reopened = ChatSession.open(
            store, provider, provider_name="anthropic", model=MODEL, resume=session.info.id
        )
        parts = [m.compaction for m in reopened.working_messages() if m.compaction]
        assert [p.provider_details for p in parts if p] == [made["content"][0]]
        reopened.send("Now Ingredient.")
    assert server.requests[-1].json()["messages"][0]["content"][0] == made["content"][0]


# -- through the proxy ----------------------------------------------------------------------


@pytest.fixture
def anthropic_proxy(server: ReplayServer) -> Iterator[str]:
    """The proxy in front of Anthropic (the replay server)."""
    with running_proxy(upstream_at("anthropic", server.url, model=MODEL, environ=ENV)) as url:
        yield url


@pytest.fixture
def openai_proxy(server: ReplayServer) -> Iterator[str]:
    """The proxy in front of OpenAI (the replay server) with a model that compacts."""
    up = upstream_at("openai", server.url + "/v1", model=OPENAI_MODEL, environ=ENV)
    assert up.native is not None
    with running_proxy(up) as url:
        yield url


@pytest.fixture
def anthropic_sdk(anthropic_proxy: str) -> Iterator[anthropic.Anthropic]:
    client = anthropic.Anthropic(api_key="client-key", base_url=anthropic_proxy, max_retries=0)
    yield client
    client.close()


@pytest.fixture
def openai_sdk(openai_proxy: str) -> Iterator[openai.OpenAI]:
    client = openai.OpenAI(api_key="client-key", base_url=openai_proxy + "/v1", max_retries=0)
    yield client
    client.close()


def anthropic_answer(
    sdk: anthropic.Anthropic, server: ReplayServer, upstream: dict[str, Any], **asked: Any
) -> list[dict[str, Any]]:
    """The proxy's answer to `asked`, the upstream answering `upstream` (streamed when
    `asked["stream"]`), read by the SDK: whole, its content; streamed, the content the SDK's
    accumulator rebuilt, after a second request whose raw events are each the SDK's model."""
    if not asked.pop("stream"):
        server.add(Scripted(body=upstream))
        raw = sdk.beta.messages.with_raw_response.create(**asked)
        check_answer("anthropic", raw.http_response.json())
        return [block.to_dict() for block in raw.parse().content]
    server.add(*[Scripted(events=anthropic_events(upstream))] * 2)
    with sdk.beta.messages.stream(**asked) as events:
        final = events.get_final_message()
    for event in sdk.beta.messages.create(**asked, stream=True):
        check_event("anthropic-event", event.to_dict())
    return [block.to_dict() for block in final.content]


def asked_of(stream: bool, **fields: Any) -> dict[str, Any]:
    messages = [{"role": "user", "content": "Design a recipe app."}]
    return {"model": MODEL, "max_tokens": 1000, "messages": messages, "stream": stream, **fields}


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_threshold_block_reaches_the_sdk_as_it_came(
    server: ReplayServer, anthropic_sdk: anthropic.Anthropic, stream: bool
) -> None:
    """A threshold compaction (the block, `encrypted_content` and all, then the text): the
    SDK reassembles both blocks in the upstream's order, the block exactly as it came."""
    edit = {"edits": [{"type": "compact_20260112"}]}
    asked = asked_of(stream, betas=["compact-2026-01-12"], context_management=edit)
    content = anthropic_answer(anthropic_sdk, server, THRESHOLD, **asked)
    assert content == THRESHOLD["content"]
    assert server.requests[0].json()["context_management"] == edit


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_signed_block_reaches_the_sdk_and_goes_back_first(
    server: ReplayServer, anthropic_sdk: anthropic.Anthropic, stream: bool
) -> None:
    """Compaction on demand through the proxy: the signed block (signature, encrypted
    content, tool changes) reaches the SDK as Anthropic sent it; the client's next request,
    the block first, reaches Anthropic with the block first and as it came."""
    asked = asked_of(stream, betas=["compact-2026-09-04"], compaction={"type": "summarize"})
    content = anthropic_answer(anthropic_sdk, server, ON_DEMAND, **asked)
    assert content == [SIGNED]
    assert server.requests[0].json()["compaction"] == {"type": "summarize"}
    server.add(Scripted(body=TEXT_ONLY))
    turns = [{"role": "assistant", "content": content}, {"role": "user", "content": "Now?"}]
    anthropic_sdk.beta.messages.create(
        model=MODEL, max_tokens=1000, messages=turns, betas=["compact-2026-09-04"]
    )
    sent = server.requests[-1]
    assert sent.json()["messages"] == turns
    assert sent.headers["anthropic-beta"] == "compact-2026-09-04"


def responses_output(
    sdk: openai.OpenAI, server: ReplayServer, upstream: dict[str, Any], **asked: Any
) -> list[dict[str, Any]]:
    """The proxy's `Response.output` for `asked`, as `anthropic_answer` reads it (the
    streamed one rebuilt by the SDK's `responses.stream()`)."""
    if not asked.pop("stream"):
        server.add(Scripted(body=upstream))
        raw = sdk.responses.with_raw_response.create(**asked)
        check_answer("responses", raw.http_response.json())
        return [item.to_dict() for item in raw.parse().output]
    server.add(*[Scripted(events=openai_events(upstream))] * 2)
    with sdk.responses.stream(**asked) as events:
        final = events.get_final_response()
    for event in sdk.responses.create(**asked, stream=True):
        check_event("responses-event", event.to_dict())
    return [item.to_dict() for item in final.output]


@pytest.mark.parametrize("stream", [False, True])
def test_openai_item_comes_first_and_as_it_came(
    server: ReplayServer, openai_sdk: openai.OpenAI, stream: bool
) -> None:
    """`context_management` passed to OpenAI: the SDK rebuilds the answer's output with
    OpenAI's compaction item first, exactly as it came, then the reply (OpenAI lets a client
    drop what comes before the latest item, so an item after the reply would drop it)."""
    upstream = DATA["openai_response"]
    management = [{"type": "compaction", "compact_threshold": 150_000}]
    asked = {"model": OPENAI_MODEL, "input": "Go on.", "stream": stream}
    output = responses_output(
        openai_sdk, server, upstream, **asked, extra_body={"context_management": management}
    )
    assert [item["type"] for item in output] == ["compaction", "message"]
    assert output[0] == upstream["output"][0]
    assert output[1]["content"][0]["text"] == upstream["output"][1]["content"][0]["text"]
    assert server.requests[0].json()["context_management"] == management


@pytest.mark.parametrize("stream", [False, True])
def test_a_forwarded_compaction_trigger_reaches_the_sdk_as_openai_sent_it(
    server: ReplayServer, openai_sdk: openai.OpenAI, stream: bool
) -> None:
    """A `compaction_trigger` request (as Codex's remote compaction sends it) in front of
    OpenAI: the SDK rebuilds OpenAI's one compaction item, as it came."""
    upstream = DATA["openai_trigger_response"]
    given = [{"role": "user", "content": "Build me a price scraper."}]
    asked = {"model": OPENAI_MODEL, "input": [*given, {"type": "compaction_trigger"}]}
    output = responses_output(openai_sdk, server, upstream, **asked, stream=stream)
    assert output == upstream["output"]
    assert server.requests[0].json()["input"] == asked["input"]


def test_openai_compact_reaches_the_sdk_as_openai_sent_it(
    server: ReplayServer, openai_sdk: openai.OpenAI
) -> None:
    """`/responses/compact` in front of OpenAI: its output, a retained user message with an
    image then the item, is passed on as OpenAI sent it (no pruning)."""
    compacted = DATA["openai_compacted_retained"]
    server.add(Scripted(body=compacted))
    raw = openai_sdk.responses.with_raw_response.compact(model=OPENAI_MODEL, input="Compact.")
    body = json.loads(raw.text)
    assert body == compacted
    check_answer("compacted", body)
    assert raw.parse().output[-1].type == "compaction"

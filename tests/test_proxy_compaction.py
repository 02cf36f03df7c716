"""Responses compaction through the proxy for a non-OpenAI upstream (`chatcli.proxy.compaction`):
the official `openai` SDK's `responses.compact`, a `compaction_trigger` request and the next
request carrying the compaction item, against the proxy in front of a replay server playing
recorded Chat Completions bodies (the summary the upstream writes is scripted, so the test can
see it come back expanded in what the upstream is sent), and a token sealed with another key.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import openai
import pytest
from openai.types.responses import ResponseStreamEvent
from pydantic import TypeAdapter

from chatcli.compaction import SUMMARY_HEADER, SUMMARY_SECTIONS
from chatcli.compaction.prompt import summary_turn
from chatcli.providers.counting import counter_for, prompt_tokens
from chatcli.proxy.app import ProxyOptions
from chatcli.proxy.compaction import TOKEN_PREFIX, Sealed, Sealer, compaction_item
from chatcli.proxy.keys import DEFAULT_TTL_S, SealingConfig, configured_key, generated_key
from chatcli.proxy.sessions import SessionRecorder
from chatcli.store import SessionStore
from chatcli.wire.responses import ResponsesDialect
from tests import test_proxy_wire as wire
from tests.proxy_harness import running_proxy, upstream_at
from tests.recorded import DATA, sse_events
from tests.replay import ReplayServer, Scripted
from tests.test_openai_adapter import CHAT_TEXT
from tests.test_proxy_wire import an, oa

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

upstream, openai_proxy, _close_clients = wire.upstream, wire.openai_proxy, wire._close_clients

EVENTS: TypeAdapter[Any] = TypeAdapter(ResponseStreamEvent)
OLD = "The payment module migration starts with the ledger tables and their indexes. " * 12


def conversation() -> list[dict[str, Any]]:
    """Four user turns: the first two long (what compaction summarises), the last two kept."""
    developer = [{"type": "input_text", "text": "Dev."}]
    items: list[dict[str, Any]] = [{"type": "message", "role": "developer", "content": developer}]
    for i in range(4):
        text = f"Turn {i}. {OLD}" if i < 2 else f"Turn {i}: what next?"
        items.append({"role": "user", "content": text})
        items.append({"role": "assistant", "content": f"Noted turn {i}. {OLD if i < 2 else ''}"})
    return items


def summary_body() -> dict[str, Any]:
    """A recorded Chat Completions body whose text is a handoff summary of `conversation`."""
    text = "\n".join(
        f"## {section}\nThe payment module migration: ledger tables and indexes."
        for section in SUMMARY_SECTIONS
    )
    body = copy.deepcopy(CHAT_TEXT)
    body["choices"][0]["message"]["content"] = text
    return body


def sent_texts(server: ReplayServer) -> list[str]:
    """The message texts of the last request the upstream was sent."""
    return [str(m.get("content")) for m in server.requests[-1].json()["messages"]]


def test_compact_returns_one_item_and_the_next_request_gets_the_summary(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    client = oa(openai_proxy)
    upstream.queue.append(Scripted(body=summary_body()))
    compacted = client.responses.compact(model="gpt-4o", input=conversation())  # type: ignore[arg-type]
    assert compacted.object == "response.compaction"
    kinds = [item.type for item in compacted.output]
    assert kinds.count("compaction") == 1 and kinds[-1] == "compaction"
    assert all(k == "message" for k in kinds[:-1])  # the user messages, then the item
    item = compacted.output[-1]
    assert item.encrypted_content.startswith(TOKEN_PREFIX)  # type: ignore[union-attr]
    summary_request = upstream.requests[-1].json()
    assert "handoff" in summary_request["messages"][0]["content"]  # chatcli's summary prompt

    upstream.queue.append(Scripted(body=CHAT_TEXT))
    output = [i.model_dump(exclude_none=True, warnings=False) for i in compacted.output]
    again = [conversation()[0], *output]  # the client's developer message, then the output
    again.append({"role": "user", "content": "Go on."})
    answer = client.responses.create(model="gpt-4o", input=again)  # type: ignore[arg-type]
    assert answer.output_text
    texts = sent_texts(upstream)
    assert texts[0] == "Dev."  # the developer message before the item is kept
    assert texts[1].startswith(SUMMARY_HEADER)  # the item, expanded into the summary
    assert "ledger tables and indexes" in texts[1]
    assert not any(t.startswith("Turn 0.") for t in texts)  # what it replaced is gone
    assert "Turn 3: what next?" in texts and texts[-1] == "Go on."  # the kept turns, then new


def test_a_compaction_trigger_streams_exactly_one_compaction_item(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.queue.append(Scripted(body=summary_body()))
    body = {"model": "gpt-4o", "input": [*conversation(), {"type": "compaction_trigger"}]}
    stream = oa(openai_proxy).responses.create(**body, stream=True)  # type: ignore[call-overload]
    events = [EVENTS.validate_python(e.model_dump()) for e in stream]
    done = events[-1]
    assert done.type == "response.completed"
    output = done.response.output
    assert [i.type for i in output] == ["compaction"]
    added = [e.item.type for e in events if e.type == "response.output_item.done"]
    assert added == ["compaction"]
    assert len(upstream.requests) == 1  # the summary call alone: no chat turn


def test_context_management_over_the_threshold_compacts_before_answering(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.queue.extend([Scripted(body=summary_body()), Scripted(body=CHAT_TEXT)])
    response = oa(openai_proxy).responses.create(
        model="gpt-4o",
        input=conversation(),  # type: ignore[arg-type]
        extra_body={"context_management": [{"type": "compaction", "compact_threshold": 100}]},
    )
    assert [i.type for i in response.output] == ["compaction", "message"]
    texts = sent_texts(upstream)
    assert any(t.startswith(SUMMARY_HEADER) for t in texts)
    assert not any(t.startswith("Turn 0.") for t in texts)


def test_context_management_under_the_threshold_changes_nothing(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.queue.append(Scripted(body=CHAT_TEXT))
    response = oa(openai_proxy).responses.create(
        model="gpt-4o",
        input=conversation(),  # type: ignore[arg-type]
        extra_body={"context_management": [{"type": "compaction", "compact_threshold": 10**6}]},
    )
    assert [i.type for i in response.output] == ["message"]
    assert len(upstream.requests) == 1
    assert any(t.startswith("Turn 0.") for t in sent_texts(upstream))


def test_the_threshold_counts_the_tool_definitions_as_pre_flight_does(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    """The conversation alone is under the threshold; with the tools it offers it is over, as
    the pre-flight counts a prompt (`prompt_tokens`): it is compacted first."""
    tools = [
        {"type": "function", "name": f"tool_{i}", "description": "Reads a file. " * 60}
        for i in range(8)
    ]
    parsed = ResponsesDialect().parse({"model": "gpt-4o", "input": conversation(), "tools": tools})
    counter = counter_for(fixture_provider())
    alone = prompt_tokens(counter, parsed.messages)
    assert prompt_tokens(counter, parsed.messages, parsed.tools) > alone + 1000
    upstream.queue.extend([Scripted(body=summary_body()), Scripted(body=CHAT_TEXT)])
    response = oa(openai_proxy).responses.create(
        model="gpt-4o",
        input=conversation(),  # type: ignore[arg-type]
        tools=tools,  # type: ignore[arg-type]
        extra_body={
            "context_management": [{"type": "compaction", "compact_threshold": alone + 500}]
        },
    )
    assert [i.type for i in response.output] == ["compaction", "message"]
    assert any(t.startswith(SUMMARY_HEADER) for t in sent_texts(upstream))


def fixture_provider() -> Any:
    """The upstream the `openai_proxy` fixture opens (its counter: tiktoken for gpt-4o)."""
    env = {"OPENAI_API_KEY": wire.UPSTREAM_KEY, "CHATCLI_HOME": "/nonexistent"}
    return upstream_at("openai", "http://127.0.0.1:9/v1", model="gpt-4o", environ=env).provider


@pytest.mark.parametrize(
    ("token", "cause"),
    [
        ("another key", "wrong key"),
        ("an earlier format", "wrong format"),
        ("openai", "not made by chatcli"),
    ],
)
def test_a_token_that_fails_the_check_is_a_400_naming_why(
    upstream: ReplayServer, openai_proxy: str, token: str, cause: str
) -> None:
    sealed = Sealer([generated_key()], ttl=DEFAULT_TTL_S).seal(Sealed(summary="Secret summary."))
    content = {
        "another key": sealed,
        "an earlier format": "chatcli.c1.eyJzdW1tYXJ5IjoiIn0.bWFj",
        "openai": "gAAAAABpZ-opaque-openai-compaction",
    }[token]
    items = [*conversation(), {**compaction_item(content)}, {"role": "user", "content": "Hi."}]
    with pytest.raises(openai.BadRequestError) as caught:
        oa(openai_proxy).responses.create(model="gpt-4o", input=items)  # type: ignore[arg-type]
    assert caught.value.status_code == 400
    error = caught.value.body
    assert isinstance(error, dict) and error["type"] == "invalid_request_error"
    assert cause in error["message"] and error["param"] == "input[9].encrypted_content"
    assert upstream.requests == []  # nothing was sent on


def altered(token: str) -> str:
    """`token` with one character of its ciphertext changed (its middle)."""
    at = len(token) * 2 // 3
    return token[:at] + ("B" if token[at] == "A" else "A") + token[at + 1 :]


def test_an_item_of_this_proxy_altered_or_expired_is_a_400_naming_why(
    upstream: ReplayServer,
) -> None:
    """With a configured secret the test can date an item: one made 31 days ago (items are
    opened for 30), and one of this proxy's own items altered."""
    secret = "s" * 40
    env = {"OPENAI_API_KEY": wire.UPSTREAM_KEY, "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai", upstream.url + "/v1", model="gpt-4o", environ=env)
    options = ProxyOptions(sealing=SealingConfig(secrets=(secret,), ttl=30 * 86400.0))
    upstream.queue.append(Scripted(body=summary_body()))
    old = Sealer([configured_key(secret)], ttl=30 * 86400.0, clock=lambda: time.time() - 31 * 86400)
    with running_proxy(up, options=options) as url:
        made = oa(url).responses.compact(model="gpt-4o", input=conversation())  # type: ignore[arg-type]
        token = made.output[-1].encrypted_content  # type: ignore[union-attr]
        for content, cause in [
            (altered(token), "altered"),
            (old.seal(Sealed(summary="Long ago.")), "expired: it was made 31.0 days ago"),
        ]:
            items = [compaction_item(content), {"role": "user", "content": "Hi."}]
            with pytest.raises(openai.BadRequestError) as caught:
                oa(url).responses.create(model="gpt-4o", input=items)  # type: ignore[arg-type]
            assert cause in str(caught.value.body)
    assert len(upstream.requests) == 1  # the summary call: nothing refused was sent on


def test_a_token_opens_on_another_replica_and_after_a_restart(
    upstream: ReplayServer, tmp_path: Path
) -> None:
    """The key is the store's: a second replica on the same store, and a proxy started anew
    on it, open the token the first one made; a proxy on another store refuses it."""
    upstream.queue.append(Scripted(body=summary_body()))
    with store_proxy(tmp_path / "db", upstream) as first:
        compacted = oa(first).responses.compact(model="gpt-4o", input=conversation())  # type: ignore[arg-type]
        item = compacted.output[-1].model_dump(exclude_none=True)
        with store_proxy(tmp_path / "db", upstream) as replica:
            upstream.queue.append(Scripted(body=CHAT_TEXT))
            asked = [item, {"role": "user", "content": "Go on."}]
            assert oa(replica).responses.create(model="gpt-4o", input=asked).output_text  # type: ignore[arg-type]
            assert sent_texts(upstream)[0].startswith(SUMMARY_HEADER)
    with store_proxy(tmp_path / "db", upstream) as restarted:
        upstream.queue.append(Scripted(body=CHAT_TEXT))
        assert oa(restarted).responses.create(model="gpt-4o", input=asked).output_text  # type: ignore[arg-type]
    with (
        store_proxy(tmp_path / "other", upstream) as stranger,
        pytest.raises(openai.BadRequestError),
    ):
        oa(stranger).responses.create(model="gpt-4o", input=asked)  # type: ignore[arg-type]


@contextmanager
def store_proxy(location: Path, server: ReplayServer) -> Iterator[str]:
    """A proxy in front of `server` recording into the store at `location`."""
    recorder = SessionRecorder(SessionStore(location), upstream="openai test")
    env = {"OPENAI_API_KEY": wire.UPSTREAM_KEY, "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai", server.url + "/v1", model="gpt-4o", environ=env)
    with running_proxy(up, options=ProxyOptions(sessions=recorder)) as url:
        yield url


def test_an_anthropic_compaction_block_is_expanded_for_another_upstream(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    """Anthropic's recorded answer with a compaction block (tests/data/native-compaction.json),
    sent back by an Anthropic client after earlier turns, in front of an OpenAI upstream."""
    answer = json.loads((DATA / "native-compaction.json").read_text())["anthropic_message"]
    summary = answer["content"][0]["content"]
    messages = [
        {"role": "user", "content": f"Turn 0. {OLD}"},
        {"role": "assistant", "content": "Noted."},
        {"role": "user", "content": "Go on with the scraper."},
        {"role": "assistant", "content": answer["content"]},
        {"role": "user", "content": "And rate limiting?"},
    ]
    upstream.queue.append(Scripted(body=CHAT_TEXT))
    reply = an(openai_proxy).messages.create(
        model="claude-sonnet-4-6",
        max_tokens=100,
        system="Be brief.",
        messages=messages,  # type: ignore[arg-type]
    )
    assert reply.content
    sent = upstream.requests[-1].json()["messages"]
    assert [m["role"] for m in sent] == ["system", "user", "assistant", "user"]
    assert sent[1]["content"].startswith(SUMMARY_HEADER) and summary in sent[1]["content"]
    assert sent[2]["content"] == answer["content"][1]["text"]  # the rest of the block's turn
    assert sent[3]["content"] == "And rate limiting?"
    assert not any("Turn 0." in str(m["content"]) for m in sent)  # what it replaced is gone


COMPACT_EDIT: Any = {
    "edits": [{"type": "compact_20260112", "trigger": {"type": "input_tokens", "value": 100}}]
}


def anthropic_conversation() -> list[dict[str, Any]]:
    return [
        {"role": m["role"], "content": m["content"]}
        for m in conversation()[1:]  # the user and assistant turns
    ]


@pytest.mark.parametrize("stream", [False, True])
def test_the_anthropic_compaction_edit_is_served_for_another_upstream(
    upstream: ReplayServer, openai_proxy: str, stream: bool
) -> None:
    """The compaction edit (beta `compact-2026-01-12`) over its trigger: chatcli compacts, the
    answer begins with a `compaction` block (the anthropic SDK's `BetaCompactionBlock`), and
    sending it back is the summary again."""
    answer = Scripted(events=[data for _, data in sse_events("openai-chat-text.txt")])
    upstream.queue.extend(
        [Scripted(body=summary_body()), answer if stream else Scripted(body=CHAT_TEXT)]
    )
    asked: Any = {
        "model": "claude-sonnet-4-6",
        "max_tokens": 100,
        "messages": anthropic_conversation(),
        "betas": ["compact-2026-01-12"],
        "context_management": COMPACT_EDIT,
    }
    beta = an(openai_proxy).beta.messages
    if stream:
        with beta.stream(**asked) as events:
            reply = events.get_final_message()
    else:
        reply = beta.create(**asked)
    assert [b.type for b in reply.content] == ["compaction", "text"]
    block = reply.content[0]
    assert block.content and block.content.startswith(SUMMARY_HEADER)  # type: ignore[union-attr]
    assert "Turn 3: what next?" in block.content  # type: ignore[union-attr]  # the kept turns
    sent = sent_texts(upstream)
    assert len(sent) == 1 and sent[0].startswith(SUMMARY_HEADER)  # the summary, not the turns

    upstream.queue.append(Scripted(body=CHAT_TEXT))
    again = [
        *anthropic_conversation(),
        {"role": "assistant", "content": [reply.content[0].model_dump(exclude_none=True)]},
        {"role": "user", "content": "Go on."},
    ]
    an(openai_proxy).messages.create(model="claude-sonnet-4-6", max_tokens=100, messages=again)  # type: ignore[arg-type]
    sent = sent_texts(upstream)
    assert sent[0].startswith(SUMMARY_HEADER) and "Turn 3: what next?" in sent[0]
    assert sent[1:] == ["Go on."]  # the block's turn held nothing else
    assert not any(t.startswith("Turn 0.") for t in sent)


@pytest.mark.parametrize(
    ("item", "field"),
    [
        ({"type": "compaction"}, "encrypted_content"),
        ({"type": "compaction", "encrypted_content": 7}, "encrypted_content"),
    ],
)
def test_a_malformed_compaction_item_is_a_400_naming_its_field(
    upstream: ReplayServer, openai_proxy: str, item: dict[str, Any], field: str
) -> None:
    with pytest.raises(openai.BadRequestError) as caught:
        oa(openai_proxy).responses.create(
            model="gpt-4o", input=[item, {"role": "user", "content": "Hi."}]
        )  # type: ignore[list-item]
    assert field in str(caught.value) and upstream.requests == []


def test_a_compaction_continues_the_conversations_last_request_upstream(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    """The summary request repeats what the proxy sent upstream for the conversation's last
    request, byte for byte, then its answer and the summary turn: the upstream's prompt
    cache serves it (chatcli.compaction.warm)."""
    client = oa(openai_proxy)
    asked = conversation()[:-1]  # the developer message, then turns up to "Turn 3: what next?"
    upstream.queue.extend([Scripted(body=CHAT_TEXT), Scripted(body=summary_body())])
    answer = client.responses.create(model="gpt-4o", input=asked)  # type: ignore[arg-type]
    output = [i.model_dump(exclude_none=True, warnings=False) for i in answer.output]
    compacted = client.responses.compact(model="gpt-4o", input=[*asked, *output])  # type: ignore[arg-type]
    assert compacted.output[-1].type == "compaction"
    chat, summary = (r.json() for r in upstream.requests)
    opened = json.dumps(chat["messages"], separators=(",", ":"))[:-1].encode()  # no "]"
    assert opened in upstream.requests[1].body  # the very bytes the chat request was sent
    *_, said, turn = summary["messages"]
    assert said == {"role": "assistant", "content": answer.output_text}
    assert turn == {"role": "user", "content": summary_turn(None, structured=False).text}
    assert len(summary["messages"]) == len(chat["messages"]) + 2

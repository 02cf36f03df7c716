"""Live streaming through the proxy: an escalated answer reaches the client as one stream, its
continuation as the upstream sends it; a cut tool call is never forwarded; text the engine
had to drop ends the stream with the dialect's error.

The upstream plays real recorded streams (tests/data/sse) and can hold the rest of a stream
until the client has read a given delta (`Gate`): a delta the proxy held back would never
reach the client while the upstream waits, so the gate would time out.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
from collections import deque
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import anthropic
import httpx
import openai
import pytest

from chatcli.proxy.app import ProxyOptions
from tests.proxy_harness import running_proxy, upstream_at
from tests.recorded import sse_events
from tests.replay import serving

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

GATE_TIMEOUT_S = 10.0
WINDOW = 4096
# The escalation tests set max_tokens: the proxy is started to continue past it.
ESCALATING = ProxyOptions(escalate_past_client_limit=True)


class Gate:
    """A point in a scripted stream where the upstream waits until the client has read what
    was sent before it (`open`), or GATE_TIMEOUT_S has passed."""

    def __init__(self) -> None:
        self.event = threading.Event()
        self.opened_in_time: bool | None = None

    def open(self) -> None:
        self.event.set()

    def wait(self) -> None:
        self.opened_in_time = self.event.wait(GATE_TIMEOUT_S)


class Hold:
    """A point in a scripted stream where the upstream sends nothing more and waits for the
    proxy to close the connection (up to GATE_TIMEOUT_S), noting when it did."""

    def __init__(self) -> None:
        self.closed_at: float | None = None

    def wait_for_close(self, connection: socket.socket) -> None:
        connection.settimeout(GATE_TIMEOUT_S)
        with contextlib.suppress(OSError):
            while connection.recv(1024):  # b"": the peer closed its end
                pass
            self.closed_at = time.monotonic()


Event = tuple[str | None, str]


@dataclass(frozen=True, slots=True)
class GatedUpstream:
    """Streams each request the next scripted list of events (and gates); records bodies."""

    streams: deque[Sequence[Event | Gate | Hold]]
    bodies: list[Any]
    url: str


@pytest.fixture
def gated() -> Iterator[GatedUpstream]:
    streams: deque[Sequence[Event | Gate | Hold]] = deque()
    bodies: list[Any] = []

    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            bodies.append(json.loads(self.rfile.read(int(self.headers["content-length"]))))
            self.send_response(200)
            self.send_header("content-type", "text/event-stream")
            self.send_header("transfer-encoding", "chunked")
            self.end_headers()
            for item in streams.popleft():
                if isinstance(item, Gate):
                    item.wait()
                    continue
                if isinstance(item, Hold):
                    item.wait_for_close(self.connection)
                    return
                name, data = item
                chunk = (f"event: {name}\n" if name else "").encode() + f"data: {data}\n\n".encode()
                self.wfile.write(f"{len(chunk):x}\r\n".encode() + chunk + b"\r\n")
                self.wfile.flush()
            self.wfile.write(b"0\r\n\r\n")

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    with serving(server):
        yield GatedUpstream(streams, bodies, f"http://127.0.0.1:{server.server_address[1]}")


def gated_after(events: list[Event], marker: str, gate: Gate) -> list[Event | Gate]:
    """`events` with `gate` after the first event whose data holds `marker`."""
    at = next(i for i, (_, data) in enumerate(events) if marker in data) + 1
    return [*events[:at], gate, *events[at:]]


def openai_client(url: str) -> openai.OpenAI:
    return openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0, timeout=60)


def anthropic_client(url: str) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=url, api_key="k", max_retries=0, timeout=60)


def test_an_escalated_openai_answer_streams_its_continuation_live(gated: GatedUpstream) -> None:
    # Call 1 stops at max_tokens ("length"); the proxy escalates and the continuation streams.
    # The upstream holds the continuation after " unable" until the client has read it.
    gate = Gate()
    continuation = gated_after(sse_events("openai-chat-text.txt"), '" unable"', gate)
    gated.streams.extend([sse_events("openai-chat-length.txt"), continuation])
    env = {"OPENAI_API_KEY": "sk-up", "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai", gated.url + "/v1", model="gpt-4o", environ=env)
    with running_proxy(up, options=ESCALATING) as url, openai_client(url) as client:
        stream = client.chat.completions.create(
            model="gpt-4o",
            messages=[{"role": "user", "content": "Weather?"}],
            max_tokens=1,
            stream=True,
        )
        texts, roles, finishes = [], [], []
        for chunk in stream:
            delta = chunk.choices[0].delta if chunk.choices else None
            texts.append(delta.content or "" if delta else "")
            roles += [delta.role] if delta and delta.role else []
            finishes += [chunk.choices[0].finish_reason] if chunk.choices else []
            if "".join(texts).endswith(" unable"):
                gate.open()
    assert gate.opened_in_time is True  # the continuation's first tokens came live
    assert len(gated.bodies) == 2 and gated.bodies[1]["max_completion_tokens"] > 1
    text = "".join(texts)
    assert text.startswith("{\"I'm unable to provide real-time")
    assert roles == ["assistant"] and [f for f in finishes if f] == ["stop"]  # one answer


def test_an_escalated_anthropic_answer_is_one_stream_without_the_cut_tool_call(
    gated: GatedUpstream,
) -> None:
    # Call 1 (recorded) stops at max_tokens inside a tool call: its text streams, the cut
    # call must not reach the client. The continuation streams live, with its whole call.
    gate = Gate()
    continuation = gated_after(sse_events("anthropic-tool-use.txt"), "'ll check", gate)
    gated.streams.extend([sse_events("anthropic-max-tokens-tool-use.txt"), continuation])
    env = {"ANTHROPIC_API_KEY": "sk-up", "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("anthropic", gated.url, model="claude-sonnet-4-5", environ=env)
    tools = [{"name": "get_weather", "input_schema": {"type": "object"}}]
    with (
        running_proxy(up, options=ESCALATING) as url,
        anthropic_client(url) as client,
        client.messages.stream(
            model="claude",
            max_tokens=100,
            tools=tools,  # type: ignore[arg-type]
            messages=[{"role": "user", "content": "Tax guide, then the weather in Paris."}],
        ) as stream,
    ):
        text = ""
        for event in stream:
            if event.type == "text":
                text += event.text
                if "'ll check" in text:
                    gate.open()
        final = stream.get_final_message()
    assert gate.opened_in_time is True
    assert len(gated.bodies) == 2
    assert text.startswith("I'll create a comprehensive tax guide") and "Paris" in text
    kinds = [block.type for block in final.content]
    assert kinds == ["text", "tool_use"]  # one message: one text block, one (whole) call
    call = final.content[1]
    assert call.type == "tool_use" and (call.name, call.input) == (
        "get_weather",
        {"location": "Paris"},
    )
    assert final.stop_reason == "tool_use"


def silently_cut(events: list[Event]) -> list[Event]:
    """A recorded OpenAI stream whose usage says the prompt filled the window exactly: what
    a server that cut the prompt to fit (Ollama) reports; the answer is to a cut prompt."""
    out = []
    for name, data in events:
        if '"usage"' in data:
            body = json.loads(data)
            body["usage"] = {**body["usage"], "prompt_tokens": WINDOW}
            data = json.dumps(body)
        out.append((name, data))
    return out


def recorded_text(name: str) -> str:
    """The text of a recorded OpenAI stream."""
    chunks = [json.loads(data) for _, data in sse_events(name) if data != "[DONE]"]
    return "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks if c["choices"])


def long_chat(n: int = 31) -> list[dict[str, str]]:
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 200}
        for i in range(n)
    ]
    return [{"role": "system", "content": "be brief"}, *turns]


@pytest.fixture
def cutting_proxy(gated: GatedUpstream) -> Iterator[str]:
    """A proxy in front of an OpenAI-compatible server that answers a cut prompt twice."""
    gated.streams.extend([silently_cut(sse_events("openai-chat-text.txt"))] * 2)
    env = {"CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai-compatible", gated.url + "/v1", context_window=WINDOW, environ=env)
    with running_proxy(up) as url:
        yield url


def test_text_the_engine_drops_after_sending_ends_an_openai_stream_with_an_error(
    gated: GatedUpstream, cutting_proxy: str
) -> None:
    # The cut is only seen at the end of the answer (its usage), after its text streamed; the
    # engine would recover and answer again, but the client already has the first answer's
    # text: the stream stops with the error instead of appending a second answer.
    texts: list[str] = []
    with openai_client(cutting_proxy) as client:
        stream = client.chat.completions.create(model="m", messages=long_chat(), stream=True)  # type: ignore[arg-type]
        with pytest.raises(openai.APIError, match="cannot be taken back") as caught:
            for chunk in stream:
                texts.append(chunk.choices[0].delta.content or "" if chunk.choices else "")
    assert caught.value.type == "server_error"
    assert "".join(texts) == recorded_text("openai-chat-text.txt")
    assert len(gated.bodies) == 1  # the recovered call is not made for nothing


def test_text_the_engine_drops_after_sending_ends_an_anthropic_stream_with_an_error(
    gated: GatedUpstream, cutting_proxy: str
) -> None:
    with anthropic_client(cutting_proxy) as client:
        messages: Any = long_chat()[1:]
        stream = client.messages.stream(model="m", max_tokens=50, messages=messages)
        with (
            pytest.raises(anthropic.APIStatusError, match="cannot be taken back") as caught,
            stream as s,
        ):
            for _ in s:
                pass
    body = caught.value.body
    assert isinstance(body, dict) and body["error"]["type"] == "api_error"
    assert len(gated.bodies) == 1


def test_a_client_that_leaves_mid_answer_ends_the_upstream_request_at_once(
    gated: GatedUpstream,
) -> None:
    # The upstream sends the first words, then nothing, and waits for its connection to
    # close: the client reads those words and leaves; the proxy must cancel the upstream call
    # (close its connection) at once, not when the upstream would have answered.
    events = sse_events("openai-chat-text.txt")
    at = next(i for i, (_, data) in enumerate(events) if '" unable"' in data) + 1
    hold = Hold()
    gated.streams.append([*events[:at], hold])
    env = {"OPENAI_API_KEY": "sk-up", "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai", gated.url + "/v1", model="gpt-4o", environ=env)
    body = {
        "model": "gpt-4o",
        "messages": [{"role": "user", "content": "Weather?"}],
        "stream": True,
    }
    with running_proxy(up) as url:
        with httpx.stream("POST", url + "/v1/chat/completions", json=body, timeout=30) as answer:
            read = ""
            for text in answer.iter_text():
                read += text
                if " unable" in read:
                    break
        left = time.monotonic()
        deadline = left + GATE_TIMEOUT_S
        while hold.closed_at is None and time.monotonic() < deadline:
            time.sleep(0.02)
    assert hold.closed_at is not None, "the upstream request outlived its client"
    assert hold.closed_at - left < 1.0


def test_thinking_streams_live_before_the_text_with_its_signature(gated: GatedUpstream) -> None:
    # A client that asked for thinking (Claude Code does by default) gets the upstream's
    # thinking as it comes: the upstream holds the rest after the first thinking delta until
    # the client has read it. The blocks keep their order and signature.
    gate = Gate()
    gated.streams.append(gated_after(sse_events("anthropic-thinking.txt"), "step by step", gate))
    env = {"ANTHROPIC_API_KEY": "sk-up", "CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("anthropic", gated.url, model="claude-sonnet-4-5", environ=env)
    with (
        running_proxy(up) as url,
        anthropic_client(url) as client,
        client.messages.stream(
            model="claude",
            max_tokens=2000,
            messages=[{"role": "user", "content": "27 * 453?"}],
            extra_body={"thinking": {"type": "enabled", "budget_tokens": 1024}},
        ) as stream,
    ):
        for event in stream:
            if event.type == "thinking" and "step by step" in event.snapshot:
                gate.open()
        final = stream.get_final_message()
    assert gate.opened_in_time is True
    thinking, text = final.content
    assert thinking.type == "thinking" and thinking.signature.startswith("EqQBCgIYAhIM1gbc")
    assert thinking.thinking.endswith("10,800 + 1,350 + 81 = 12,231")
    assert text.type == "text" and text.text == "27 * 453 = 12,231"

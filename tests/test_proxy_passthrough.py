"""The proxy's fast path (`chatcli.proxy.passthrough`) on the wire: an OpenAI client's streamed
request in front of an OpenAI upstream (a replay server playing real recorded streams) goes
upstream as the client's own bytes and comes back as the upstream's own events; what the
library must judge (a "length" stop, a cut tool call, an overflow) ends as on the library's
path (`ProxyOptions(fast_path=False)`), with the same calls upstream and the same answer."""

from __future__ import annotations

import asyncio
import contextlib
import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from chatcli.errors import ProviderError
from chatcli.messages import Message
from chatcli.providers.base import Request, Response
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.proxy import passthrough
from chatcli.proxy.app import ProxyOptions
from chatcli.proxy.openai_dialect import OpenAIDialect
from chatcli.proxy.passthrough import FastPath, _judged, forwarded_body, passthrough_of
from chatcli.proxy.sessions import SessionRecorder
from chatcli.store import SessionStore
from tests.proxy_harness import running_proxy, upstream_at
from tests.recorded import provider_errors, replayed_error, sse_events
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_proxy_stream import GATE_TIMEOUT_S, Gate, GatedUpstream, gated, gated_after

ENV = {"OPENAI_API_KEY": "sk-upstream-SECRET", "CHATCLI_HOME": "/nonexistent"}
# pe-056: OpenAI's own overflow, stating a 4,097-token window.
OVERFLOW = next(r for r in provider_errors("openai") if r["id"] == "pe-056")
URL_PATH = "/v1/chat/completions"
__all__ = ["gated"]  # a fixture of tests/test_proxy_stream.py, used here


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


@contextmanager
def proxy(upstream: ReplayServer, *, fast: bool = True, **options: Any) -> Iterator[str]:
    up = upstream_at("openai", upstream.url + "/v1", model="gpt-4o", environ=ENV)
    with running_proxy(up, options=ProxyOptions(fast_path=fast, **options)) as url:
        yield url


def events(name: str) -> list[str]:
    return [data for _, data in sse_events(name)]


def wire(datas: list[str]) -> bytes:
    """Events as the replay server writes them."""
    return b"".join(f"data: {data}\n\n".encode() for data in datas)


def chat(n: int) -> list[dict[str, Any]]:
    turns = [
        {"role": "user" if i % 2 == 0 else "assistant", "content": f"message {i} " + "x" * 200}
        for i in range(n)
    ]
    return [{"role": "system", "content": "be brief"}, *turns]


def post(url: str, body: bytes) -> httpx.Response:
    headers = {"content-type": "application/json", "authorization": "Bearer k"}
    return httpx.post(url + URL_PATH, content=body, headers=headers, timeout=30)


def streamed(url: str, **request: Any) -> dict[str, Any]:
    """What the openai SDK makes of a streamed answer: text, roles, finish reasons, calls."""
    with openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as client:
        stream = client.chat.completions.create(model="gpt-4o", stream=True, **request)
        texts, roles, finishes = [], [], []
        calls: dict[int, dict[str, str]] = {}
        for chunk in stream:
            if not chunk.choices:
                continue
            choice = chunk.choices[0]
            texts.append(choice.delta.content or "")
            roles += [choice.delta.role] if choice.delta.role else []
            finishes += [choice.finish_reason] if choice.finish_reason else []
            for call in choice.delta.tool_calls or ():
                entry = calls.setdefault(call.index, {"id": "", "name": "", "arguments": ""})
                entry["id"] += call.id or ""
                entry["name"] += (call.function and call.function.name) or ""
                entry["arguments"] += (call.function and call.function.arguments) or ""
    return {"text": "".join(texts), "roles": roles, "finishes": finishes, "calls": calls}


# --- the body ------------------------------------------------------------------------------


def test_the_forwarded_body_is_the_clients_own_bytes(upstream: ReplayServer) -> None:
    # Odd spacing, unknown fields, a key order of its own: any re-encoding would show.
    body = (
        b'{ "messages":[{"role":"user","content":"Weather?","x_future":{"a":[1, 2]}}],'
        b'"model":"gpt-4o", "stream":true,"stream_options":{"include_usage":true},'
        b'"prompt_cache_key":"k1",  "metadata":{"team":"a"}, "temperature":0.25}'
    )
    upstream.add(Scripted(events=events("openai-chat-text.txt")))
    with proxy(upstream) as url:
        assert post(url, body).status_code == 200
    assert upstream.requests[0].body == body
    headers = {k.lower(): v for k, v in upstream.requests[0].headers.items()}
    assert headers["authorization"] == "Bearer sk-upstream-SECRET"


def test_the_fields_the_proxy_sets_are_what_the_librarys_path_sends(
    upstream: ReplayServer,
) -> None:
    # The client names its own model and asks no usage: the proxy sets the upstream's model,
    # usage in the stream (to record it) and the conversation's cache key, as the library's
    # path does; the rest is the client's.
    sent = {"model": "my-model", "messages": chat(3), "stream": True, "metadata": {"a": "b"}}
    bodies, agents = [], []
    for fast in (True, False):
        upstream.add(Scripted(events=events("openai-chat-text.txt")))
        with proxy(upstream, fast=fast) as url:
            assert post(url, json.dumps(sent).encode()).status_code == 200
        bodies.append(upstream.requests[-1].json())
        headers = {k.lower(): v for k, v in upstream.requests[-1].headers.items()}
        agents.append((headers["user-agent"], headers["authorization"]))
    assert bodies[0] == bodies[1]
    assert agents[0] == agents[1]  # the SDK client's headers: the same caller upstream
    assert bodies[0]["model"] == "gpt-4o" and bodies[0]["stream_options"]["include_usage"]
    assert bodies[0]["messages"] == sent["messages"]


def test_missing_fields_are_spliced_in_front_of_the_clients_bytes(upstream: ReplayServer) -> None:
    body = b'{"model": "gpt-4o", "messages": [{"role": "user", "content": "hi"}], "stream": true}'
    upstream.add(Scripted(events=events("openai-chat-text.txt")))
    with proxy(upstream) as url:
        assert post(url, body).status_code == 200
    forwarded = upstream.requests[0].body
    assert forwarded.endswith(b"," + body[1:])  # the client's bytes, unchanged, after them
    added = json.loads(forwarded).keys() - json.loads(body).keys()
    assert added == {"stream_options", "prompt_cache_key"}


def test_forwarded_body_keeps_splices_or_re_encodes() -> None:
    raw = b' {"model": "m", "x": [1,2]}'
    body = json.loads(raw)
    assert forwarded_body(raw, body, {"model": "m"}) is raw
    assert (
        forwarded_body(raw, body, {"s": {"u": True}})
        == b'{"s": {"u": true},"model": "m", "x": [1,2]}'
    )
    assert forwarded_body(b"{ }", {}, {"a": 1}) == b'{"a": 1}'
    assert json.loads(forwarded_body(raw, body, {"model": "up"})) == {"model": "up", "x": [1, 2]}


# --- the answer ----------------------------------------------------------------------------


def test_the_piped_stream_is_the_upstreams_events(upstream: ReplayServer) -> None:
    recorded = events("openai-chat-text.txt")
    body = {"model": "gpt-4o", "messages": chat(1), "stream": True}
    usage = {**body, "stream_options": {"include_usage": True}}
    upstream.add(*[Scripted(events=recorded)] * 2)
    with proxy(upstream) as url:
        with_usage = post(url, json.dumps(usage).encode())
        without = post(url, json.dumps(body).encode())
        metrics = httpx.get(url + "/metrics").text
    assert with_usage.content == wire(recorded)
    # The proxy asked for usage to record it; a client that did not gets no usage event.
    assert without.content == wire([e for e in recorded if '"usage"' not in e])
    assert f'chatcli_proxy_requests_total{{endpoint="{URL_PATH}",status="200"}} 2' in metrics


def test_the_answers_end_goes_from_the_pipes_callback_when_nothing_waits(
    upstream: ReplayServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """With nothing to record, the held end of an answer the library takes as it is goes to
    the client from the callback that read it (`FastPath.end_now`): the same bytes, a whole
    response (the next request on the same kept-alive connection is answered), the request
    counted once it ends. With a recorder, the request's task ends it, after the record."""
    finished: list[bool] = []
    end_now = FastPath.end_now

    def noted(fast: FastPath) -> None:
        end_now(fast)
        finished.append(fast.finished)

    monkeypatch.setattr(FastPath, "end_now", noted)
    recorded = events("openai-chat-text.txt")
    body = {"model": "gpt-4o", "messages": chat(1), "stream": True}
    raw = json.dumps({**body, "stream_options": {"include_usage": True}}).encode()
    headers = {"content-type": "application/json", "authorization": "Bearer k"}
    upstream.add(*[Scripted(events=recorded)] * 3)
    with proxy(upstream) as url, httpx.Client(base_url=url, headers=headers) as client:
        answers, ports = [], set()
        for _ in range(2):
            answers.append(client.post(URL_PATH, content=raw))
            ports.add(answers[-1].extensions["network_stream"].get_extra_info("client_addr"))
        metrics = client.get("/metrics").text
    assert [a.content for a in answers] == [wire(recorded)] * 2 and len(ports) == 1
    assert finished == [True, True]
    assert f'chatcli_proxy_requests_total{{endpoint="{URL_PATH}",status="200"}} 2' in metrics
    recorder = SessionRecorder(SessionStore(tmp_path / "db"), upstream="openai test")
    with proxy(upstream, sessions=recorder) as url:
        assert post(url, raw).content == wire(recorded)
    assert finished == [True, True, False]
    with SessionStore(tmp_path / "db") as reader:
        (info,) = reader.list_sessions()
        assert len(reader.requests(info.id)) == 1


def test_a_whole_tool_call_answer_is_piped_too(upstream: ReplayServer) -> None:
    recorded = events("openai-chat-tool-calls.txt")
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    body = {"model": "gpt-4o", "messages": chat(1), "stream": True, "tools": tools}
    upstream.add(Scripted(events=recorded))
    with proxy(upstream) as url:
        answer = post(url, json.dumps(body).encode())
    assert answer.content == wire([e for e in recorded if '"usage"' not in e])


def test_a_length_stop_is_continued_as_on_the_librarys_path(upstream: ReplayServer) -> None:
    # Call 1 (recorded) stops at max_tokens=1: the library escalates and the continuation
    # streams as the same answer.
    seen, continuations = [], []
    for fast in (True, False):
        upstream.requests.clear()
        upstream.queue.clear()
        upstream.add(
            Scripted(events=events("openai-chat-length.txt")),
            Scripted(events=events("openai-chat-text.txt")),
        )
        with proxy(upstream, fast=fast) as url:
            seen.append(streamed(url, messages=chat(1), max_tokens=1))
        assert len(upstream.requests) == 2
        continuations.append(upstream.requests[1].json())
    assert seen[0] == seen[1]
    assert seen[0]["roles"] == ["assistant"] and seen[0]["finishes"] == ["stop"]
    assert seen[0]["text"].startswith("{\"I'm unable to provide real-time")
    assert continuations[0] == continuations[1]
    assert continuations[0]["max_completion_tokens"] > 1


def test_a_continuation_the_upstream_never_answered_is_sent_again(
    upstream: ReplayServer,
) -> None:
    """The race CI met with llama-server, which closes a kept-alive connection after each
    streamed answer: the continuation reused it, and no byte of an answer came. The proxy's
    client never retries (`max_retries=0`), but this one request is sent again at once, once
    (`chatcli.retry.never_answered`): the answer already streaming has no one else to ask."""
    for fast in (True, False):
        upstream.requests.clear()
        upstream.queue.clear()
        upstream.add(
            Scripted(events=events("openai-chat-length.txt")),
            Scripted(drop=True),
            Scripted(events=events("openai-chat-text.txt")),
        )
        with proxy(upstream, fast=fast) as url:
            seen = streamed(url, messages=chat(1), max_tokens=1)
        assert len(upstream.requests) == 3
        assert upstream.requests[1].body == upstream.requests[2].body
        assert seen["roles"] == ["assistant"] and seen["finishes"] == ["stop"]
        assert seen["text"].startswith("{\"I'm unable to provide real-time")


def cut_tool_calls() -> list[str]:
    """The recorded two-call answer cut inside its second call, as an answer stopped by the
    output limit ends: its finish reason "length"."""
    recorded = events("openai-chat-tool-calls.txt")
    second = next(i for i, e in enumerate(recorded) if '"index":1,"id"' in e)
    finish = next(e for e in recorded if '"finish_reason":"tool_calls"' in e)
    return [*recorded[: second + 2], finish.replace('"tool_calls"', '"length"'), "[DONE]"]


def test_a_tool_call_cut_by_the_limit_is_never_forwarded(upstream: ReplayServer) -> None:
    tools = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
    whole = events("openai-chat-tool-calls.txt")  # what a second call would get
    seen = []
    for fast in (True, False):
        upstream.queue.clear()
        upstream.add(Scripted(events=cut_tool_calls()), Scripted(events=whole))
        with proxy(upstream, fast=fast) as url:
            seen.append(streamed(url, messages=chat(1), max_tokens=40, tools=tools))
    assert seen[0] == seen[1]
    # The library drops the cut call and keeps the whole one: the client never sees the cut
    # call's deltas, which the upstream sent.
    calls = seen[0]["calls"]
    assert [c["name"] for c in calls.values()] == ["GetWeatherArgs"]
    assert json.loads(calls[0]["arguments"]) == {"city": "Edinburgh", "country": "UK", "units": "c"}
    assert any("get_stock_price" in e for e in cut_tool_calls())


def test_an_overflow_is_recovered_with_no_call_beyond_the_librarys(
    upstream: ReplayServer,
) -> None:
    answers = []
    for fast in (True, False):
        upstream.requests.clear()
        upstream.queue.clear()
        upstream.add(replayed_error(OVERFLOW), Scripted(events=events("openai-chat-text.txt")))
        with proxy(upstream, fast=fast) as url:
            answers.append(streamed(url, messages=chat(31)))
            metrics = httpx.get(url + "/metrics").text
        assert len(upstream.requests) == 2  # the overflow's stated window spared a third
        first, second = (r.json()["messages"] for r in upstream.requests)
        assert first == chat(31) and len(second) < len(first)
        assert 'chatcli_proxy_recoveries_total{level="2"} 1' in metrics
    assert answers[0] == answers[1] and answers[0]["finishes"] == ["stop"]


def test_an_unrecoverable_overflow_is_the_error_status(upstream: ReplayServer) -> None:
    upstream.add(*[replayed_error(OVERFLOW)] * 5)
    with proxy(upstream) as url, pytest.raises(openai.BadRequestError) as caught:
        streamed(url, messages=chat(31))
    assert caught.value.code == "context_length_exceeded"


def test_a_request_the_library_changes_takes_its_path(upstream: ReplayServer) -> None:
    # A window the conversation does not fit: the pre-flight cuts it, so the library
    # forwards its view, and the answer is written by the proxy (its own chunk ids).
    env = {"CHATCLI_HOME": "/nonexistent"}
    up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=4096, environ=env)
    upstream.add(Scripted(events=events("openai-chat-text.txt")))
    body = json.dumps({"model": "m", "messages": chat(101), "stream": True}).encode()
    with running_proxy(up) as url:
        answer = post(url, body)
    assert answer.status_code == 200
    assert len(upstream.requests[0].json()["messages"]) < 102
    assert b"chatcmpl-9tXjg9" not in answer.content  # the recorded stream's ids: not piped


def test_a_piped_answer_is_recorded(upstream: ReplayServer, tmp_path: Path) -> None:
    upstream.add(Scripted(events=events("openai-chat-text.txt")))
    recorder = SessionRecorder(SessionStore(tmp_path / "db"), upstream="openai test")
    with proxy(upstream, sessions=recorder) as url:
        answer = streamed(url, messages=chat(3))
    with SessionStore(tmp_path / "db") as reader:
        (info,) = reader.list_sessions()
        assert reader.transcript(info.id)[-1].text == answer["text"]
        (request,) = reader.requests(info.id)
    assert request is not None


def test_a_client_that_goes_away_ends_the_piped_stream_at_once(gated: GatedUpstream) -> None:
    # The upstream holds its answer after the first words until a gate opens (it never does
    # here); the client reads them and leaves: the proxy must notice and end the request
    # (counted in /metrics) without waiting for the upstream's end.
    gate = Gate()
    gated.streams.append(gated_after(sse_events("openai-chat-text.txt"), '" unable"', gate))
    up = upstream_at("openai", gated.url + "/v1", model="gpt-4o", environ=ENV)
    body = {"model": "gpt-4o", "messages": chat(1), "stream": True}
    with running_proxy(up) as url:
        with httpx.stream("POST", url + URL_PATH, json=body, timeout=30) as answer:
            read = ""
            for text in answer.iter_text():  # the words before the gate, as they come
                read += text
                if '" unable"' in read:
                    break
        deadline = time.monotonic() + GATE_TIMEOUT_S / 2
        counted = f'chatcli_proxy_requests_total{{endpoint="{URL_PATH}",status="200"}} 1'
        while counted not in httpx.get(url + "/metrics").text:
            assert time.monotonic() < deadline, "the request did not end when its client left"
            time.sleep(0.05)
        assert not gate.event.is_set()
        gate.open()


def test_the_end_of_a_piped_answer_is_its_shown_text_and_outcome_in_one_decoding() -> None:
    """`OpenAIBase.folded`, split anywhere between events of the recorded stream: the text of
    the part already piped (what a continuation goes on from), and the whole answer's
    Response; cut before its finish, the outcome is the error and the piped text still comes."""
    recorded = events("openai-chat-text.txt")
    decoded = [json.loads(data) for data in recorded if data != "[DONE]"]
    contents = [
        e["choices"][0]["delta"].get("content") or "" if e["choices"] else "" for e in decoded
    ]
    adapter = OpenAICompatible("http://127.0.0.1:9/v1", "gpt-4o", environ={})
    request = Request(messages=(Message.user("Say something."),))
    for cut in (0, 1, 7, len(decoded) - 1):
        shown, outcome = adapter.folded(wire(recorded[:cut]), wire(recorded[cut:]), request)
        assert shown == "".join(contents[:cut])
        assert isinstance(outcome, Response) and outcome.message.text == "".join(contents)
    shown, outcome = adapter.folded(wire(recorded[:7]), wire(recorded[7:12]), request)
    assert shown == "".join(contents[:7]) and isinstance(outcome, ProviderError)


@pytest.mark.parametrize("after", [1, 3, passthrough.FOLDED_AFTER])
def test_the_events_piped_are_decoded_as_they_pass_to_the_end_one_decoding_gives(
    monkeypatch: pytest.MonkeyPatch, after: int
) -> None:
    """`FastPath.folded_sent`: the piped events decoded a batch at a time (each `after` of
    them) as the recorded stream is read, then the rest at its end, give what one decoding of
    the whole stream at its end gives (`OpenAIBase.folded`): the text shown and the
    Response. A malformed piped event raises from the end, as from `folded`."""
    monkeypatch.setattr(passthrough, "FOLDED_AFTER", after)
    adapter = OpenAICompatible("http://127.0.0.1:9/v1", "gpt-4o", environ={})
    request = Request(messages=(Message.user("Say something."),))
    text = wire(events("openai-chat-text.txt"))
    for stream, malformed in ((text, False), (text.replace(b"data: {", b"data: {{", 1), True)):
        fast = judging(adapter, request)
        for i in range(0, len(stream), 7):
            fast.judge(stream[i : i + 7])
        assert fast.folded == len(fast.sent) // after * after > 0
        piped, rest = b"".join(fast.sent), b"".join(fast.held) + fast.buffer
        if malformed:
            with pytest.raises(ValueError) as expected:
                adapter.folded(piped, rest, request)
            with pytest.raises(type(expected.value), match=re.escape(str(expected.value))):
                fast.ended()
            continue
        shown, outcome = fast.ended()
        assert (shown, outcome) == adapter.folded(piped, rest, request)
        assert isinstance(outcome, Response) and outcome.message.text.startswith(shown)


def test_the_fast_path_holds_as_many_upstream_streams_as_the_sdk_would() -> None:
    """More streams in flight than httpx's default pool (100 connections) all reach the
    upstream at once: none waits inside the proxy for another's answer to end."""
    streams = 120

    async def run() -> int:
        arrived, waited, all_in = 0, [], asyncio.Event()

        async def serve(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            nonlocal arrived
            head = await reader.readuntil(b"\r\n\r\n")
            length = int(head.lower().split(b"content-length:")[1].split(b"\r\n")[0])
            await reader.readexactly(length)
            arrived += 1
            if arrived == streams:
                all_in.set()
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(all_in.wait(), 2.0)
            waited.append(arrived)  # the streams in flight when this one is answered
            data = b"data: [DONE]\n\n"
            writer.write(b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n")
            writer.write(b"content-length: %d\r\n\r\n%s" % (len(data), data))
            await writer.drain()
            writer.close()

        server = await asyncio.start_server(serve, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]
        adapter = OpenAICompatible(f"http://127.0.0.1:{port}/v1", "stub", environ={})

        async def one() -> None:
            async with adapter.apassthrough(b'{"model":"stub","messages":[]}') as stream:
                async for _ in stream.chunks:
                    pass

        async with server:
            await asyncio.gather(*(one() for _ in range(streams)))
        await adapter.aclose()
        return waited[0]

    assert asyncio.run(run()) == streams


def judging(adapter: OpenAICompatible | None = None, request: Request | None = None) -> FastPath:
    """A fast path that only judges reads (and decodes what it pipes, `adapter`'s way, as the
    answer to `request`)."""
    fast = FastPath.__new__(FastPath)
    fast.buffer, fast.sent, fast.held, fast.folded = b"", [], [], 0
    fast.provider = adapter or OpenAICompatible("http://127.0.0.1:9/v1", "m", environ={})
    fast.first = request or Request(messages=(Message.user("Say something."),))
    fast.fold, fast.failure, fast.http_request = None, None, None
    return fast


def test_what_is_held_back_is_judged_by_the_words_of_each_event() -> None:
    """`_judged` (byte searches) against the rule it implements, spelled as one regular
    expression: every event of the recorded chat streams, and an open choice spelled with
    other spaces; a read split anywhere, with LF or CRLF event ends, pipes the same events."""
    judged_rule = re.compile(rb'"tool_calls"|"error"|\[DONE\]')
    open_rule = re.compile(rb'"finish_reason"\s*:\s*null')
    recorded = [
        f"data: {data}".encode()
        for name in ("openai-chat-text.txt", "openai-chat-tool-calls.txt", "openai-chat-length.txt")
        for data in events(name)
    ]
    spaced = [e.replace(b'"finish_reason":null', b'"finish_reason" :\n null') for e in recorded]
    for event in recorded + spaced:
        expected = bool(judged_rule.search(event)) or not open_rule.search(event)
        assert _judged(event) is expected, event
    text = wire(events("openai-chat-text.txt"))
    for ends in (b"\n\n", b"\r\n\r\n"):
        stream = text.replace(b"\n\n", ends)
        for cut in (1, 5, 64, len(stream)):
            fast = judging()
            piped = b"".join(fast.judge(stream[i : i + cut]) for i in range(0, len(stream), cut))
            assert piped == b"".join(fast.sent) and fast.held[-1] == b"data: [DONE]\n\n"
            assert piped + b"".join(fast.held) == text


def test_reads_of_one_event_each_are_judged_as_reads_cut_anywhere() -> None:
    """A server writes one event per read: `FastPath.judge`'s case with no split (a judged
    event in it held, and all after it), and every other read, judge the same events as the
    stream read byte by byte: LF, CRLF or mixed event ends, a CR inside an event, several
    events in one read, an event split across reads."""

    def judged(reads: list[bytes]) -> tuple[bytes, bytes, list[bytes], bytes]:
        fast = judging()
        piped = b"".join(map(fast.judge, reads))
        assert piped == b"".join(fast.sent)
        return piped, b"".join(fast.held), fast.held, fast.buffer

    for name in ("openai-chat-text.txt", "openai-chat-tool-calls.txt"):
        datas = events(name)
        datas[1] = datas[1].replace('"delta":{', '"delta":{"x":"a\rb",', 1)  # a CR inside
        for ends in (b"\n\n", b"\r\n\r\n", b"\r\n\n", b"\n\r\n"):
            one_each = [f"data: {data}".encode() + ends for data in datas]
            stream = b"".join(one_each)
            expected = judged([stream[i : i + 1] for i in range(len(stream))])
            assert expected[0] and expected[2][-1] == b"data: [DONE]\n\n"
            pairs = [b"".join(one_each[i : i + 2]) for i in range(0, len(one_each), 2)]
            split = [stream[:100], stream[100:]]
            for reads in (one_each, pairs, split):
                assert judged(reads) == expected, (name, ends)


@pytest.mark.parametrize(
    ("variables", "direct"),
    [
        ({}, True),
        ({"HTTPS_PROXY": "http://proxy.internal:3128"}, False),
        ({"https_proxy": "http://proxy.internal:3128"}, False),
        ({"ALL_PROXY": "http://proxy.internal:3128"}, False),
        ({"HTTP_PROXY": "http://proxy.internal:3128"}, True),  # not for an https upstream
        ({"HTTPS_PROXY": "http://proxy.internal:3128", "NO_PROXY": "api.example.com"}, True),
        ({"HTTPS_PROXY": "http://proxy.internal:3128", "NO_PROXY": ".example.com"}, True),
        ({"HTTPS_PROXY": "http://proxy.internal:3128", "NO_PROXY": "other.com"}, False),
    ],
)
async def test_behind_a_proxy_from_the_environment_requests_take_the_librarys_path(
    monkeypatch: pytest.MonkeyPatch, variables: dict[str, str], direct: bool
) -> None:
    # The lean transport connects to the upstream itself; the SDK's client honours the proxy
    # variables, as httpx does: behind a proxy, only the library's path reaches the upstream.
    assert piped_directly(monkeypatch, variables) is direct


def test_whether_the_passthrough_is_direct_is_known_with_no_event_loop(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # Read from the SDK client's URL: outside a running loop too (the in-process breakdown of
    # benchmarks/proxy.py asks it there).
    assert piped_directly(monkeypatch, {}) is True


def piped_directly(monkeypatch: pytest.MonkeyPatch, variables: dict[str, str]) -> bool:
    """Whether a streamed OpenAI request to an https upstream takes the fast path, with only
    the proxy `variables` in the environment."""
    for name in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.lower(), raising=False)
    for name, value in variables.items():
        monkeypatch.setenv(name, value)
    up = upstream_at("openai", "https://api.example.com/v1", model="gpt-4o", environ=ENV)
    parsed = OpenAIDialect().parse({"model": "gpt-4o", "messages": chat(1), "stream": True})
    return passthrough_of(up, parsed) is up.provider

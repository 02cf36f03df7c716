"""Runs the proxy app on a free loopback port in a thread, for tests and the benchmark; and
`chatcli proxy --workers N` itself in a subprocess (`running_command`)."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

import httpx
import uvicorn

from chatcli.chat.localmodel import SMOLLM2
from chatcli.proxy.app import ProxyOptions, create_app
from chatcli.proxy.guard import Guard
from chatcli.proxy.upstream import open_upstream
from chatcli.wire.forwarding import Upstream

__all__ = [
    "free_port",
    "running_command",
    "running_proxy",
    "smollm2_upstream",
    "upstream_at",
    "worker_pids",
]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def upstream_at(
    name: str,
    base_url: str,
    *,
    model: str = "m",
    context_window: int | None = None,
    max_tokens: int | None = None,
    environ: Mapping[str, str] | None = None,
) -> Upstream:
    """An upstream as `chatcli proxy --provider NAME --base-url URL` opens it."""
    from chatcli.chat.settings import load_settings

    flags = {
        "provider": name,
        "base_url": base_url,
        "model": model,
        "context_window": context_window,
        "max_tokens": max_tokens,
    }
    env = dict(environ or {"CHATCLI_HOME": "/nonexistent-chatcli-home"})
    return open_upstream(load_settings(flags, env), env)


def smollm2_upstream(base_url: str, *, max_tokens: int | None = None) -> Upstream:
    """The real small model's server at `base_url` (tests/servers.py's `smollm2_server`) as
    `chatcli proxy --provider openai-compatible` opens it, with the model's whole window."""
    return upstream_at(
        "openai-compatible",
        base_url + "/v1",
        model="smollm2",
        context_window=SMOLLM2.context_length,
        max_tokens=max_tokens,
        environ={"CHATCLI_HOME": "/nonexistent"},
    )


@contextmanager
def running_proxy(
    upstream: Upstream,
    *,
    guard: Guard | None = None,
    options: ProxyOptions | None = None,
) -> Iterator[str]:
    """The proxy's base URL (http://127.0.0.1:PORT) while the block runs, served as `chatcli
    proxy` serves it."""
    guard = guard or Guard((), host="127.0.0.1", max_concurrency=64)
    app = create_app(upstream, guard, options)
    config = uvicorn.Config(  # served as `chatcli proxy` serves it
        app,
        host="127.0.0.1",
        port=free_port(),
        log_level="warning",
        timeout_graceful_shutdown=2,
    )
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise RuntimeError("the proxy did not start")
        time.sleep(0.01)
    try:
        yield f"http://127.0.0.1:{server.config.port}"
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def running_command(
    argv: Sequence[str], env: Mapping[str, str], *, workers: int
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`chatcli proxy ARGV --port P --workers N` in a subprocess, once its `workers` worker
    processes serve: its base URL and the supervisor process; stopped (SIGINT) at the end."""
    port = free_port()
    code = "from chatcli.__main__ import main; raise SystemExit(main())"
    command = [sys.executable, "-c", code, "proxy", *argv]
    command += ["--port", str(port), "--workers", str(workers)]
    supervisor = subprocess.Popen(command, env=dict(env))
    url = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 90
        while len(worker_pids(supervisor.pid)) < workers or not _healthy(url):
            if time.monotonic() > deadline or supervisor.poll() is not None:
                raise RuntimeError(f"chatcli proxy did not start (exit {supervisor.poll()})")
            time.sleep(0.2)
        yield url, supervisor
    finally:
        if supervisor.poll() is None:
            supervisor.send_signal(signal.SIGINT)
        try:
            supervisor.wait(30)
        except subprocess.TimeoutExpired:
            supervisor.kill()
            supervisor.wait(10)


def _healthy(url: str) -> bool:
    try:
        return httpx.get(url + "/healthz", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


def worker_pids(supervisor: int) -> list[int]:
    """The uvicorn worker processes (multiprocessing's spawn) of a supervisor, not its
    resource tracker."""
    children = Path(f"/proc/{supervisor}/task/{supervisor}/children")
    if not children.exists():
        return []
    return [int(p) for p in children.read_text().split() if _is_worker(int(p))]


def _is_worker(pid: int) -> bool:
    try:
        command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    except OSError:  # it exited meanwhile
        return False
    return any(b"spawn_main" in part for part in command) and not any(
        b"resource_tracker" in part for part in command
    )

"""Runs the proxy app on a free loopback port in a thread, for tests and the benchmark."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

import uvicorn

from chatcli.chat.localmodel import SMOLLM2
from chatcli.proxy.app import ProxyOptions, create_app
from chatcli.proxy.guard import Guard
from chatcli.proxy.upstream import open_upstream
from chatcli.wire.forwarding import Upstream

__all__ = ["free_port", "running_proxy", "smollm2_upstream", "upstream_at"]


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

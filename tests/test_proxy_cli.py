"""`chatcli proxy`: the command's flags, its refusals, and the package's import boundary."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from chatcli.__main__ import main
from chatcli.proxy.main import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    build_parser,
)


def test_defaults_are_loopback_8787() -> None:
    args = build_parser().parse_args([])
    assert (args.host, args.port) == (DEFAULT_HOST, DEFAULT_PORT) == ("127.0.0.1", 8787)
    assert args.cors_origin == [] and args.api_key == []


def test_binding_beyond_loopback_without_keys_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["proxy", "--host", "0.0.0.0", "--provider", "openai-compatible"]
    argv += ["--base-url", "http://127.0.0.1:9/v1", "--model", "m"]
    assert main(argv, environ={"CHATCLI_HOME": str(tmp_path)}) == 2
    assert "CHATCLI_PROXY_KEYS" in capsys.readouterr().err


def test_no_upstream_is_a_clear_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    environ = {"CHATCLI_HOME": str(tmp_path), "HOME": str(tmp_path)}
    assert main(["proxy"], environ=environ) == 2
    assert "--provider" in capsys.readouterr().err


def test_the_proxy_imports_nothing_from_the_chat() -> None:
    code = (
        "import sys, chatcli.proxy.app, chatcli.proxy.main; "
        "bad = [m for m in sys.modules "
        "if m.split('.')[:2] == ['chatcli', 'cli'] or m in ('rich', 'prompt_toolkit')]; "
        "assert not bad, bad"
    )
    subprocess.run([sys.executable, "-c", code], check=True)


def test_workers_share_the_port_and_each_serves(tmp_path: Path) -> None:
    from tests.proxy_harness import free_port
    from tests.recorded import sse_events
    from tests.replay import Scripted, replay_server

    port = free_port()
    with replay_server() as upstream:
        upstream.add(*[Scripted(events=[d for _, d in sse_events("openai-chat-text.txt")])] * 4)
        argv = ["proxy", "--provider", "openai-compatible", "--model", "m", "--no-sessions"]
        argv += ["--context-window", "32000"]  # declared: no probe takes a scripted answer
        argv += ["--base-url", upstream.url + "/v1", "--port", str(port), "--workers", "2"]
        code = "from chatcli.__main__ import main; raise SystemExit(main())"
        env = {**os.environ, "CHATCLI_HOME": str(tmp_path)}
        supervisor = subprocess.Popen([sys.executable, "-c", code, *argv], env=env)
        try:
            url = f"http://127.0.0.1:{port}"
            deadline = time.monotonic() + 60
            while True:
                try:
                    if httpx.get(url + "/healthz").status_code == 200:
                        break
                except httpx.TransportError:
                    pass
                assert time.monotonic() < deadline and supervisor.poll() is None
                time.sleep(0.2)
            children = Path(f"/proc/{supervisor.pid}/task/{supervisor.pid}/children")
            workers = [p for p in children.read_text().split() if _is_worker(int(p))]
            assert len(workers) == 2
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            for _ in range(4):
                answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
                assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
        finally:
            supervisor.send_signal(signal.SIGINT)
            supervisor.wait(30)
    assert len(upstream.requests) == 4


def _is_worker(pid: int) -> bool:
    """A uvicorn worker (multiprocessing's spawn), not its resource tracker."""
    command = Path(f"/proc/{pid}/cmdline").read_bytes().split(b"\0")
    return any(b"spawn_main" in part for part in command) and not any(
        b"resource_tracker" in part for part in command
    )

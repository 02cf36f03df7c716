"""`chatcli proxy`: the command's flags, its refusals, and the package's import boundary."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest

from chatcli.__main__ import main
from chatcli.errors import ConfigError
from chatcli.proxy.keys import SECRETS_ENV
from chatcli.proxy.main import (
    DEFAULT_HOST,
    DEFAULT_PORT,
    build_parser,
    worker_app,
)
from tests.proxy_harness import running_command, worker_pids


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
    from tests.recorded import sse_events
    from tests.replay import Scripted, replay_server

    with replay_server() as upstream:
        upstream.add(*[Scripted(events=[d for _, d in sse_events("openai-chat-text.txt")])] * 4)
        argv = ["--provider", "openai-compatible", "--model", "m", "--no-sessions"]
        argv += ["--context-window", "32000"]  # declared: no probe takes a scripted answer
        argv += ["--base-url", upstream.url + "/v1"]
        env = {**os.environ, "CHATCLI_HOME": str(tmp_path)}
        with running_command(argv, env, workers=2) as (url, supervisor):
            assert len(worker_pids(supervisor.pid)) == 2
            body = {"model": "m", "messages": [{"role": "user", "content": "hi"}], "stream": True}
            for _ in range(4):
                answer = httpx.post(url + "/v1/chat/completions", json=body, timeout=30)
                assert answer.status_code == 200 and answer.text.endswith("data: [DONE]\n\n")
    assert len(upstream.requests) == 4


def test_a_worker_with_no_way_to_share_the_compaction_key_refuses_to_start(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """`worker_app` run by another process manager than `chatcli proxy --workers` (whose
    parent hands its workers a secret): with no store and no secret, each worker would seal
    with a key of its own, so it refuses, saying what to set."""
    argv = ["--provider", "openai-compatible", "--base-url", "http://127.0.0.1:9/v1"]
    monkeypatch.setenv("CHATCLI_PROXY_WORKER_ARGV", json.dumps([*argv, "--no-sessions"]))
    monkeypatch.delenv(SECRETS_ENV, raising=False)
    with pytest.raises(ConfigError, match=f"--compaction-secret \\(or set {SECRETS_ENV}\\)"):
        worker_app()

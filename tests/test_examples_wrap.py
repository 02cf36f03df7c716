"""examples/wrap_sdk.py runs as a user would run it: against the real llama-server it starts."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import servers

pytestmark = pytest.mark.llama_server

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "wrap_sdk.py"


def test_the_wrap_example_recovers_through_both_sdks() -> None:
    binary = servers.llama_server_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(
            f"llama-server not found at {binary}; build it with scripts/build-llama-server.sh"
        )
    env = {**os.environ, "CHATCLI_LLAMA_SERVER": str(binary)}
    done = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, timeout=300, env=env
    )
    assert done.returncode == 0, done.stderr
    out = done.stdout
    assert "chatcli: context overflow" in out  # the server refused the whole conversation
    assert "chatcli: level 2 (emergency truncation)" in out
    assert "chatcli: pre-flight" in out  # the learned window, used on the next call
    assert "the app's history still has 31 messages" in out
    assert "chatcli: continuing the cut answer" in out
    assert "stop_reason: max_tokens" in out

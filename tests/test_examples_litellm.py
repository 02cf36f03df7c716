"""examples/litellm_completion.py runs as written: LiteLLM, through chatcli, answers a
conversation three times the real llama-server's 1,024-token window."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import servers

pytestmark = pytest.mark.llama_server
EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "litellm_completion.py"


def test_the_litellm_example_recovers_an_overflowing_conversation() -> None:
    binary = servers.llama_server_binary()
    if not binary.exists():
        pytest.skip(
            f"llama-server not found at {binary}; build it with scripts/build-llama-server.sh"
        )
    env = {**os.environ, "CHATCLI_LLAMA_SERVER": str(binary)}
    run = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=env, timeout=300
    )
    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("  chatcli: context overflow (") and "> 1,024 tokens)" in lines[0]
    assert any(line.startswith("  chatcli: level 2 (emergency truncation)") for line in lines)
    assert lines[-3:] == [
        "ModelResponse, finish_reason='length'",
        "answered: True",
        "your 32 messages are unchanged: True",
    ]

"""examples/langchain_agent.py runs: a LangChain agent on the real llama-server, recovered."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests import servers

pytestmark = pytest.mark.llama_server

EXAMPLE = Path(__file__).resolve().parent.parent / "examples" / "langchain_agent.py"


def test_the_langchain_example_recovers_the_agents_conversation() -> None:
    binary = servers.llama_server_binary()
    if not os.access(binary, os.X_OK):
        pytest.skip(
            f"llama-server not found at {binary}; build it with scripts/build-llama-server.sh"
        )
    environ = {**os.environ, "CHATCLI_LLAMA_SERVER": str(binary)}

    run = subprocess.run(
        [sys.executable, str(EXAMPLE)], capture_output=True, text=True, env=environ, timeout=300
    )

    assert run.returncode == 0, run.stderr
    lines = run.stdout.splitlines()
    assert lines[0].startswith("  chatcli: context overflow (")
    assert any("level 2 (emergency truncation)" in line for line in lines)
    assert any("continuing the cut answer" in line for line in lines)
    assert lines[-1] == "the agent's 13 messages are unchanged: True"

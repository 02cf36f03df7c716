"""examples/langchain_agent.py runs: a LangChain agent on the real llama-server, recovered."""

from __future__ import annotations

import pytest

from tests.servers import run_example

pytestmark = pytest.mark.llama_server


def test_the_langchain_example_recovers_the_agents_conversation() -> None:
    run = run_example("langchain_agent.py")
    lines = run.stdout.splitlines()
    assert lines[0].startswith("  chatcli: context overflow (")
    assert any("level 2 (emergency truncation)" in line for line in lines)
    assert any("continuing the cut answer" in line for line in lines)
    assert lines[-1] == "the agent's 13 messages are unchanged: True"

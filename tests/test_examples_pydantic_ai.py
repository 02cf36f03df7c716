"""examples/pydantic_ai_agent.py runs: a real pydantic-ai agent, the real llama-server (1,024
tokens), an overflow recovered, the agent's history unchanged and its tool pairs whole."""

from __future__ import annotations

import pytest

from tests.servers import run_example


@pytest.mark.llama_server
def test_the_pydantic_ai_example_recovers_an_overflow_on_the_real_server() -> None:
    pytest.importorskip("pydantic_ai")
    run = run_example("pydantic_ai_agent.py")
    lines = run.stdout.splitlines()
    assert lines[0].startswith("  chatcli: context overflow (") and "> 1,024 tokens)" in lines[0]
    assert any(line.startswith("  chatcli: level ") and "retrying" in line for line in lines)
    assert lines[-4:] == [
        "the agent's history is unchanged: True",
        "the run kept it and added 2 messages: True",
        "3 tool calls, each with its result: True",
        "answered by chatcli-tiny",
    ]

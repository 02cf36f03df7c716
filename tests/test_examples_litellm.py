"""examples/litellm_completion.py runs as written: LiteLLM, through chatcli, answers a
conversation three times the real llama-server's 1,024-token window."""

from __future__ import annotations

import pytest

from tests.servers import run_example

pytestmark = pytest.mark.llama_server


def test_the_litellm_example_recovers_an_overflowing_conversation() -> None:
    run = run_example("litellm_completion.py")
    lines = run.stdout.splitlines()
    assert lines[0].startswith("  chatcli: context overflow (") and "> 1,024 tokens)" in lines[0]
    assert any(line.startswith("  chatcli: level 2 (emergency truncation)") for line in lines)
    assert lines[-3:] == [
        "ModelResponse, finish_reason='length'",
        "answered: True",
        "your 32 messages are unchanged: True",
    ]

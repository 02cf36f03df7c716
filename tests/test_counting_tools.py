"""The pre-flight estimate counts a request's tool definitions, whatever the estimator: here the
default one (`MarginEstimator`, the text's shape) against tiktoken's exact count, on Claude
Code's own request (tests/data/claude-code/messages-request.json), whose ~32 KB of tool
definitions are two thirds of its prompt. (tests/test_counting_tools_llama_server.py: the
exact llama-server count, against the server's own prompt.)"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from chatcli.policy.journal import Journal
from chatcli.policy.prediction import Prediction, tool_definitions
from chatcli.providers.base import ToolSpec
from chatcli.tokens.estimate import MarginEstimator, TokenEstimator
from chatcli.tokens.exact import CountingEstimator, TiktokenCounter, load_encoding
from chatcli.wire.anthropic import AnthropicDialect

RECORDED = Path(__file__).resolve().parent / "data" / "claude-code" / "messages-request.json"


def predicted(estimator: TokenEstimator, tools: tuple[ToolSpec, ...]) -> tuple[int, int]:
    """The prompt predicted for the recorded request with `tools`, and without any."""
    parsed = AnthropicDialect().parse(json.loads(RECORDED.read_text()))

    def count(given: tuple[ToolSpec, ...]) -> int:
        prediction = Prediction(
            Journal(lambda event: None),
            window=None,
            cap=None,
            max_tokens=None,
            estimator=estimator,
            tools=given,
        )
        return prediction.count(parsed.messages)

    return count(tools), count(())


def test_the_default_estimate_counts_claude_codes_tools_within_a_tenth_of_tiktoken() -> None:
    pytest.importorskip("tiktoken", reason="tiktoken is not installed: chatcli-recovery[tiktoken]")
    encoding = load_encoding("o200k_base")
    assert encoding is not None
    tools = AnthropicDialect().parse(json.loads(RECORDED.read_text())).tools
    assert len(tools) == 12
    exact, exact_bare = predicted(
        CountingEstimator(counter=TiktokenCounter(encoding=encoding)), tools
    )
    estimate, bare = predicted(MarginEstimator(), tools)
    assert exact > 2 * exact_bare  # the definitions are most of the prompt
    assert abs(estimate - exact) <= exact / 10, (estimate, exact)
    assert bare < exact / 2  # what pre-flight counted before: the messages alone


def test_tool_definitions_are_one_message_of_their_json_and_none_without_tools() -> None:
    spec = ToolSpec(name="read", description="Read a file.", parameters={"type": "object"})
    (message,) = tool_definitions((spec,))
    assert json.loads(message.text) == [
        {
            "type": "function",
            "function": {
                "name": "read",
                "description": "Read a file.",
                "parameters": {"type": "object"},
            },
        }
    ]
    assert tool_definitions(()) == ()

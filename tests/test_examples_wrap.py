"""examples/wrap_sdk.py runs as a user would run it: against the real llama-server it starts."""

from __future__ import annotations

import pytest

from tests.servers import run_example

pytestmark = pytest.mark.llama_server


def test_the_wrap_example_recovers_through_both_sdks() -> None:
    done = run_example("wrap_sdk.py")
    out = done.stdout
    assert "chatcli: context overflow" in out  # the server refused the whole conversation
    assert "chatcli: level 2 (emergency truncation)" in out
    assert "chatcli: pre-flight" in out  # the learned window, used on the next call
    assert "the app's history still has 31 messages" in out
    assert "chatcli: continuing the cut answer" in out
    assert "stop_reason: max_tokens" in out

"""benchmarks/incremental.py measures the conversations its docstring says, on every path.

Its figures are not checked here (CPU time on a shared machine); what is checked is that they
would measure what they claim: the request turns have the issue's shape, and its conversation
sent to a client of a 200k-token window reaches every path the table reports (stubs, the
provider's compaction, a recovery cut that carries instructions, and the next cut).
"""

from __future__ import annotations

import random

from benchmarks.agent_session import RESULT_CHARS, request_turn, stdlib_files
from benchmarks.incremental import COMPACTION_PROVIDER, MODEL, conversation, cut_cycle_ms

from chatcli.history.native import owns
from chatcli.messages import Role


def test_a_request_turn_is_an_answer_a_request_a_call_and_a_result_of_a_few_kilobytes() -> None:
    rng = random.Random(1)
    sources = {text for _, text in stdlib_files()}
    for index in range(50):
        answer, request, call, result = request_turn(rng, index)
        assert [m.role for m in (answer, request, call, result)] == [
            Role.ASSISTANT,
            Role.USER,
            Role.ASSISTANT,
            Role.TOOL,
        ]
        assert answer.text and request.text and not answer.tool_calls
        (tool_call,) = call.tool_calls
        assert result.tool_result is not None and result.tool_result.call_id == tool_call.id
        text = result.text
        assert any(text in source for source in sources)  # a real file's lines
        # At least the size drawn, unless its file ended first; whole lines past it.
        assert len(text) >= RESULT_CHARS[0] or any(s.endswith(text) for s in sources)
        assert len(text) < RESULT_CHARS[1] + 2_000


def test_the_request_conversation_reaches_every_path_it_reports() -> None:
    messages = conversation("request turns", 1_000)
    assert sum(owns(m, COMPACTION_PROVIDER, MODEL) for m in messages) == 1
    times, paths = cut_cycle_ms("request turns", 1_000)
    assert paths.cut_again is not None and paths.cut_again == times[-1]
    reached = paths.reached()
    assert "compaction sent" in reached and paths.levels >= 1 and paths.carried > 0
    assert int(reached.split(" stubs")[0].replace(",", "")) > 0

"""Compaction against the real llama-server: its random model writes nonsense summaries.

The tiny model (chatcli.chat.tinymodel) cannot summarise anything: what it writes is random text
from its vocabulary. That is exactly what verification must catch. `compact` must reject the
summary and leave the conversation as it was; `auto_compact`, when the conversation is over
the effective window, must fall back to the deterministic recovery levels, with the user's
latest task kept verbatim; and its circuit breaker must stop paying for summaries that keep
failing.

The server is started here with a 2,048-token window (the shared fixture's 512 is too small
for any summary: compaction refuses a summariser window that cannot hold the instructions,
some conversation and the summary).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from chatcli.compaction import (
    SUMMARY_SECTIONS,
    AutoCompaction,
    CompactionBreaker,
    auto_compact,
    compact,
)
from chatcli.config import RecoveryConfig
from chatcli.errors import CompactionError
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import Message, Role, ToolCall
from tests.test_e2e_llama_server import Recording, connect, paragraph

# The fixtures. Not imported by name: a plugin must not be imported before pytest loads it.
pytest_plugins = ("tests.servers",)

SUMMARISER_CTX = 2_048  # the tiny model's own context_length, the most the server allows
# The main model keeps 1,536 tokens for its answer, so the conversation's budget is 512
# tokens: this conversation (~640 estimated) is over it, and small enough that the summary
# request fits the server's real window.
OUTPUT_RESERVE = 1_536
LATEST = "Latest task: write the migration notes for the payment module, and never touch the tests."


@pytest.fixture(scope="module")
def summariser_server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """llama-server as tests/servers.py starts it, with `-c 2048` instead of 512."""
    from tests import servers  # here, not at the top: the plugin is loaded by now

    launcher = servers.llama_server_command()
    port = servers._free_port()
    command = [
        *launcher,
        *("--model", str(tiny_model), "--alias", servers.MODEL_NAME),
        *("--host", "127.0.0.1", "--port", str(port)),
        *("--ctx-size", str(SUMMARISER_CTX), "--parallel", "1", "--threads", "1", "--seed", "1"),
    ]
    log = tmp_path_factory.mktemp("llama-server-2k") / "server.log"
    with servers._running(command, f"http://127.0.0.1:{port}", "/health", log) as base_url:
        yield base_url


@pytest.fixture
def provider(summariser_server: str) -> Iterator[Recording]:
    adapter = connect(summariser_server, context_window=SUMMARISER_CTX)
    yield Recording(adapter)
    adapter.close()


def agent_conversation() -> list[Message]:
    """An agent session: a rule in the system prompt, six tool rounds with the user's
    instructions, and the latest task."""
    messages = [Message.system("You are a coding agent. Always run the tests before answering.")]
    for turn in range(1, 7):
        call = ToolCall(id=f"call_{turn}", name="read_log", arguments={"turn": turn})
        messages += [
            Message.user(f"Request {turn}: read the log of step {turn}. Never skip a step."),
            Message.assistant(tool_calls=(call,)),
            Message.tool(call.id, paragraph(200, start=37 * turn)),
            Message.assistant(f"Step {turn} done: the log shows the client trims old turns."),
        ]
    return [*messages, Message.user(LATEST)]


@pytest.mark.llama_server
def test_a_nonsense_summary_is_rejected_and_nothing_changes(provider: Recording) -> None:
    conversation = agent_conversation()
    before = list(conversation)
    with pytest.raises(CompactionError, match="does not read like a summary") as raised:
        compact(provider, conversation)
    assert raised.value.__cause__ is None  # the call succeeded; its summary was refused
    assert conversation == before
    # One real summary call, within the summariser's window, answered with real text.
    (request,) = provider.requests
    assert request.max_tokens == SUMMARISER_CTX // 4
    assert "Request 1: read the log of step 1. Never skip a step." in request.messages[-1].text
    (answer,) = provider.responses
    summary = answer.message.text
    assert summary.strip() and answer.usage.output_tokens > 0
    assert not any(section in summary for section in SUMMARY_SECTIONS)


def auto(
    provider: Recording, messages: list[Message], breaker: CompactionBreaker
) -> AutoCompaction:
    return auto_compact(
        provider,
        messages,
        breaker=breaker,
        window=SUMMARISER_CTX,
        output_reserve=OUTPUT_RESERVE,
    )


@pytest.mark.llama_server
def test_auto_compaction_over_the_window_falls_back_to_the_deterministic_levels(
    provider: Recording,
) -> None:
    conversation = agent_conversation()
    before = list(conversation)
    outcome = auto(provider, conversation, CompactionBreaker())

    assert outcome.error is None and outcome.result is not None
    report = outcome.result.report
    assert report.fallback is not None and "does not read like a summary" in report.reason
    assert report.calls == len(provider.requests) == 1  # the summary paid for, then refused
    # The lowest level that fits the 512-token budget: level 1 has nothing to cut here.
    assert report.fallback.name == "level 2: emergency truncation"
    expected = apply_recovery_level(conversation, 2, RecoveryConfig()).messages
    assert outcome.messages == expected
    assert report.tokens_after <= SUMMARISER_CTX - OUTPUT_RESERVE < report.tokens_before
    assert outcome.messages[0] == conversation[0] and outcome.messages[0].role is Role.SYSTEM
    assert outcome.messages[-1] == Message.user(LATEST)  # the task, verbatim
    assert conversation == before
    assert outcome.breaker.strikes == 1 and outcome.notice is None


@pytest.mark.llama_server
def test_the_breaker_stops_paying_for_summaries_after_three_failures(
    provider: Recording,
) -> None:
    conversation = agent_conversation()
    breaker = CompactionBreaker()
    notices = []
    for attempt in range(1, 5):
        outcome = auto(provider, conversation, breaker)
        breaker = outcome.breaker
        notices.append(outcome.notice)
        assert outcome.messages[-1] == Message.user(LATEST)  # always within the budget
        assert len(provider.requests) == min(attempt, 3)  # no summary call once it is open
    assert breaker.is_open and breaker.strikes == 3
    assert notices[:2] == [None, None] and notices[3] is None  # said once, when it opened
    assert notices[2] is not None and "does not read like a summary" in notices[2]

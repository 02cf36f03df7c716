"""Compaction against the real llama-server: its random model writes nonsense summaries.

The tiny model (chatcli.chat.tinymodel) cannot summarise anything: what it writes is random text
from its vocabulary. That is exactly what verification must catch. `compact` must reject the
summary and leave the conversation as it was; `auto_compact`, when the conversation is over
the effective window, must fall back to the deterministic recovery levels, with the user's
latest task kept verbatim; and its circuit breaker must stop paying for summaries once the
model has shown it cannot write one.

The server is started here with a 2,048-token window (the shared fixture's 512 is too small
for any summary: compaction refuses a summariser window that cannot hold the instructions,
some conversation and the summary).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path

import pytest

from chatcli.compaction import (
    SUMMARY_SECTIONS,
    AutoCompaction,
    CompactionBreaker,
    auto_compact,
    compact,
)
from chatcli.compaction.prompt import summary_schema
from chatcli.config import RecoveryConfig
from chatcli.errors import CannotSummarise, CompactionError
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import Message, Role, ToolCall
from chatcli.providers.base import Request, Response
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.request_settings import Settings
from tests.test_e2e_llama_server import Recording, connect, paragraph, served_model

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
    assert outcome.breaker.is_open and outcome.notice is not None  # it cannot summarise


@pytest.mark.llama_server
def test_the_breaker_stops_paying_for_summaries_after_the_first_rejected_one(
    provider: Recording,
) -> None:
    conversation = agent_conversation()
    breaker = CompactionBreaker()
    notices = []
    for _ in range(4):
        outcome = auto(provider, conversation, breaker)
        breaker = outcome.breaker
        notices.append(outcome.notice)
        assert outcome.messages[-1] == Message.user(LATEST)  # always within the budget
        assert len(provider.requests) == 1  # no summary call once the model failed one
    assert breaker.is_open and "does not read like a summary" in breaker.unable
    assert notices[1:] == [None, None, None]  # said once, when it opened
    assert notices[0] is not None and "does not read like a summary" in notices[0]


class Structured(Recording):
    """A recording of an adapter that can constrain its output, as the adapter says.
    `schema`: the schema sent instead of the one asked for (None: as asked)."""

    def __init__(self, inner: OpenAICompatible, schema: dict[str, object] | None = None) -> None:
        super().__init__(inner)
        self.schema = schema

    def structured_output_supported(self) -> bool:
        inner = self.inner
        return isinstance(inner, OpenAICompatible) and inner.structured_output_supported()

    def complete(self, request: Request) -> Response:
        if self.schema is not None and request.settings.response_format is not None:
            request = replace(request, settings=Settings(response_format=self.schema))
        return super().complete(request)


@pytest.fixture
def discovered(summariser_server: str) -> Iterator[OpenAICompatible]:
    """The adapter as the chat makes it: the window (and the server) asked of `/props`."""
    model = served_model(summariser_server)
    adapter = OpenAICompatible(summariser_server + "/v1", model, environ={}, discover_window=True)
    yield adapter
    adapter.close()


@pytest.mark.llama_server
def test_llama_server_holds_the_summary_to_the_sections_schema(
    discovered: OpenAICompatible,
) -> None:
    assert discovered.structured_output_supported()
    provider = Structured(discovered)
    # Two turns: the server's tokenizer packs this model's text tightly, and the whole object
    # must fit what the window leaves. The random model's words are still nonsense, but in
    # the shape asked for.
    conversation = [*agent_conversation()[:9], Message.user(LATEST)]
    with pytest.raises(CannotSummarise, match="does not read like a summary"):
        compact(provider, conversation)
    (request,) = provider.requests
    schema = request.settings.response_format
    assert schema is not None and schema == summary_schema(request.max_tokens or 0)
    (answer,) = provider.outcomes
    assert isinstance(answer, Response)
    fields = json.loads(answer.message.text)
    assert list(fields) == list(SUMMARY_SECTIONS)
    longest = schema["properties"][SUMMARY_SECTIONS[0]]["maxLength"]
    assert all(isinstance(v, str) and 1 <= len(v) <= longest for v in fields.values())


@pytest.mark.llama_server
def test_a_schema_llama_server_refuses_is_asked_again_plainly(
    discovered: OpenAICompatible,
) -> None:
    # A schema the server cannot turn into a grammar: it answers 400 invalid_request_error.
    provider = Structured(discovered, schema={"$ref": "#/nowhere"})
    with pytest.raises(CannotSummarise, match="does not read like a summary"):
        compact(provider, agent_conversation())
    refused, plain = provider.outcomes
    assert isinstance(refused, Exception) and "cannot resolve $ref" in str(refused)
    assert isinstance(plain, Response)
    assert provider.requests[1].settings.response_format is None

"""The compaction call on the warm prefix (`chatcli.compaction.warm`): the summary is asked
for after the conversation's previous request, repeated as it was sent, and the rendered
request is made where that does not fit. The bodies these requests make on the wire are
tested in tests/test_anthropic_adapter.py and tests/test_openai_adapter.py, the server's own
prompt cache in tests/test_compaction_warm_llama.py."""

from __future__ import annotations

import json

import pytest

from chatcli.compaction import (
    SUMMARY_SECTIONS,
    CompactionBreaker,
    PreviousRequest,
    auto_compact,
    compact,
)
from chatcli.compaction.plan import read_ratio
from chatcli.compaction.prompt import (
    STRUCTURED_PROMPT,
    SYSTEM_PROMPT,
    summary_schema,
    summary_turn,
)
from chatcli.config import CompactionConfig
from chatcli.errors import CannotSummarise, CompactionError
from chatcli.messages import Message, ToolCall
from chatcli.providers.base import Request, ToolSpec
from chatcli.recovery import Client
from chatcli.request_settings import Settings
from tests.compaction_fakes import (
    ANTHROPIC_RATE_LIMIT_BODY,
    SECTIONS_TEMPLATE,
    HTTPStatusError,
    ScriptedSummarizer,
    StructuredSummarizer,
    agent_session,
)

READ = ToolSpec(
    name="read_file",
    description="Read a file of the repository.",
    parameters={"type": "object", "properties": {"path": {"type": "string"}}},
)
RULE = "Never change the public API of the parser."


def conversation(result_chars: int = 800) -> list[Message]:
    """An agent session with a rule of the user's in its middle, ending with a request."""
    messages = agent_session(6, result_chars=result_chars)
    messages.insert(5, Message.user(RULE))
    return [*messages, Message.user("Now write the docs of the parser.")]


def summary(request: Request) -> str:
    """A sectioned summary in the conversation's words, without the user's rule."""
    return SECTIONS_TEMPLATE.format(goal="Document the parser f0.py to f5.py.", rules="None.")


def answered(
    provider: ScriptedSummarizer, settings: Settings | None = None, result_chars: int = 800
) -> tuple[Client, list[Message], Request]:
    """A Client that sent `conversation(result_chars)` (tools and `settings` with it) and got
    its answer: the conversation with the answer, and the request it was answered on."""
    client = Client(provider, microcompact=None, sleep=lambda seconds: None)
    messages = conversation(result_chars)
    reply = client.send(messages, tools=(READ,), settings=settings)
    return client, [*messages, reply.message], provider.requests[-1]


def test_the_summary_request_repeats_the_previous_request_then_asks() -> None:
    provider = ScriptedSummarizer(["Here are the docs.", summary])
    client, messages, sent = answered(provider, Settings(temperature=0.2, tool_choice="auto"))
    result = client.compact(messages, focus="the docs")
    warm = provider.requests[-1]
    assert warm.messages == (
        *sent.messages,
        messages[-1],  # the answer since
        summary_turn("the docs", structured=False),
    )
    assert warm.messages[-1].text.endswith("The user asked the summary to focus on: the docs")
    assert SYSTEM_PROMPT not in (m.text for m in warm.messages)  # no prompt of its own
    assert (warm.tools, warm.settings, warm.model) == (sent.tools, sent.settings, sent.model)
    assert warm.cache_prefix == len(sent.messages)  # where the previous request ended
    assert warm.max_tokens == CompactionConfig().summary_tokens != sent.max_tokens
    assert result.report.warm and result.report.calls == 1


def test_the_same_verification_applies_to_a_summary_on_the_warm_prefix() -> None:
    # The same summary, asked for on the warm prefix and of the rendered text, makes the same
    # view: the same checks, the rule it left out carried (or pinned) the same way.
    provider = ScriptedSummarizer(["Here are the docs.", summary])
    client, messages, _ = answered(provider)
    warm = client.compact(messages)
    rendered = compact(ScriptedSummarizer([summary]), messages)
    assert warm.report.warm and not rendered.report.warm
    assert warm.messages == rendered.messages
    assert RULE in "\n".join(m.text for m in warm.messages)
    # A refusal is no summary there either: rejected, and the rendered request asked.
    refusing = ScriptedSummarizer(["Here are the docs.", "I cannot do that.", summary])
    client, messages, _ = answered(refusing)
    result = client.compact(messages)
    first, second = refusing.requests[1:]
    assert first.messages[-1] == summary_turn(None, structured=False)
    assert second.messages[0].text == SYSTEM_PROMPT
    assert not result.report.warm and result.report.calls == 2


def test_an_answer_that_repeats_the_summary_turn_has_no_section() -> None:
    """A model that echoes its last turn writes the headings of the instructions: listed on
    one line there, they are no section, so the echo is no summary."""
    provider = ScriptedSummarizer(["Here are the docs.", lambda r: r.messages[-1].text])
    client, messages, _ = answered(provider)
    with pytest.raises(CannotSummarise, match="0 of the 7 sections"):
        client.compact(messages)
    assert len(provider.requests) == 3  # the chat, the warm summary, the rendered one


def test_another_model_summarises_the_rendered_text() -> None:
    provider = ScriptedSummarizer(["Here are the docs."])
    other = ScriptedSummarizer([summary], model="another-model")
    client, messages, _ = answered(provider)
    result = client.compact(messages, summarizer=other)
    (request,) = other.requests
    assert request.messages[0].text == SYSTEM_PROMPT and not request.tools
    assert not result.report.warm


def test_a_conversation_over_the_summarisers_window_is_rendered() -> None:
    # The previous request fitted with the chat's output limit, not with the summary's: the
    # warm request would not fit, so the middle is rendered (and chunked if need be).
    provider = ScriptedSummarizer(["Here are the docs.", summary], context_window=6_000)
    client, messages, sent = answered(provider, result_chars=3_000)
    summary_tokens = 6_000 // 4
    assert provider.estimator.count([*sent.messages, messages[-1]]) + summary_tokens > 6_000
    result = client.compact(messages)
    asked = [r.messages[0].text for r in provider.requests[1:]]
    assert asked and all(text == SYSTEM_PROMPT for text in asked)  # chunked, then merged
    assert not result.report.warm


@pytest.mark.parametrize(
    "settings",
    [
        Settings(tool_choice="required"),  # the model must call a tool: no summary
        Settings(tool_choice="read_file"),
        Settings(response_format={"type": "object"}),  # the caller's format, in the prompt
    ],
)
def test_a_previous_request_that_forbids_a_text_answer_is_not_continued(
    settings: Settings,
) -> None:
    provider = ScriptedSummarizer(["Here are the docs.", summary])
    client, messages, _ = answered(provider, settings)
    result = client.compact(messages)
    assert provider.requests[-1].messages[0].text == SYSTEM_PROMPT
    assert not result.report.warm


def test_a_schema_is_asked_for_only_where_it_leaves_the_prompt_alone() -> None:
    class Grammar(StructuredSummarizer):
        def structured_output_keeps_prompt(self) -> bool:
            return True

    fields = {section: "The parser f0.py to f5.py." for section in SUMMARY_SECTIONS}
    answer = json.dumps(fields)
    markdown = summary(Request(messages=()))
    for provider, schema in (
        (Grammar(["ok", answer]), True),
        (StructuredSummarizer(["ok", markdown]), False),
    ):
        client, messages, _ = answered(provider)
        result = client.compact(messages)
        warm = provider.requests[-1]
        asked = warm.settings.response_format
        assert asked == (summary_schema(warm.max_tokens or 0) if schema else None)
        assert (STRUCTURED_PROMPT in warm.messages[-1].text) is schema
        assert result.report.warm


def test_a_rate_limit_on_the_warm_call_is_the_compactions_failure() -> None:
    limited = [HTTPStatusError(429, ANTHROPIC_RATE_LIMIT_BODY)] * 3
    provider = ScriptedSummarizer(["Here are the docs.", *limited])
    client, messages, _ = answered(provider)
    with pytest.raises(CompactionError, match="rate limit"):
        client.compact(messages)
    warm = [r.messages[-1] == summary_turn(None, structured=False) for r in provider.requests[1:]]
    assert warm == [True] * 3  # sent again after its waits, never rendered


def test_a_tool_call_left_without_its_result_is_answered_before_the_summary_turn() -> None:
    provider = ScriptedSummarizer(["Here are the docs.", summary])
    client, messages, sent = answered(provider)
    call = ToolCall(id="call_late", name="read_file", arguments={"path": "README.md"})
    grown = [*messages, Message.assistant(tool_calls=(call,))]
    result = client.compact(grown)
    warm = provider.requests[-1].messages
    assert warm[: len(sent.messages) + 2] == (*sent.messages, *grown[-2:])
    assert warm[-2].tool_result is not None and warm[-2].tool_result.call_id == "call_late"
    assert result.report.warm


def test_a_conversation_that_does_not_extend_the_last_send_is_rendered() -> None:
    provider = ScriptedSummarizer(["Here are the docs.", summary])
    client, messages, _ = answered(provider)
    edited = [messages[0], Message.user("Another task entirely."), *messages[2:]]
    assert client.last_sent is not None and client.last_sent.previous_for(edited) is None
    result = client.compact(edited)
    assert provider.requests[-1].messages[0].text == SYSTEM_PROMPT
    assert not result.report.warm


def test_auto_compaction_continues_the_previous_request_too() -> None:
    provider = ScriptedSummarizer(["Here are the docs.", summary])
    client, messages, sent = answered(provider)
    grown = [*messages, Message.user("And the changelog.")]
    assert client.last_sent is not None
    previous = client.last_sent.previous_for(grown)
    assert previous == PreviousRequest(request=sent, since=tuple(grown[-2:]))
    room = provider.estimator.count(grown) * 100 // 90  # past auto_compact_pct's 80%
    decision = auto_compact(
        provider,
        grown,
        breaker=CompactionBreaker(),
        window=4_000,
        output_reserve=4_000 - room,
        previous=previous,
    )
    assert decision.result is not None and decision.result.report.warm
    assert provider.requests[-1].messages[: len(sent.messages)] == sent.messages


def test_compact_takes_the_previous_request_it_is_given() -> None:
    provider = ScriptedSummarizer([summary])
    messages = conversation()
    sent = Request(messages=tuple(messages), tools=(READ,), max_tokens=100)
    answer = Message.assistant("Here are the docs.")
    previous = PreviousRequest(request=sent, since=(answer,))
    result = compact(provider, [*messages, answer], previous=previous)
    (request,) = provider.requests
    assert request.messages[:-1] == (*messages, answer) and request.tools == (READ,)
    assert result.report.warm


@pytest.mark.parametrize(("model", "warm"), [("claude-sonnet-4-6", True), ("gpt-4o", False)])
def test_the_warm_request_is_taken_where_it_costs_less(model: str, warm: bool) -> None:
    # Large tool results, which the rendered text cuts to a few thousand characters: a
    # cache read at a tenth of the input price (Anthropic) makes the warm request cheaper,
    # at half of it (gpt-4o, the catalog's prices) the rendered one.
    ratio = read_ratio(ScriptedSummarizer([], model=model))
    assert ratio == pytest.approx(0.1 if warm else 0.5)
    provider = ScriptedSummarizer(["Here are the docs.", summary], model=model)
    client, messages, _ = answered(provider, result_chars=20_000)
    result = client.compact(messages)
    assert result.report.warm is warm
    assert (provider.requests[-1].messages[0].text == SYSTEM_PROMPT) is not warm

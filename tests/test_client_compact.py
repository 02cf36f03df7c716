"""`Client.compact` / `acompact`: the library entry point of /compact (issue 5)."""

from __future__ import annotations

import copy

import pytest

from chatcli.compaction import is_summary_message
from chatcli.errors import CompactionError
from chatcli.messages import Message
from chatcli.recovery import Client
from tests.compaction_fakes import (
    ANTHROPIC_RATE_LIMIT_BODY,
    HTTPStatusError,
    ScriptedSummarizer,
    agent_session,
    conversation_text,
    faithful_summary,
)


@pytest.mark.parametrize("mode", ["sync", "async"])
async def test_compact_summarises_the_middle_with_the_clients_provider(mode: str) -> None:
    messages = agent_session(6)
    before = copy.deepcopy(messages)
    summarizer = ScriptedSummarizer([faithful_summary])
    client = Client(summarizer)
    if mode == "sync":
        result = client.compact(messages, focus="the parser")
    else:
        result = await client.acompact(messages, focus="the parser")
    assert messages == before  # the caller's transcript is untouched
    assert result.messages[0] == messages[0]
    assert is_summary_message(result.messages[1])
    assert result.messages[2:] == tuple(messages[-8:])
    (request,) = summarizer.requests
    assert "focus on: the parser" in conversation_text(request)


def test_a_separate_summarizer_is_used_instead_of_the_chat_provider() -> None:
    chat = ScriptedSummarizer([])  # would fail the test if called: its script is empty
    summarizer = ScriptedSummarizer([faithful_summary])
    result = Client(chat).compact(agent_session(6), summarizer=summarizer)
    assert (len(chat.requests), len(summarizer.requests)) == (0, 1)
    assert result.report.calls == 1


def test_a_failed_compaction_raises_and_changes_nothing() -> None:
    messages = agent_session(6)
    before = copy.deepcopy(messages)
    failures: list[BaseException | str] = [HTTPStatusError(429, ANTHROPIC_RATE_LIMIT_BODY)] * 3
    sleeps: list[float] = []
    client = Client(ScriptedSummarizer(failures), sleep=sleeps.append)
    with pytest.raises(CompactionError, match="rate limit"):
        client.compact(messages)
    assert messages == before
    assert sleeps == [1.0, 2.0]  # the client's injected sleep: the summary call was retried


def test_the_next_sends_of_the_compacted_history_start_from_the_compaction() -> None:
    messages = agent_session(6)
    provider = ScriptedSummarizer([faithful_summary, "the answer", "the next answer"])
    client = Client(provider, microcompact=None)
    result = client.compact(messages)
    grown = [*messages, Message.user("and now?")]
    client.send(grown)
    assert provider.requests[-1].messages == (*result.messages, grown[-1])
    client.send([*grown, Message.assistant("the answer"), Message.user("more?")])
    assert provider.requests[-1].messages[: len(result.messages)] == result.messages
    # Another conversation is not given this one's compaction.
    client.send([Message.user("a new conversation")])
    assert [m.text for m in provider.requests[-1].messages] == ["a new conversation"]

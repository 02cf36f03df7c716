"""`Client.stream` against the real llama-server (the tiny random-weight model of
tests/servers.py, a 512-token window): deltas as they come, an escalated continuation as one
stream, recovery events in order before the recovered answer, and closing mid-stream."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from chatcli import Client, Message, RecoveryConfig, Settings
from chatcli.events import Continued, Escalated, Event, LevelApplied, OverflowDetected
from chatcli.providers.base import TextDelta
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Reply
from chatcli.tokens.estimate import TokenEstimator
from tests.test_client_stream import shown_text
from tests.test_e2e_llama_server import connect

pytest_plugins = ("tests.servers",)

GREEDY = Settings(temperature=0.0, seed=1)
PROMPT = (Message.system("Answer at length."), Message.user("Tell me a long story."))


@pytest.fixture
def adapter(llama_server: str) -> Iterator[OpenAICompatible]:
    with connect(llama_server) as provider:
        yield provider


@pytest.mark.llama_server
def test_an_escalated_continuation_streams_as_one_answer(adapter: OpenAICompatible) -> None:
    # 4 tokens, doubled twice: the random model never stops that early, so the answer is cut
    # and continued twice, and the stream carries all three calls as one answer.
    client = Client(adapter, RecoveryConfig(max_token_escalations=2), estimator=TokenEstimator())
    items = list(client.stream(PROMPT, max_tokens=4, settings=GREEDY))
    reply = items[-1]
    assert isinstance(reply, Reply) and reply.calls == 3
    assert [type(item) for item in items if isinstance(item, Event)] == [
        Escalated,
        Continued,
        Escalated,
        Continued,
    ]
    assert shown_text(items) == reply.message.text != ""
    # Deltas before the first escalation and after the last continuation: one live stream.
    first = next(i for i, item in enumerate(items) if isinstance(item, Escalated))
    last = max(i for i, item in enumerate(items) if isinstance(item, Continued))
    assert any(isinstance(item, TextDelta) for item in items[:first])
    assert any(isinstance(item, TextDelta) for item in items[last:])


@pytest.mark.llama_server
def test_an_overflow_is_recovered_before_the_first_delta(
    adapter: OpenAICompatible, n_ctx: int
) -> None:
    history = [Message.system("Be brief.")]
    for i in range(30):
        history += [Message.user(f"question {i}: " + "tell me more " * 8), Message.assistant("ok")]
    history.append(Message.user("And the last question?"))
    # The window is not declared: the server's rejection (its numbers) drives the recovery.
    client = Client(adapter, estimator=TokenEstimator())
    items = list(client.stream(history, max_tokens=16, settings=GREEDY))
    reply = items[-1]
    assert isinstance(reply, Reply) and reply.calls >= 2
    first_delta = next(i for i, item in enumerate(items) if isinstance(item, TextDelta))
    before = [item for item in items[:first_delta] if isinstance(item, Event)]
    assert isinstance(before[0], OverflowDetected) and before[0].limit == n_ctx
    assert any(isinstance(event, LevelApplied) for event in before)
    assert shown_text(items) == reply.message.text
    assert "And the last question?" in reply.view[-1].text


@pytest.mark.llama_server
def test_closing_the_stream_mid_answer_leaves_the_client_usable(
    adapter: OpenAICompatible,
) -> None:
    client = Client(adapter, estimator=TokenEstimator())
    stream = client.stream(PROMPT, max_tokens=400, settings=GREEDY)
    first = next(item for item in stream if isinstance(item, TextDelta))
    assert first.text
    stream.close()
    with pytest.raises(StopIteration):
        next(stream)
    # The server's slot and the client's connection were released: the next call answers.
    again = client.send(PROMPT, max_tokens=8, settings=GREEDY)
    assert again.message.text

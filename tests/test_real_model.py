"""A real model reads what chatcli sends: SmolLM2-135M-Instruct (tests/servers.py's
`smollm2_model`, `smollm2_server`), where the rest of the suite runs on random weights.

- The English check (tests/english.py) is what the real-model tests judge answers by; here it
  is shown to tell the real model's answers from the random model's on the same prompts,
  both live.
- A conversation over the window: the engine rejects it with its real overflow error, chatcli
  recovers, and the real model answers the latest request in English, ending on its own.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chatcli.config import RecoveryConfig
from chatcli.events import Event, LevelApplied, OverflowDetected
from chatcli.messages import Message, StopReason
from chatcli.providers.llama_cpp import LlamaCpp
from chatcli.recovery import Client
from tests.english import english_share, is_english

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

PROMPTS = (
    "What is the capital of France?",
    "Explain in two sentences what a context window is.",
    "The nightly build fails with UnicodeDecodeError. What should I check first?",
)
WINDOW = 1024
# Plain English paragraphs about the conversation's topic, each about 120 tokens.
PARAGRAPH = (
    "We are planning the migration of the billing service from the old monolith to its own "
    "process. The invoices are stored in PostgreSQL and the payment provider calls us back "
    "with webhooks. Last week the team agreed to keep the database schema as it is, to move "
    "the webhook handler first, and to run both versions side by side for two weeks while "
    "we compare their results every night. The risky part is the retry logic: a webhook that "
    "arrives twice must not charge a customer twice."
)


def _answer(base_url: str, model: str, prompt: str) -> str:
    body = {
        "model": model,
        "messages": [{"role": "user", "content": prompt}],
        "max_tokens": 32,
    }
    answer = httpx.post(base_url + "/v1/chat/completions", json=body, timeout=120)
    answer.raise_for_status()
    text: str = answer.json()["choices"][0]["message"]["content"]
    return text


def test_the_english_check_tells_the_real_model_from_random_weights(
    smollm2_server: str, llama_server: str
) -> None:
    for prompt in PROMPTS:
        real = _answer(smollm2_server, "smollm2", prompt)
        random = _answer(llama_server, "chatcli-tiny", prompt)
        assert is_english(real), (prompt, real, english_share(real))
        assert not is_english(random), (prompt, random, english_share(random))


@pytest.fixture(scope="module")
def engine(smollm2_model: Path) -> Iterator[LlamaCpp]:
    provider = LlamaCpp(smollm2_model, n_ctx=WINDOW, seed=1, temperature=0.2, top_p=0.9)
    yield provider
    provider.close()


def test_a_conversation_over_the_window_is_recovered_and_answered(engine: LlamaCpp) -> None:
    history = [Message.system("You are a helpful assistant. Answer briefly.")]
    for turn in range(20):
        history += [
            Message.user(f"Note {turn + 1} about the migration: {PARAGRAPH}"),
            Message.assistant("Noted. The webhook handler moves first; retries must be safe."),
        ]
    history.append(Message.user("In one sentence: which part of the migration is risky?"))
    assert engine.count_tokens(history) > 2 * WINDOW

    events: list[Event] = []
    # Not predictive: the whole history is sent first, so the engine's own error is met.
    client = Client(engine, RecoveryConfig(), hooks=[events.append], predictive=False)
    reply = client.send(history, max_tokens=96)

    overflow = events[0]
    assert isinstance(overflow, OverflowDetected)
    assert overflow.limit == WINDOW  # the engine's own error, with its numbers
    assert any(isinstance(e, LevelApplied) for e in events)
    assert reply.message.text and is_english(reply.message.text), reply.message.text
    assert reply.stop_reason is StopReason.END_TURN  # a real model ends its answer itself
    assert reply.view[-1].text == history[-1].text  # the latest request was answered

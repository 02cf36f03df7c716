"""BANANA / ZX-4471 against llama.cpp's server on SmolLM2-135M-Instruct, its 8,192-token window.

The case where carried instructions once failed in front of this server: a conversation whose
first message is "Never use the word BANANA; the deploy code is ZX-4471.", then 40 turns
pasting standard-library docstrings (tests/carry_cases.py), sent through `Client.send`. The
conversation does not fit the server's window (its own tokenizer counts it: the overflow is
its real `exceed_context_size_error`), a recovery level shrinks the view, and the request
that is answered still holds the rule and the code, with nothing of the docstrings carried.
"""

from __future__ import annotations

import httpx
import pytest

from chatcli import Client, LevelApplied
from chatcli.config import RecoveryConfig
from chatcli.history.carry import carried_items
from chatcli.messages import Message
from chatcli.providers.base import Provider, Request, Response
from chatcli.providers.openai_compat import OpenAICompatible
from tests.carry_cases import BANANA, banana_conversation

pytest_plugins = ("tests.servers",)

MAX_TOKENS = 16
# 40 docstrings of 500 chars or more (51,723 chars): more than SmolLM2's 8,192 tokens, where
# the 300-700-char ones (17,761 chars) fit; the conversation overflowed on the
# model's own answers, which this test does not wait for.
LONG_DOCSTRINGS = (500, 5000)
# The window is learned from the server's own overflow, as a user's first request learns it.
CONFIG = RecoveryConfig(max_token_escalations=0)


class Sent:
    """The adapter, keeping what each request sent."""

    def __init__(self, inner: OpenAICompatible) -> None:
        self.inner = inner
        self.requests: list[Request] = []

    def complete(self, request: Request) -> Response:
        self.requests.append(request)
        return self.inner.complete(request)

    async def acomplete(self, request: Request) -> Response:
        self.requests.append(request)
        return await self.inner.acomplete(request)


def served_model(base_url: str) -> str:
    models = httpx.get(base_url + "/v1/models", timeout=10.0).json()
    name: str = models["data"][0]["id"]
    return name


@pytest.mark.llama_server
@pytest.mark.parametrize("first", [True, False], ids=["first-message", "second-message"])
def test_banana_and_the_code_survive_forty_pasted_docstrings(
    smollm2_server: str, first: bool
) -> None:
    adapter = OpenAICompatible(smollm2_server + "/v1", served_model(smollm2_server), environ={})
    provider = Sent(adapter)
    messages: list[Message] = banana_conversation(first=first, sizes=LONG_DOCSTRINGS)
    checked: Provider = provider
    reply = Client(checked, CONFIG).send(messages, max_tokens=MAX_TOKENS)
    assert any(isinstance(e, LevelApplied) for e in reply.events)  # it did not fit
    answered = "\n".join(m.text for m in provider.requests[-1].messages)
    assert "BANANA" in answered and "ZX-4471" in answered
    assert [i.text for i in carried_items(reply.view)[0]] in ([], [BANANA])
    assert reply.message.text
    adapter.close()

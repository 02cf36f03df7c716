"""Never stuck, against the real C++ llama-server: a latest message five times the window is
answered (cut in the view), and the conversation goes on.

The server (tests/servers.py) runs the tiny random model with a 512-token window; its
overflows are its real `exceed_context_size_error` bodies, its token counts its own tokenizer.
"""

from __future__ import annotations

import pytest

from chatcli.config import RecoveryConfig
from chatcli.history.retain import CUT_NOTE
from chatcli.messages import Message
from chatcli.recovery import Client
from tests.test_e2e_llama_server import Recording, connect

pytest_plugins = ("tests.servers",)

MAX_TOKENS = 8
CONFIG = RecoveryConfig(max_token_escalations=0)
SYSTEM = Message.system("You are a careful client: keep the latest request and answer it.")


@pytest.mark.llama_server
@pytest.mark.parametrize("declared", [False, True])
def test_a_latest_message_five_times_the_window_is_answered_then_the_next(
    llama_server: str, n_ctx: int, declared: bool
) -> None:
    provider = Recording(connect(llama_server, context_window=n_ctx if declared else None))
    client = Client(provider, CONFIG)
    paste = Message.user("Please read this log:\n" + "the cat sat on the mat. " * (n_ctx * 2))
    transcript = [SYSTEM, Message.user("hello"), Message.assistant("hi"), paste]
    reply = client.send(transcript, max_tokens=MAX_TOKENS)
    assert reply.calls <= 2 and reply.message.text
    assert CUT_NOTE in reply.view[-1].text and reply.view[-1].text.startswith("Please read")
    assert client.learned_windows or declared
    # The conversation goes on: the oversized message stays in the transcript, whole.
    transcript += [reply.message, Message.user("And what is the last word of it?")]
    calls_before = len(provider.requests)
    follow_up = client.send(transcript, max_tokens=MAX_TOKENS)
    assert follow_up.message.text and follow_up.view[-1] == transcript[-1]
    assert len(provider.requests) - calls_before == follow_up.calls <= 2

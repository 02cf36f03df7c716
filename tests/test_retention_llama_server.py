"""Never stuck, against the real C++ llama-server: a latest message five times the window is
answered (cut in the view), and the conversation goes on.

The server (tests/servers.py) runs the tiny random model with a 512-token window; its
overflows are its real `exceed_context_size_error` bodies, its token counts its own tokenizer.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from chatcli.chat.context import Status
from chatcli.chat.session import ChatSession
from chatcli.chat.text import CompactionNote
from chatcli.config import RecoveryConfig
from chatcli.events import Event, LevelApplied, PreflightRecovery
from chatcli.history.retain import CUT_NOTE
from chatcli.messages import Message
from chatcli.recovery import Client
from chatcli.store import SessionStore
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


@pytest.mark.llama_server
def test_the_chat_shows_what_recovery_did_to_a_paste(
    llama_server: str, n_ctx: int, tmp_path: Path
) -> None:
    # The case seen in the chat: a paste many times the window, cut by a level. Auto-
    # compaction's fallback (no summary fits the tiny window) would not shrink it, so it is
    # not applied; it counted the prompt as pre-flight did; /context names the level as what
    # cut it, and lists no notice no event announced; the cut names the message's number.
    provider = connect(llama_server, context_window=n_ctx)
    with SessionStore(tmp_path / "s.db") as store:
        session = ChatSession.open(
            store, provider, provider_name="llama", model="tiny", max_tokens=MAX_TOKENS
        )
        session.send("hello")
        events: list[Event] = []
        session.send(
            "Please read this log:\n" + "the cat sat on the mat. " * (n_ctx * 2),
            on_event=events.append,
        )
        said = "\n".join(e.describe() for e in events)
        preflight = next(e for e in events if isinstance(e, PreflightRecovery))
        notes = [e for e in events if isinstance(e, CompactionNote)]
        assert all(n.result is None for n in notes)
        assert all(f"~{preflight.estimate:,} -> " in n.describe() for n in notes if n.error)
        report = session.context_report()
        (paste,) = [row for row in report.rows if row.position == 3]
        level = max(e.level for e in events if isinstance(e, LevelApplied))  # 3 in 512 tokens
        assert (paste.status, paste.detail) == (
            Status.CUT,
            f"level {level}, kept from an earlier request",
        )
        added = [row.detail for row in report.rows if row.status == Status.ADDED]
        assert all("notice" not in detail for detail in added) or "notice" in said
        sent = store.view(session.info.id, store.requests(session.info.id)[-1].id)
        assert any("the whole message #3 ...]" in m.text for m in sent)

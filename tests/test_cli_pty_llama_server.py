"""Issue 8's "nothing can brick a session", as a user meets it: the chatcli command in a
pseudo-terminal against the real C++ llama-server (tests/servers.py: the tiny random model,
a 512-token window). A paste several times the window is answered, then a normal message,
then, after the process exits, `chatcli --continue -p ...`: no turn fails."""

from __future__ import annotations

from pathlib import Path

import pytest

from chatcli.history.retain import CUT_NOTE
from chatcli.store import SessionStore
from tests.test_cli_pty import PROMPT, finish, spawn

pytest_plugins = ("tests.servers",)

# bracketed paste, as a terminal sends a paste to prompt_toolkit
PASTE_START, PASTE_END = "\x1b[200~", "\x1b[201~"
ANSWERED = r"([\d,]+) in · ([\d,]+) out"  # the usage line under every answer
FAILED = ("error:", "recovery failed", "does not fit", "Traceback")


def pasted_log(n_ctx: int) -> str:
    """A log a user pastes whole: several times the window, whatever the tokenizer."""
    line = "2026-12-02 18:{:02d}:00 worker-{} the cat sat on the mat"
    lines = [line.format(i % 60, i % 7) for i in range(n_ctx // 2)]
    return "Please read this log:\n" + "\n".join(lines)


def assert_no_failure(screen: str) -> None:
    assert not any(word in screen for word in FAILED), screen[-2000:]


@pytest.mark.llama_server
def test_an_oversized_paste_a_normal_message_then_continue_are_all_answered(
    llama_server: str, n_ctx: int, tmp_path: Path
) -> None:
    server = ("--provider", "openai-compatible", "--base-url", llama_server)
    model = ("--model", "chatcli-tiny", "--max-tokens", "8")
    child = spawn(tmp_path, *server, *model, timeout=120)
    child.expect_exact(PROMPT)
    paste = pasted_log(n_ctx)
    child.send(PASTE_START + paste + PASTE_END)
    child.send("\r")
    child.expect(ANSWERED)
    assert int(child.match.group(2)) > 0
    assert_no_failure(child.before)
    child.expect_exact(PROMPT)
    child.sendline("and what does it say?")
    child.expect(ANSWERED)
    assert int(child.match.group(2)) > 0
    assert_no_failure(child.before)
    child.expect_exact(PROMPT)
    child.sendline("/quit")
    assert finish(child) == 0

    again = spawn(tmp_path, "--continue", "-p", "one more question", timeout=120)
    again.expect(ANSWERED)
    assert int(again.match.group(2)) > 0
    assert_no_failure(again.before)
    assert finish(again) == 0
    # The paste was larger than the window: the transcript keeps it whole, and the view each
    # answer was given on (a "chat" request) held it cut, then not at all.
    with SessionStore(tmp_path / "sessions.db") as store:
        info = store.latest_session()
        assert info is not None
        transcript = store.transcript(info.id)
        chats = [r for r in store.requests(info.id) if r.tag == "chat"]
        views = [[m.text for m in store.view(info.id, r.id)] for r in chats]
    assert transcript[0].text == paste and len(transcript) == 6 and len(views) == 3
    assert not any(paste in view for view in views)
    assert any(CUT_NOTE in text for text in views[0])


@pytest.mark.llama_server
def test_the_chat_sends_an_output_limit_and_shows_only_numbers_it_knows(
    llama_server: str, n_ctx: int, tmp_path: Path
) -> None:
    # No --max-tokens: the chat sends a quarter of the window it read from /props (the tiny
    # model never stops on its own: without a limit it wrote until the window was full).
    server = ("--provider", "openai-compatible", "--base-url", llama_server)
    child = spawn(tmp_path, *server, "--model", "chatcli-tiny", timeout=120)
    child.expect_exact(PROMPT)
    child.sendline("tell me a story")
    child.expect(ANSWERED)
    screen = child.before
    events = [line for line in screen.splitlines() if "↻" in line]
    assert f"limit raised from {n_ctx // 4:,} to" in screen, screen[-2000:]
    assert events and not any("?" in line for line in events), events
    child.expect_exact(PROMPT)
    child.sendline("/quit")
    assert finish(child) == 0

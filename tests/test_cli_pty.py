"""The chatcli command as a user drives it: a real process in a pseudo-terminal (pexpect),
typing messages and slash commands and reading the screen. Against the scripted test provider
(the registry's python:MODULE:FACTORY hook) and the real embedded engine on the real small model
(`chatcli demo` end to end on SmolLM2, then `--continue`)."""

from __future__ import annotations

import io
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import pexpect
import pytest

from chatcli.chat.demo import SMOLLM2_N_CTX
from chatcli.cli import CLI_EXTRA_MISSING
from chatcli.store import SessionStore
from tests.english import demo_answers, is_english

ROOT = Path(__file__).resolve().parents[1]
CHATCLI = [sys.executable, "-c", "import sys; from chatcli.__main__ import main; sys.exit(main())"]
TEST_PROVIDER = "python:tests.cli_provider:windowed"

pytest_plugins = ("tests.servers",)
# prompt_toolkit turns bracketed paste on each time it shows the prompt: "ready for input".
PROMPT = "\x1b[?2004h"
ANSI = re.compile(r"\x1b\[[0-9;?]*[A-Za-z]")


def spawn(home: Path, *args: str, timeout: float = 30, **env: str) -> pexpect.spawn:
    environ = {
        **os.environ,
        "CHATCLI_HOME": str(home),
        "CHATCLI_CACHE": str(home / "cache"),
        "HOME": str(home),
        # The tests' helpers, then the path the tests were given (a checkout's src: the
        # chatcli under test, not an installed one).
        "PYTHONPATH": os.pathsep.join(filter(None, (str(ROOT), os.environ.get("PYTHONPATH")))),
        "TERM": "xterm-256color",
        "PROMPT_TOOLKIT_NO_CPR": "1",  # pexpect does not answer cursor-position requests
        **env,
    }
    child = pexpect.spawn(
        CHATCLI[0],
        [*CHATCLI[1:], *args],
        env=environ,
        cwd=str(ROOT),
        encoding="utf-8",
        timeout=timeout,
        dimensions=(50, 120),
        preexec_fn=_ctrl_c_interrupts,
    )
    return child


def _ctrl_c_interrupts() -> None:
    """A terminal's Ctrl-C, even when pytest runs as a background job (`pytest &` in a
    script), whose children inherit SIGINT ignored and so would never see the Ctrl-C."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def finish(child: pexpect.spawn) -> int:
    child.expect(pexpect.EOF)
    child.close()
    return int(child.exitstatus or 0)


def test_chat_slash_commands_ctrl_d_then_continue(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--provider", TEST_PROVIDER)
    child.expect("Ctrl-D quits")
    child.expect_exact(PROMPT)
    child.sendline("hello from the terminal")
    child.expect_exact("Answer to: hello from the terminal")
    child.expect_exact(PROMPT)
    # Type only at the prompt: between prompts the terminal is in cooked mode, where the
    # line discipline itself would swallow a Ctrl-D.
    child.sendline("/max-tokens many")
    child.expect_exact("'many' is not a number")
    child.expect_exact(PROMPT)
    child.sendline("/context")
    child.expect("verbatim")
    child.expect_exact(PROMPT)
    child.sendline("/cost")
    child.expect("Session: 1 requests")
    child.expect_exact(PROMPT)
    child.sendcontrol("d")
    child.expect("saved; reopen it with")
    assert finish(child) == 0

    again = spawn(tmp_path, "--continue")
    again.expect("2 messages so far")
    again.expect_exact(PROMPT)
    again.sendline("/history")
    again.expect_exact("hello from the terminal")
    again.expect_exact("Answer to: hello from the terminal")
    again.expect_exact(PROMPT)
    again.sendline("/quit")
    assert finish(again) == 0


def test_ctrl_c_cancels_the_answer_and_the_session_goes_on(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--provider", TEST_PROVIDER, CHATCLI_TEST_DELAY="0.05")
    child.expect_exact(PROMPT)
    child.sendline("a long answer please")
    child.expect("part1")  # streaming has begun (about 8 s to go)
    child.sendintr()
    child.expect("answer cancelled")
    child.expect_exact(PROMPT)
    child.sendline(f"/export json {tmp_path / 'out.json'}")
    child.expect("exported 2 messages")
    child.expect_exact(PROMPT)
    child.sendline("/quit")
    assert finish(child) == 0
    exported = (tmp_path / "out.json").read_text(encoding="utf-8")
    assert "[answer cancelled by the user]" in exported
    assert "part149" not in exported  # the rest never arrived


def test_ctrl_c_cancels_a_compaction_and_the_session_goes_on(tmp_path: Path) -> None:
    env = {"CHATCLI_TEST_DELAY": "0.02", "CHATCLI_COMPACT_KEEP_TURNS": "1"}
    child = spawn(tmp_path, "--provider", TEST_PROVIDER, **env)
    for i in range(3):
        child.expect_exact(PROMPT)
        child.sendline(f"question {i}")
        child.expect_exact(f"Answer to: question {i}")
    child.expect_exact(PROMPT)
    child.sendline("/compact")
    child.expect_exact("compacting")  # the summary takes seconds at this pace
    child.sendintr()
    child.expect_exact("/compact cancelled (Ctrl-C); the session is unchanged")
    child.expect_exact(PROMPT)
    child.sendline("still here")
    child.expect_exact("Answer to: still here")
    child.expect_exact(PROMPT)
    child.sendline("/quit")
    child.expect("saved; reopen it with")
    assert finish(child) == 0
    with SessionStore(tmp_path / "sessions.db") as store:
        info = store.latest_session()
        assert info is not None
        assert info.message_count == 8
        assert [e.kind for e in store.events(info.id) if e.kind == "compaction"] == []


def test_recovery_events_show_while_answering(tmp_path: Path) -> None:
    child = spawn(
        tmp_path,
        "--provider",
        TEST_PROVIDER,
        CHATCLI_TEST_WINDOW="600",
        CHATCLI_AUTO_COMPACT_PCT="100",
    )
    screen = ""
    for i in range(6):
        child.expect_exact(PROMPT)
        child.sendline(f"message {i}: " + "y" * 300)
        child.expect_exact(f"Answer to: message {i}")
        screen += child.before
    # A level shown as it happens: the request's own, or auto-compaction's fallback to one.
    assert re.search(r"↻ (auto-compaction fell back to )?level \d\b", screen), screen
    child.expect_exact(PROMPT)
    child.sendline("/quit")
    assert finish(child) == 0


def test_the_console_script_without_the_cli_extra_says_what_to_install(tmp_path: Path) -> None:
    # A plain `pip install chatcli` has neither rich nor prompt_toolkit: stand-ins that fail
    # to import as a missing package does.
    for package in ("rich", "prompt_toolkit"):
        (tmp_path / f"{package}.py").write_text(
            f'raise ModuleNotFoundError("No module named {package!r}", name={package!r})\n',
            encoding="utf-8",
        )
    script = Path(sys.executable).parent / "chatcli"
    env = {**os.environ, "PYTHONPATH": str(tmp_path), "CHATCLI_HOME": str(tmp_path)}
    done = subprocess.run([str(script)], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr == CLI_EXTRA_MISSING + "\n"
    assert "pip install 'chatcli-recovery[cli]'" in done.stderr


def test_one_shot_prints_the_answer_and_exits(tmp_path: Path) -> None:
    child = spawn(tmp_path, "--provider", TEST_PROVIDER, "-p", "just once")
    child.expect_exact("Answer to: just once")
    assert finish(child) == 0


@pytest.mark.llama_server
def test_demo_end_to_end_then_continue_and_read_the_transcript(
    tmp_path: Path, smollm2_model: Path
) -> None:
    # The demo's default model, SmolLM2, from the cache scripts/test.sh fetched it into.
    cache = str(smollm2_model.parent.parent)
    child = spawn(tmp_path, "demo", timeout=180, CHATCLI_CACHE=cache)
    screen = io.StringIO()
    child.logfile_read = screen
    child.expect("The demo runs SmolLM2-135M-Instruct")
    # Levels 1 and 2 (level 2 keeps what fits 75% of the room, so level 3 is rarely needed).
    for level in (1, 2):
        child.expect(rf"↻ level {level} \(")
    child.expect("escalation|pre-flight")
    child.expect("Session: ")
    child.expect(r"chatcli sessions show (\w+)")
    session_id = child.match.group(1)
    assert finish(child) == 0
    answers = demo_answers(ANSI.sub("", screen.getvalue()))
    assert is_english(answers), answers

    again = spawn(tmp_path, "--continue", timeout=120, CHATCLI_CACHE=cache)
    again.expect(rf"session {session_id}")
    again.expect(r"(\d+) messages so far")
    messages = int(again.match.group(1))
    again.expect_exact(PROMPT)
    again.sendline("/history")
    again.expect_exact("The nightly build fails. Read the log and explain")
    again.expect_exact("UnicodeDecodeError")  # the full traceback, whatever the view kept
    again.expect_exact(PROMPT)
    # The reopened session runs on the demo's engine settings (its 512-token window), not
    # llama-cpp's defaults: the next message is answered.
    again.sendline("/context")
    again.expect_exact(f"of a {SMOLLM2_N_CTX}-token window")
    again.expect_exact(PROMPT)
    again.sendline("and now?")
    again.expect(r"(\d+) in · (\d+) out")
    assert "error:" not in again.before and "recovery failed" not in again.before
    assert int(again.match.group(2)) > 0
    again.expect_exact(PROMPT)
    again.sendline("/quit")
    assert finish(again) == 0
    assert messages > 20

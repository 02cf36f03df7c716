"""The chatcli command in-process: typed lines through prompt_toolkit's pipe input, the screen
rendered by rich to a string, the scripted windowed test provider behind the registry hook."""

from __future__ import annotations

import io
import json
import shutil
import sys
import tempfile
from collections.abc import Iterator, Sequence
from pathlib import Path

import pytest
from prompt_toolkit.input import create_pipe_input
from prompt_toolkit.output import DummyOutput
from rich.console import Console

from chatcli.__main__ import main
from chatcli.chat.cost import CostSummary
from chatcli.chat.text import CompactionNote, CompactionStarted
from chatcli.cli.chat import StreamView
from chatcli.cli.render import cost_table
from chatcli.cli.slash import SLASH_COMMANDS
from chatcli.cli.ui import Ui
from chatcli.events import Escalated
from chatcli.messages import Usage
from chatcli.serialize import message_from_dict
from chatcli.store import SessionStore, StoredRequest
from tests.cli_provider import LONG_TAIL
from tests.recorded import sse_events
from tests.replay import Scripted, replay_server

TEST_PROVIDER = "python:tests.cli_provider:windowed"


def run(
    home: Path,
    lines: Sequence[str],
    argv: Sequence[str] = ("--provider", TEST_PROVIDER),
    env: dict[str, str] | None = None,
    stdin: str | None = None,
    width: int = 120,
) -> tuple[int, str]:
    """Run chatcli with `lines` typed at the prompt (or `stdin` piped); (exit code, screen)."""
    environ = {"CHATCLI_HOME": str(home), "HOME": str(home), **(env or {})}
    screen = io.StringIO()
    with create_pipe_input() as typed:
        typed.send_text("".join(f"{line}\n" for line in lines))
        typed.close()  # then Ctrl-D: the end of input
        ui = Ui(
            console=Console(file=screen, width=width),
            input=typed,
            output=DummyOutput(),
            interactive=stdin is None,
            stdin=io.StringIO(stdin or ""),
        )
        code = main(list(argv), ui=ui, environ=environ)
    return code, screen.getvalue()


def stored(home: Path) -> SessionStore:
    return SessionStore(home / "sessions.db")


def test_a_chat_is_answered_and_stored_in_full(tmp_path: Path) -> None:
    code, screen = run(tmp_path, ["hello there", "second question"])
    assert code == 0
    assert "Answer to: hello there" in screen and "Answer to: second question" in screen
    with stored(tmp_path) as store:
        info = store.latest_session()
        assert info is not None
        texts = [m.text for m in store.transcript(info.id)]
        requests = store.requests(info.id)
    assert texts == [
        "hello there",
        "Answer to: hello there",
        "second question",
        "Answer to: second question",
    ]
    assert [r.tag for r in requests] == ["chat", "chat"]
    assert f"chatcli --resume {info.id}" in screen  # Ctrl-D says how to come back


def test_every_slash_command_is_in_help(tmp_path: Path) -> None:
    _, screen = run(tmp_path, ["/help"])
    for name in SLASH_COMMANDS:
        assert f"/{name}" in screen


@pytest.mark.parametrize(
    ("line", "error"),
    [
        ("/frobnicate", "unknown command /frobnicate"),
        ("/max-tokens lots", "'lots' is not a number (usage: /max-tokens N)"),
        ("/max-tokens 0", "must be at least 1"),
        ("/export", "give a path"),
        ("/export md", "give a path"),
        ('/export "unclosed', "cannot read the path: no closing quotation"),
        ("/resume", "give one session id"),
        ("/resume nosuchid", "no session matching 'nosuchid'"),
        ("/cost now", "unexpected argument 'now'"),
        ("/model", "give one model name"),
    ],
)
def test_bad_commands_get_one_line_and_the_chat_goes_on(
    tmp_path: Path, line: str, error: str
) -> None:
    code, screen = run(tmp_path, [line, "still here"])
    assert code == 0
    errors = [row for row in screen.splitlines() if row.startswith("error:")]
    assert len(errors) == 1 and error in errors[0]
    assert "Answer to: still here" in screen


@pytest.mark.parametrize("arg", ['"unclosed', "'", "\\", "a b c", "-1", "%_*"])
def test_no_argument_breaks_a_slash_command(
    tmp_path: Path, arg: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)  # "/export -1" writes ./-1
    lines = [f"/{name} {arg}" for name in SLASH_COMMANDS]
    code, screen = run(tmp_path, [*lines, "still here"])
    assert code == 0 and "Answer to: still here" in screen
    assert "Traceback" not in screen
    errors = [row for row in screen.splitlines() if row.startswith("error:")]
    assert len(errors) <= len(lines)


def test_cost_shows_unknown_prices_as_unknown_never_zero(tmp_path: Path) -> None:
    _, screen = run(tmp_path, ["hi", "/cost"])
    session_line = next(row for row in screen.splitlines() if row.startswith("Session:"))
    assert "cost unknown" in session_line
    assert "some prices are unknown" in screen


def test_cost_with_catalog_prices(tmp_path: Path) -> None:
    argv = ("--provider", TEST_PROVIDER, "--model", "gpt-4o-mini")
    _, screen = run(tmp_path, ["hi", "/cost"], argv)
    session_line = next(row for row in screen.splitlines() if row.startswith("Session:"))
    assert "unknown" not in session_line
    with stored(tmp_path) as store:
        info = store.latest_session()
        assert info is not None
        (request,) = store.requests(info.id)
    usage = request.usage
    assert usage.input_tokens > 0 and usage.output_tokens > 0
    # gpt-4o-mini: $0.15 per million input tokens, $0.60 per million output tokens
    expected = (usage.input_tokens * 0.15 + usage.output_tokens * 0.60) / 1e6
    assert request.cost_usd == pytest.approx(expected)
    assert f"cost ${expected:.6f}" in session_line


def test_an_event_is_shown_once_not_again_by_the_spinner() -> None:
    screen = io.StringIO()
    view = StreamView(Ui(console=Console(file=screen, force_terminal=True, width=120)))
    with view:  # the spinner: a transient Live, drawn once more when it stops
        view.event(Escalated(attempt=1, old=50, new=100))
    assert screen.getvalue().count("limit raised from 50 to 100") == 1
    assert "waiting for the model" in screen.getvalue()


def test_a_cancelled_answer_stays_on_screen_and_its_tokens_are_counted(tmp_path: Path) -> None:
    # After Ctrl-C the streamed text vanished from the screen (the transcript kept it), and
    # /cost showed the cancelled request as 0 tokens and $0.0000 though its prompt had been
    # processed.
    argv = ("--provider", TEST_PROVIDER, "--model", "gpt-4o-mini")
    env = {"CHATCLI_TEST_CANCEL_AFTER": "48"}
    question = "a long answer please, about " + "the parser " * 40
    _, screen = run(tmp_path, [question, "/cost"], argv, env=env)
    partial = f"Answer to: {question}"[:48]
    cancelled = screen.index("answer cancelled (Ctrl-C): about ")
    assert partial in screen[:cancelled]  # the partial answer, printed once the stream stopped
    assert "prompt and 12 output tokens were processed" in screen
    with stored(tmp_path) as store:
        info = store.latest_session()
        assert info is not None
        (request,) = store.requests(info.id)
    assert request.tag == "cancelled"
    assert request.usage.prompt_tokens > len(question) // 6 and request.usage.output_tokens == 12
    assert (request.cost_usd or 0) > 0  # at gpt-4o-mini's prices
    row = next(line for line in screen.splitlines() if "cancelled" in line and "│" in line)
    assert f"~{request.usage.prompt_tokens:,}" in row and "~12" in row  # marked as estimated
    assert "~ estimated: none reported" in screen


def test_context_carried_shows_the_carried_instructions_whole(tmp_path: Path) -> None:
    rule = (
        "Never push to main without a review, and always record every change in CHANGELOG.md "
        "before you commit it."
    )
    questions = [f"question {i}: " + "tell me more about the parser " * 25 for i in range(8)]
    env = {"CHATCLI_TEST_WINDOW": "2500", "CHATCLI_AUTO_COMPACT_PCT": "100"}
    _, screen = run(tmp_path, [rule, *questions, "/context", "/context carried"], env=env)
    assert "carried instruction(s) in the view: /context carried shows them" in screen
    carried = screen[screen.index("carried into the next request") :]
    assert " ".join(carried.split()).count(rule) == 1  # whole, not the table's 60-char preview
    assert "#1 (" in carried  # the transcript message it came from


def test_history_n_shows_the_last_n_messages_with_their_numbers(tmp_path: Path) -> None:
    lines = ["first question", "second question", "/history 2", "/history 0"]
    _, screen = run(tmp_path, lines)
    shown = screen[screen.index("[3] user") :]
    assert "second question" in shown and "[4] assistant" in shown
    assert "[1] user" not in screen and "first question" not in shown.split("[3] user")[0]
    assert "the last 2 of 4 messages (/history shows all)" in screen
    assert "error: '0' is not a number of messages (usage: /history [N])" in screen


def test_compact_errors_are_clean_and_a_model_that_failed_is_refused_at_once(
    tmp_path: Path,
) -> None:
    # The test model answers "Answer to: ..." to a summary request too: no sections. The
    # error showed the summary's repr (a raw backslash-n); the second /compact took as long
    # as the first to be refused.
    lines = [f"question {i}: about the parser" for i in range(4)] + ["/compact", "/compact"]
    _, screen = run(tmp_path, lines)
    errors = [line for line in screen.splitlines() if line.startswith("error: ")]
    assert len(errors) == 2 and "it has 0 of the 7 sections" in errors[0]
    assert "\\n" not in errors[0]
    assert "nothing was changed: not asked again: the model cannot summarise" in errors[1]
    with stored(tmp_path) as store:
        info = store.latest_session()
        assert info is not None
        tags = [r.tag for r in store.requests(info.id)]
    assert tags == ["chat"] * 4 + ["compaction-failed"]  # the second one made no call


def test_an_error_on_a_terminal_wraps_between_words() -> None:
    # A /compact error ran past the terminal's width and the terminal cut it mid-word.
    message = "compaction failed, nothing was changed: the summary was rejected: " * 3
    screen = io.StringIO()
    Ui(console=Console(file=screen, width=60, force_terminal=True, color_system=None)).error(
        message
    )
    lines = screen.getvalue().splitlines()
    assert len(lines) > 1 and all(len(line) <= 60 for line in lines)
    assert " ".join(" ".join(lines).split()) == " ".join(f"error: {message}".split())
    piped = io.StringIO()  # a script reading errors gets each on one line
    Ui(console=Console(file=piped, width=60)).error(message)
    assert len(piped.getvalue().splitlines()) == 1


def test_the_spinner_says_compacting_while_auto_compaction_runs() -> None:
    screen = io.StringIO()
    view = StreamView(Ui(console=Console(file=screen, force_terminal=True, width=120)))
    with view:
        assert view.status == "waiting for the model…"
        view.event(CompactionStarted())
        assert view.status == "compacting…"
        view.event(CompactionNote(result=None, notice=None, error="it failed"))
        assert view.status == "waiting for the model…"  # the answer's turn now
    assert "compacting…" in screen.getvalue()
    assert screen.getvalue().count("auto-compaction changed nothing: it failed") == 1


def test_max_tokens_escalation_is_visible_and_the_answer_is_stitched(tmp_path: Path) -> None:
    _, screen = run(tmp_path, ["/max-tokens 50", "a long one please"])
    assert "max_tokens: 50" in screen
    assert "limit raised from 50 to 100 (escalation 1)" in screen
    assert "continuing the cut answer" in screen
    with stored(tmp_path) as store:
        info = store.latest_session()
        assert info is not None
        answer = store.transcript(info.id)[-1].text
        (request,) = store.requests(info.id)
    # stitched whole: nothing repeated or lost at the seams
    assert answer == "Answer to: a long one please" + LONG_TAIL
    assert request.recovery_cost_usd is None  # continuation calls at an unknown price


def test_partial_answer_is_flagged(tmp_path: Path) -> None:
    env = {"CHATCLI_MAX_TOKEN_ESCALATIONS": "0"}
    _, screen = run(tmp_path, ["/max-tokens 20", "long answer"], env=env)
    assert "partial answer" in screen


def test_overflow_recovery_is_visible(tmp_path: Path) -> None:
    env = {"CHATCLI_TEST_WINDOW": "600", "CHATCLI_AUTO_COMPACT_PCT": "100"}
    lines = [f"message {i}: " + "x" * 300 for i in range(6)]
    _, screen = run(tmp_path, [*lines, "/context"], env=env)
    events = [row for row in screen.splitlines() if row.startswith("↻")]
    assert any("level" in row for row in events), screen
    assert "Answer to: message 5" in screen
    assert "only in transcript" in screen  # /context: dropped from the view, still stored


def test_context_shows_the_bar_and_each_message(tmp_path: Path) -> None:
    _, screen = run(tmp_path, ["first", "/context"])
    assert "% " in screen and "100,000-token window" in screen
    rows = [row for row in screen.splitlines() if "verbatim" in row]
    assert len(rows) == 2 and "first" in rows[0] and "Answer to: first" in rows[1]


def test_clear_keeps_the_transcript_and_empties_the_view(tmp_path: Path) -> None:
    _, screen = run(tmp_path, ["before", "/clear", "after", "/context", "/history", "/cost"])
    assert "working view cleared" in screen
    assert screen.count("only in transcript") == 2  # "before" and its answer
    assert "[1] user" in screen and "[4] assistant" in screen  # /history: all four
    assert "Session: 2 requests" in screen  # a /clear is no request
    assert not any(" clear " in row for row in screen.splitlines() if row.startswith("│"))


def test_cost_table_names_a_model_file_by_its_file_name() -> None:
    def request(number: int, tag: str, model: str) -> StoredRequest:
        usage = Usage(100, 10)
        return StoredRequest(
            id=number,
            created_at="t",
            tag=tag,
            model=model,
            usage=usage,
            cost_usd=0.0,
            recovery_cost_usd=0.0,
        )

    summary = CostSummary(
        requests=(
            request(1, "chat", "/root/.cache/chatcli/chatcli-tiny.gguf"),
            request(2, "compaction", "/root/.cache/chatcli/chatcli-tiny.gguf"),
        )
    )
    screen = io.StringIO()
    Console(file=screen, width=120).print(cost_table(summary))
    assert "chatcli-tiny.gguf" in screen.getvalue() and "/root" not in screen.getvalue()
    assert "of which recovery $0.0000 and compaction $0.0000" in screen.getvalue()


def test_export_writes_the_full_transcript(tmp_path: Path) -> None:
    out_json, out_md = tmp_path / "t.json", tmp_path / "t.md"
    run(tmp_path, ["hello", f"/export json {out_json}", f"/export {out_md}"])
    data = json.loads(out_json.read_text(encoding="utf-8"))
    messages = [message_from_dict(m) for m in data["messages"]]
    assert [m.text for m in messages] == ["hello", "Answer to: hello"]
    assert "## 1. User" in out_md.read_text(encoding="utf-8")


def test_continue_reopens_and_history_shows_everything(tmp_path: Path) -> None:
    run(tmp_path, ["remember the word pelican"])
    code, screen = run(
        tmp_path, ["/history", "and now?"], ("--continue", "--provider", TEST_PROVIDER)
    )
    assert code == 0
    assert "2 messages so far" in screen
    assert "remember the word pelican" in screen.split("Answer to: and now?")[0]
    with stored(tmp_path) as store:
        assert len(store.list_sessions()) == 1
        info = store.latest_session()
        assert info is not None
        assert len(store.transcript(info.id)) == 4


def test_a_chat_left_without_a_message_stores_nothing_and_continue_skips_it(
    tmp_path: Path,
) -> None:
    code, screen = run(tmp_path, ["/clear", "/context"])
    assert code == 0 and "new session" in screen
    assert "saved; reopen it with" not in screen  # there is nothing to reopen
    with stored(tmp_path) as store:
        assert store.list_sessions() == ()
    run(tmp_path, ["remember the word pelican"])
    run(tmp_path, [])
    run(tmp_path, ["/sessions"])
    _, screen = run(tmp_path, [], ("--continue",))
    assert "2 messages so far" in screen
    with stored(tmp_path) as store:
        (only,) = store.list_sessions()
    assert only.message_count == 2


def test_continue_without_a_provider_uses_the_sessions_own(tmp_path: Path) -> None:
    run(tmp_path, ["first"])
    code, screen = run(tmp_path, ["again"], ("--continue",))
    assert code == 0 and "Answer to: again" in screen
    assert TEST_PROVIDER in screen


def test_a_reopened_session_keeps_its_settings_unless_a_flag_overrides(tmp_path: Path) -> None:
    run(tmp_path, ["first"], ("--provider", TEST_PROVIDER, "--max-tokens", "40"))
    env = {"CHATCLI_MAX_TOKENS": "999"}  # a default for new sessions only
    _, screen = run(tmp_path, ["/context"], ("--continue",), env=env)
    assert "+ 40 reserved for the answer" in screen
    _, screen = run(tmp_path, ["/max-tokens 60"], ("--continue",))
    _, screen = run(tmp_path, ["/context"], ("--continue",), env=env)
    assert "+ 60 reserved for the answer" in screen  # /max-tokens is kept too
    _, screen = run(tmp_path, ["/context"], ("--continue", "--max-tokens", "70"))
    assert "+ 70 reserved for the answer" in screen


def test_resume_and_sessions(tmp_path: Path) -> None:
    run(tmp_path, ["one"])
    with stored(tmp_path) as store:
        first = store.latest_session()
    assert first is not None
    _, screen = run(tmp_path, ["two", "/sessions", f"/resume {first.id[:6]}", "/history"])
    assert f"resumed session {first.id}" in screen
    assert screen.count(first.id) >= 2


@pytest.fixture
def usual_config_path() -> Iterator[str]:
    """An existing, empty config file at a path of a usual length (~50 chars; a CHATCLI_CONFIG
    that names no file is an error)."""
    home = Path(tempfile.mkdtemp(prefix="ada.lovelace-"))
    config = home / ".config" / "chatcli" / "config.toml"
    config.parent.mkdir(parents=True)
    config.touch()
    yield str(config)
    shutil.rmtree(home)


def test_slash_resume_reopens_on_the_stored_model_like_the_flag(tmp_path: Path) -> None:
    run(tmp_path, ["one"], ("--provider", TEST_PROVIDER, "--model", "first-model"))
    with stored(tmp_path) as store:
        first = store.latest_session()
    assert first is not None
    env = {"CHATCLI_MODEL": "other-model"}  # a default for new sessions only
    _, screen = run(tmp_path, ["two", f"/resume {first.id}", "three"], env=env)
    assert f"resumed session {first.id} (2 messages) · {TEST_PROVIDER} · first-model" in screen
    # What the user says on the command line still wins, as with --resume.
    flag = ("--provider", TEST_PROVIDER, "--model", "flag-model")
    run(tmp_path, [f"/resume {first.id}", "four"], flag, env=env)
    with stored(tmp_path) as store:
        models = [r.model for r in store.requests(first.id)]
    assert models == ["first-model", "first-model", "flag-model"]


@pytest.mark.parametrize("stdin", [None, "", "piped text"], ids=["tty", "empty-pipe", "pipe"])
def test_no_provider_prints_what_to_set_on_one_80x24_screen(
    tmp_path: Path, stdin: str | None, usual_config_path: str
) -> None:
    config = usual_config_path
    env = {"CHATCLI_CONFIG": config}
    code, screen = run(tmp_path, [], argv=(), env=env, stdin=stdin, width=80)
    assert code == 2
    assert "OPENAI_API_KEY" in screen and "chatcli demo" in screen
    assert f"\n{config}:\n" in screen
    assert "nothing to answer" not in screen
    assert len(screen.rstrip().splitlines()) <= 24


def test_missing_key_is_one_clear_error(tmp_path: Path) -> None:
    code, screen = run(tmp_path, [], argv=("--provider", "anthropic"))
    assert code == 2
    assert screen.strip().startswith("error: anthropic: no API key; set ANTHROPIC_API_KEY")


@pytest.mark.parametrize(
    ("blocked", "argv", "error"),
    [
        (
            "anthropic",
            ("--provider", "anthropic", "-p", "hi"),
            "anthropic is not installed; install it with: "
            "pip install 'chatcli-recovery[anthropic]'",
        ),
        (
            "openai",  # imported at the first request
            ("--provider", "openai", "-p", "hi"),
            "openai is not installed; install it with: pip install 'chatcli-recovery[openai]'",
        ),
        (
            "xllamacpp",
            ("demo",),
            "xllamacpp is not installed; install it with: pip install 'chatcli-recovery[local]'",
        ),
        (None, ("--provider", "python:nosuch.mod:f", "-p", "hi"), "no module named 'nosuch.mod'"),
    ],
)
def test_a_missing_package_is_one_line_and_a_failure(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    blocked: str | None,
    argv: tuple[str, ...],
    error: str,
) -> None:
    if blocked is not None:
        monkeypatch.setitem(sys.modules, blocked, None)  # importing it raises ImportError
    env = {"ANTHROPIC_API_KEY": "k", "OPENAI_API_KEY": "k", "CHATCLI_CACHE": str(tmp_path)}
    code, screen = run(tmp_path, [], argv, env=env, stdin="")
    assert code == 2
    assert screen.startswith("error: ") and error in screen
    assert len(screen.strip().splitlines()) == 1, screen


def test_base_url_points_a_cloud_provider_at_another_server(tmp_path: Path) -> None:
    with replay_server() as server:
        server.add(Scripted(events=sse_events("openai-chat-text.txt")))
        argv = ("--provider", "openai", "--model", "gpt-4o", "--base-url", f"{server.url}/v1")
        code, screen = run(tmp_path, [], (*argv, "-p", "hi"), env={"OPENAI_API_KEY": "k"})
    assert code == 0, screen
    assert "I'm unable to provide real-time" in screen
    (request,) = server.requests
    assert request.path == "/v1/chat/completions" and request.json()["model"] == "gpt-4o"


def _stream_reporting(prompt_tokens: int) -> list[tuple[str | None, str]]:
    """The recorded OpenAI stream, with the prompt size a server reported instead of 14."""
    recorded, reported = '"prompt_tokens":14,', f'"prompt_tokens":{prompt_tokens},'
    events = sse_events("openai-chat-text.txt")
    assert sum(recorded in data for _, data in events) == 1
    return [(name, data.replace(recorded, reported)) for name, data in events]


def test_context_window_lets_the_chat_detect_a_silently_truncated_prompt(tmp_path: Path) -> None:
    # Ollama cuts a prompt that does not fit its num_ctx and answers 200; only its usage
    # tells: the prompt filled the whole window. Without --context-window that is invisible.
    with replay_server() as server:
        server.add(Scripted(events=_stream_reporting(2048)), Scripted(events=_stream_reporting(9)))
        url = f"{server.url}/v1"
        provider = ("--provider", "openai-compatible", "--base-url", url, "--model", "llama3.1")
        code, screen = run(tmp_path, [], (*provider, "--context-window", "2048", "-p", "hi"))
    assert code == 0, screen
    flat = " ".join(screen.split())  # rich wraps the event lines
    assert "↻ the provider silently truncated the prompt" in flat
    assert "the reported prompt (2048 tokens) fills the 2048-token context" in flat
    assert len(server.requests) == 2  # recovered, then asked again
    assert screen.count("I'm unable to provide") == 1  # the answer to the cut prompt is dropped


def test_context_window_from_the_environment_and_the_config_file(tmp_path: Path) -> None:
    env = {"CHATCLI_CONTEXT_WINDOW": "3000"}
    _, screen = run(tmp_path, ["/context"], env=env)
    assert "3,000-token window" in screen
    (tmp_path / "config.toml").write_text("context_window = 5000\n", encoding="utf-8")
    _, screen = run(tmp_path, ["/context"])
    assert "5,000-token window" in screen
    _, screen = run(
        tmp_path, ["/context"], ("--provider", TEST_PROVIDER, "--context-window", "7000")
    )
    assert "7,000-token window" in screen


def test_the_chat_uses_the_adapters_window(tmp_path: Path) -> None:
    argv = ("--provider", "openai", "--model", "gpt-5")
    _, screen = run(tmp_path, ["/context"], argv, env={"OPENAI_API_KEY": "k"})
    assert "272,000-token window" in screen  # gpt-5's input cap, as the adapter declares


def test_one_shot_with_piped_stdin(tmp_path: Path) -> None:
    argv = ("--provider", TEST_PROVIDER, "-p", "summarise this")
    code, screen = run(tmp_path, [], argv, stdin="line one\nline two\n")
    assert code == 0
    assert screen.strip().splitlines()[0] == "Answer to: summarise this"
    assert "line two" in screen


def test_budget_warns_then_refuses_when_nobody_can_be_asked(tmp_path: Path) -> None:
    argv = ("--provider", TEST_PROVIDER, "--model", "gpt-4o-mini", "-p", "hello")
    env = {"CHATCLI_SESSION_BUDGET_USD": "0.0000001"}
    code, screen = run(tmp_path, [], argv, env=env, stdin="")
    assert code == 1
    assert "would go past it" in screen and "not sent" in screen


def test_budget_asks_before_going_past_it(tmp_path: Path) -> None:
    argv = ("--provider", TEST_PROVIDER, "--model", "gpt-4o-mini")
    env = {"CHATCLI_SESSION_BUDGET_USD": "0.000005"}
    # The first request fits; the second would pass the budget: refused, then allowed.
    _, screen = run(tmp_path, ["first " * 5, "second", "n", "third", "y"], argv, env=env)
    assert "Answer to: first" in screen
    assert "not sent: the session budget would be exceeded" in screen
    assert "Answer to: second" not in screen
    assert "Answer to: third" in screen


def test_sessions_command_for_scripts(tmp_path: Path) -> None:
    run(tmp_path, ["keep this"])
    with stored(tmp_path) as store:
        info = store.latest_session()
    assert info is not None
    code, listing = run(tmp_path, [], ("sessions", "list"))
    assert code == 0 and info.id in listing
    code, listing = run(tmp_path, [], ("sessions", "list", "--json"))
    (listed,) = json.loads(listing)
    assert code == 0 and listed["id"] == info.id and listed["message_count"] == 2
    assert listed["provider"] == TEST_PROVIDER and listed["model"] == "test-model"
    code, shown = run(tmp_path, [], ("sessions", "show", info.id[:5]))
    assert code == 0 and "keep this" in shown and "Answer to: keep this" in shown
    code, exported = run(tmp_path, [], ("sessions", "export", info.id, "--format", "json"))
    assert code == 0
    assert [m["role"] for m in json.loads(exported)["messages"]] == ["user", "assistant"]
    missing = tmp_path / "no" / "such" / "dir" / "x.md"
    code, failed = run(tmp_path, [], ("sessions", "export", info.id, "-o", str(missing)))
    assert code == 1 and failed.startswith("error: ") and "No such file or directory" in failed
    assert len(failed.strip().splitlines()) == 1
    code, _ = run(tmp_path, [], ("sessions", "delete", info.id))
    assert code == 0
    code, missing = run(tmp_path, [], ("sessions", "show", info.id))
    assert code == 1 and "no session matching" in missing
    assert run(tmp_path, [], ("sessions", "list", "--json")) == (0, "[]\n")

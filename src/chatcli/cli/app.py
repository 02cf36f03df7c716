"""Argument parsing and the command table: `chatcli [chat]`, `chatcli sessions ...`,
`chatcli demo`. Each command is a small function `(args, Ui, environ) -> exit code`."""

from __future__ import annotations

import argparse
import logging
import os
import sys
from collections.abc import Callable, Mapping, Sequence

from chatcli.chat.demo import DEMO_N_CTX, SMOLLM2_N_CTX
from chatcli.chat.settings import positive_int
from chatcli.cli.ui import Ui
from chatcli.errors import ConfigError

__all__ = ["COMMANDS", "build_parser", "run"]

Command = Callable[[argparse.Namespace, Ui, Mapping[str, str]], int]


def _chat(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> int:
    from chatcli.cli.chat import run_chat

    return run_chat(args, ui, environ)


def _sessions(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> int:
    from chatcli.cli.sessions import run_sessions

    return run_sessions(args, ui, environ)


def _demo(args: argparse.Namespace, ui: Ui, environ: Mapping[str, str]) -> int:
    from chatcli.cli.demo import run_demo

    return run_demo(args, ui, environ)


COMMANDS: dict[str, Command] = {"chat": _chat, "sessions": _sessions, "demo": _demo}


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chatcli",
        description="Chat with an LLM; chatcli keeps the conversation alive (context-overflow "
        "recovery, max_tokens continuation, compaction) and saves every session.",
        epilog="Commands: `chatcli` (chat), `chatcli sessions list|show|export|delete`, "
        "`chatcli demo`. In the chat, /help lists the slash commands.",
    )
    _add_chat_arguments(parser)
    sub = parser.add_subparsers(dest="command", metavar="{sessions,demo}")
    _add_sessions_parser(sub)
    demo = sub.add_parser("demo", help="the whole system offline, on a small local model")
    demo.add_argument(
        "--model",
        help="a .gguf file, or `tiny` for the random test model (default: SmolLM2-135M-Instruct)",
    )
    demo.add_argument(
        "--n-ctx",
        type=positive_int,
        help=f"context window (default: {SMOLLM2_N_CTX} for SmolLM2, {DEMO_N_CTX:,} otherwise)",
    )
    return parser


def _add_chat_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("-p", "--prompt", help="answer this once and exit (stdin is appended)")
    group = parser.add_mutually_exclusive_group()
    group.add_argument(
        "-c", "--continue", dest="continue_", action="store_true", help="reopen the last session"
    )
    group.add_argument("-r", "--resume", metavar="ID", help="reopen session ID (or a prefix)")
    parser.add_argument(
        "--provider",
        help="openai, anthropic, gemini, openai-compatible, llama-cpp, or python:MODULE:FACTORY",
    )
    parser.add_argument("--model", help="model name (a .gguf path for llama-cpp)")
    parser.add_argument("--base-url", help="server URL (openai-compatible, or a proxy)")
    parser.add_argument(
        "--context-window",
        type=positive_int,
        metavar="N",
        help="the model's window in tokens, when it is not the catalog's: the context the "
        "server runs with (Ollama num_ctx, llama.cpp -c), or llama-cpp's n_ctx",
    )
    parser.add_argument("--max-tokens", type=positive_int, help="output limit per answer")
    parser.add_argument(
        "--local",
        action="store_true",
        help="chat offline, no key, no server: a model run by llama.cpp in this process "
        "(SmolLM2-135M-Instruct, fetched once; or --model FILE.gguf)",
    )


def _add_sessions_parser(sub: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    sessions = sub.add_parser("sessions", help="list, show, export or delete saved sessions")
    actions = sessions.add_subparsers(dest="action", required=True)
    listing = actions.add_parser("list", help="all sessions, most recent first")
    listing.add_argument("--json", action="store_true", help="as JSON, for scripts")
    for name, text in (("show", "print the full transcript"), ("delete", "delete a session")):
        actions.add_parser(name, help=text).add_argument("id")
    export = actions.add_parser("export", help="the full transcript as Markdown or JSON")
    export.add_argument("id")
    export.add_argument("--format", choices=("md", "json"), default="md")
    export.add_argument("-o", "--output", help="write to this file (default: stdout)")


def _quiet_library_log() -> None:
    """The chat shows every event as it happens; without a handler of the user's, Python
    would print the library's warnings a second time, unformatted, on stderr."""
    log = logging.getLogger("chatcli")
    if not log.handlers:
        log.addHandler(logging.NullHandler())


def run(
    argv: Sequence[str] | None = None,
    *,
    ui: Ui | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """`chatcli.cli.main`, once rich and prompt_toolkit are imported."""
    args = build_parser().parse_args(sys.argv[1:] if argv is None else list(argv))
    ui = ui if ui is not None else Ui.terminal()
    _quiet_library_log()
    command = COMMANDS[args.command or "chat"]
    try:
        return command(args, ui, os.environ if environ is None else environ)
    except ConfigError as exc:
        ui.error(str(exc))
        return 2
    except ImportError as exc:  # an optional SDK: its message says which extra to install
        ui.error(str(exc))
        return 2
    except KeyboardInterrupt:
        ui.console.print()
        return 130

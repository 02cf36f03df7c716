"""The terminal: a rich Console for output and a prompt_toolkit session for input.

Built by `Ui.terminal()` for a real terminal; tests build one on a pipe input and a string
console. `interactive` is False when stdin is not a terminal (piped input, scripts): then
nothing is ever asked.
"""

from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TextIO

from prompt_toolkit import PromptSession
from prompt_toolkit.history import FileHistory, History, InMemoryHistory
from prompt_toolkit.input import Input
from prompt_toolkit.output import Output
from rich.console import Console
from rich.text import Text

from chatcli.store.private import private_directory, private_file

__all__ = ["Ui"]


@dataclass(kw_only=True)
class Ui:
    console: Console
    stdin: TextIO = field(default_factory=lambda: sys.stdin)
    interactive: bool = True
    input: Input | None = None  # prompt_toolkit input/output; None: the real terminal
    output: Output | None = None
    _prompt: PromptSession[str] | None = None

    @classmethod
    def terminal(cls) -> Ui:
        return cls(console=Console(highlight=False), interactive=sys.stdin.isatty())

    def start_prompt(self, history_path: Path | None) -> None:
        """Line editing with a history file (kept across sessions; the user's only: it holds
        everything typed, pasted secrets included)."""
        history: History = InMemoryHistory()
        if history_path is not None:
            private_directory(history_path.parent)
            private_file(history_path)
            history = FileHistory(str(history_path))
        self._prompt = PromptSession(history=history, input=self.input, output=self.output)

    def read_line(self, message: str = "> ") -> str:
        """A line typed by the user; raises EOFError (Ctrl-D) or KeyboardInterrupt (Ctrl-C)."""
        if self._prompt is None:
            self.start_prompt(None)
        assert self._prompt is not None
        return self._prompt.prompt(message)

    def confirm(self, question: str) -> bool:
        """Ask yes/no (default no); never asks when not interactive."""
        if not self.interactive:
            return False
        try:
            answer = self.read_line(f"{question} [y/N] ")
        except (EOFError, KeyboardInterrupt):
            return False
        return answer.strip().lower() in ("y", "yes")

    def error(self, message: str) -> None:
        """On a terminal, wrapped at word boundaries to its width (the terminal itself would
        wrap a long line wherever its width ends, mid-word); elsewhere (a pipe, a script's
        log) one line, whole."""
        text = Text.assemble(("error: ", "bold red"), message)
        self.console.print(text, highlight=False, soft_wrap=not self.console.is_terminal)

    def note(self, message: str, style: str = "dim") -> None:
        # soft_wrap: the terminal wraps it, so a path or an id is never split by a newline
        self.console.print(message, style=style, highlight=False, markup=False, soft_wrap=True)

"""The `chatcli` command: interactive chat, one-shot answers, sessions, the offline demo
(`chatcli proxy` is dispatched by `chatcli.__main__` before this package is imported).

`main(argv=None) -> int` is the entry point. rich and prompt_toolkit (extra `chatcli-recovery[cli]`)
are imported only when it runs, so a plain `pip install chatcli-recovery` gets one line saying what
to install, not a traceback; the logic is in the library (`chatcli.chat`).
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatcli.cli.ui import Ui

__all__ = ["CLI_EXTRA_MISSING", "main"]

CLI_EXTRA_MISSING = (
    "chatcli: the command needs rich and prompt_toolkit; install them with: "
    "pip install 'chatcli-recovery[cli]'"
)
_CLI_PACKAGES = ("rich", "prompt_toolkit")


def main(
    argv: Sequence[str] | None = None,
    *,
    ui: Ui | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run the command; returns the exit status (0 ok, 1 failed, 2 usage/configuration).

    `ui` and `environ` default to the real terminal and `os.environ` (tests inject both)."""
    try:
        from chatcli.cli.app import run
    except ImportError as exc:
        if (exc.name or "").partition(".")[0] not in _CLI_PACKAGES:
            raise
        print(CLI_EXTRA_MISSING, file=sys.stderr)
        return 2
    return run(argv, ui=ui, environ=environ)

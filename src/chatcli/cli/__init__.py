"""The `chatcli` command: interactive chat, one-shot answers, sessions, and the offline demo.

`main(argv=None) -> int` is the entry point. rich and prompt_toolkit are imported only here
(extra `chatcli[cli]`); the logic is in the library (`chatcli.session`, `chatcli.demo`).
"""

from chatcli.cli.app import main

__all__ = ["main"]

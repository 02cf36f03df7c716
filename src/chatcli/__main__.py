"""The `chatcli` entry point: `chatcli proxy ...` runs the proxy, anything else the chat command.

The two never import each other; this module picks one before either is imported, so the proxy
needs neither rich nor prompt_toolkit and the chat does not load the proxy's server stack.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from chatcli.cli.ui import Ui

__all__ = ["main"]


def main(
    argv: Sequence[str] | None = None,
    *,
    ui: Ui | None = None,
    environ: Mapping[str, str] | None = None,
) -> int:
    """Run `chatcli`; returns the exit status (0 ok, 1 failed, 2 usage/configuration)."""
    args = sys.argv[1:] if argv is None else list(argv)
    if args[:1] == ["proxy"]:
        from chatcli.proxy.main import main as proxy_main

        return proxy_main(args[1:], environ)
    from chatcli.cli import main as chat_main

    return chat_main(args, ui=ui, environ=environ)


if __name__ == "__main__":
    sys.exit(main())

"""A chat session, as the chatcli command and the proxy's recorded sessions run it.

- `session`: `ChatSession`, the full transcript in the store, the working view, one recovered
  call per turn, compaction, cost and the session budget (no terminal I/O).
- `native`: who compacts, the provider on its servers or chatcli (`RecoveryConfig.compaction`).
- `stored`: the session's events as stored rows, and the view a reopened session starts from.
- `tap`: the provider wrapper that streams answers and records every call a turn made.
- `cost`, `spending`, `cache`, `text`: a turn's and a session's cost, the session budget in
  dollars, prompt-cache reuse, and the sentences the chat shows.
- `context`: what the next request will send, message by message (the CLI's /context).
- `export`: the full transcript as Markdown or JSON.
- `settings`: `CliSettings`, the commands' user settings (config file, environment, flags).
- `demo`, `tinymodel`: the offline demo's script and the tiny GGUF model it runs on.
"""

from chatcli.chat.context import ContextReport, build_context_report
from chatcli.chat.export import export_transcript
from chatcli.chat.session import ChatSession, Turn
from chatcli.chat.settings import CliSettings, load_settings

__all__ = [
    "ChatSession",
    "CliSettings",
    "ContextReport",
    "Turn",
    "build_context_report",
    "export_transcript",
    "load_settings",
]

"""`chatcli proxy`: chatcli's recovery on the wire, for clients in any language.

An OpenAI (`/v1/chat/completions`) and Anthropic (`/v1/messages`) compatible endpoint in
front of any upstream chatcli can talk to. The wire formats themselves (parsing, writing,
forwarding) are `chatcli.wire`'s. Modules: `upstream` (the provider, from the chat's
settings), `sessions`, `compaction`, `keys` (the compaction tokens' keys), `failures` (errors
in the client's terms), `guard` (client keys, concurrency), `metrics`, `app` (the Starlette
app), `main` (the command).
Imports nothing from `chatcli.cli`.
Starlette, uvicorn and cryptography come with the `proxy` extra.
"""

from __future__ import annotations

__all__: list[str] = []

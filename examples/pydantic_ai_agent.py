"""A pydantic-ai agent whose conversation outgrew the model's window, kept going by chatcli's
`ContextRecovery` capability (runs offline: no network, no key).

The model is real: llama.cpp's llama-server with a 1,024-token window, serving chatcli's tiny
random-weight model (written by `chatcli.chat.tinymodel`; its text is nonsense by design), started
by this script and reached through pydantic-ai's own OpenAI chat model. The server's token
counts and its overflow error are real. The agent's earlier turns called a tool whose results
are large; pydantic-ai's `TestModel` played those turns, as a random model cannot choose tools.

Needs `pip install 'chatcli-recovery[pydantic-ai,local]'` (`local`: llama-server prebuilt, in
the xllamacpp wheel, which this repository's scripts/llama-server.py starts).
"""

import copy
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from pydantic_ai import Agent
from pydantic_ai.messages import ModelResponse, ToolCallPart, ToolReturnPart
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.models.test import TestModel
from pydantic_ai.providers.openai import OpenAIProvider

from chatcli.chat.tinymodel import write_tiny_model
from chatcli.integrations.pydantic_ai import ContextRecovery

WINDOW = 1024
# llama.cpp's llama-server, prebuilt in the xllamacpp wheel (extra `local`): the repository's
# launcher takes llama-server's options.
SERVER = [sys.executable, str(Path(__file__).resolve().parent.parent / "scripts/llama-server.py")]


@contextmanager
def llama_server(model: Path) -> Iterator[str]:
    """llama-server on a free local port with a `WINDOW`-token window; yields its base URL."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    command = [*SERVER, "--model", str(model), "--alias", "chatcli-tiny", "--port", str(port)]
    command += ["--host", "127.0.0.1", "--ctx-size", str(WINDOW), "--parallel", "1"]
    command += ["--threads", "1", "--seed", "1"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(300):  # up to a minute
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=2):
                    break  # 200: a status of 400 or more raises
            except OSError:
                pass  # not listening yet (or still loading the model: 503)
            time.sleep(0.2)
        yield f"http://127.0.0.1:{port}/v1"
    finally:
        server.terminate()
        server.wait()


recovery = ContextRecovery(on_event=lambda event: print("  chatcli:", event.describe()))
agent = Agent(
    instructions="You are a build assistant. Be brief.",
    capabilities=[recovery],
    model_settings={"max_tokens": 32, "temperature": 0.0},
)


@agent.tool_plain
def read_build_log(lines: int) -> str:
    """Read the last lines of the build log."""
    return "\n".join(f"[{n:04}] compiling module_{n}.c ... ok" for n in range(150))


history = []  # three earlier runs, each with a tool call and its large result
for question in ("Did the build start?", "Which modules compiled?", "Any warnings?"):
    history += agent.run_sync(question, model=TestModel()).all_messages()
before = copy.deepcopy(history)

with (
    tempfile.TemporaryDirectory() as tmp,
    llama_server(write_tiny_model(Path(tmp) / "tiny.gguf")) as url,
):
    model = OpenAIChatModel("chatcli-tiny", provider=OpenAIProvider(base_url=url, api_key="none"))
    result = agent.run_sync("Why did the build fail?", model=model, message_history=history)

calls = [p.tool_call_id for m in history for p in m.parts if isinstance(p, ToolCallPart)]
returns = [p.tool_call_id for m in history for p in m.parts if isinstance(p, ToolReturnPart)]
answer = result.all_messages()[-1]
print(f"answer ({len(result.output)} chars of tiny-model nonsense): {result.output[:40]!r}...")
print(f"the agent's history is unchanged: {history == before}")
print(f"the run kept it and added 2 messages: {result.all_messages()[: len(history)] == history}")
print(f"{len(calls)} tool calls, each with its result: {calls == returns}")
print(f"answered by {answer.model_name}" if isinstance(answer, ModelResponse) else "no answer")

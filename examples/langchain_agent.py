"""A LangChain v1 agent whose conversation no longer fits, recovered by chatcli (runs offline).

The agent is LangChain's own `create_agent` with `ChatOpenAI`, pointed at a real llama.cpp
`llama-server` that this script starts on 127.0.0.1 with chatcli's tiny random-weight model and
a 1,024-token window. The model's text is nonsense by design (its weights are random) and it
never stops on its own, so every answer is cut at max_tokens: chatcli continues it. The
history below, with large tool results, is far over the window: llama-server rejects it, and
`ContextRecoveryMiddleware` recovers the request, not the agent's state.

Needs `pip install 'chatcli-recovery[langchain,local]'` (`local`: llama-server prebuilt, in the
xllamacpp wheel, which this repository's scripts/llama-server.py starts).
"""

import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx
from langchain.agents import create_agent
from langchain_core.messages import AIMessage, HumanMessage, ToolMessage
from langchain_core.tools import tool
from langchain_openai import ChatOpenAI

from chatcli.chat.tinymodel import write_tiny_model
from chatcli.integrations.langchain import ContextRecoveryMiddleware

# llama.cpp's llama-server, prebuilt in the xllamacpp wheel (extra `local`): the repository's
# launcher takes llama-server's options.
SERVER = [sys.executable, str(Path(__file__).resolve().parent.parent / "scripts/llama-server.py")]


@tool
def read_log(name: str) -> str:
    """Read a log file."""
    return f"{name}: " + "request served in 12 ms; " * 400


def start_llama_server(model: Path, port: int) -> subprocess.Popen[bytes]:
    command = [*SERVER, "--model", str(model), "--alias", "tiny", "--port", str(port)]
    command += ["--host", "127.0.0.1", "--ctx-size", "1024", "--parallel", "1", "--seed", "1"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for _ in range(300):
        try:
            if httpx.get(f"http://127.0.0.1:{port}/health").status_code == 200:
                return server
        except httpx.TransportError:
            time.sleep(0.2)
    server.kill()
    raise RuntimeError("llama-server did not start")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def history() -> list:
    """Earlier turns of the agent: each called `read_log` and got a large result back."""
    turns: list = []
    for day in range(1, 4):
        call = {"name": "read_log", "args": {"name": f"day{day}.log"}, "id": f"call_{day}"}
        turns += [HumanMessage(f"What happened on day {day}?"), AIMessage("", tool_calls=[call])]
        result = read_log.invoke({"name": f"day{day}.log"})
        turns += [ToolMessage(result, tool_call_id=f"call_{day}")]
        turns += [AIMessage(f"Day {day} was quiet.")]
    return [*turns, HumanMessage("Summarise the week in one sentence.")]


with tempfile.TemporaryDirectory() as tmp:
    port = free_port()
    server = start_llama_server(write_tiny_model(Path(tmp) / "tiny.gguf"), port)
    try:
        model = ChatOpenAI(
            model="tiny", base_url=f"http://127.0.0.1:{port}/v1", api_key="none", max_tokens=16
        )
        recovery = ContextRecoveryMiddleware(
            on_event=lambda event: print("  chatcli:", event.describe())
        )
        agent = create_agent(model, tools=[read_log], middleware=[recovery])
        messages = history()
        before = [m.model_copy(deep=True) for m in messages]  # to compare with, afterwards
        state = agent.invoke({"messages": messages})
    finally:
        server.terminate()
        server.wait()

answer = state["messages"][-1]
kept = [(m.type, m.content) for m in state["messages"][: len(before)]]
kept_whole = kept == [(m.type, m.content) for m in before]
print(f"answer: {len(answer.text)} chars, {answer.response_metadata['chatcli']['calls']} calls")
print(f"the agent's {len(before)} messages are unchanged: {kept_whole}")

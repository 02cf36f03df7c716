"""A conversation three times the model's window, answered through LiteLLM with chatcli's
recovery (runs offline, no key).

It starts the real llama-server (prebuilt in the xllamacpp wheel of `chatcli-recovery[local]`,
started by scripts/llama-server.py) with chatcli's tiny random-weight model and a 1,024-token
window, and calls it as a LiteLLM app does: `openai/<model>` with `api_base`. The model is
random, so its answer is gibberish; what counts is that it answers.
"""

import copy
import os
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path

os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")  # litellm: no download

import litellm

from chatcli.chat.tinymodel import TRAINING_TEXT, write_tiny_model
from chatcli.integrations.litellm import completion

litellm.suppress_debug_info = True  # no help banner for the overflow chatcli recovers from
# llama.cpp's llama-server, prebuilt in the xllamacpp wheel (extra `local`): the repository's
# launcher takes llama-server's options.
SERVER = [sys.executable, str(Path(__file__).resolve().parent.parent / "scripts/llama-server.py")]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start_server(workdir: Path) -> tuple[subprocess.Popen[bytes], str]:
    model = write_tiny_model(workdir / "tiny.gguf", context_length=2048)
    port = free_port()
    command = [*SERVER, "--model", str(model), "--alias", "tiny", "--port", str(port)]
    command += ["--host", "127.0.0.1", "--ctx-size", "1024", "--threads", "1", "--seed", "1"]
    server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):  # up to a minute
        try:
            with urllib.request.urlopen(url + "/health", timeout=2) as answer:
                if answer.status == 200:
                    return server, url + "/v1"
        except OSError:
            time.sleep(0.2)
    server.terminate()
    sys.exit("llama-server did not start")


def conversation() -> list[dict[str, str]]:
    """About 3,000 tokens: 30 turns of the model's training text, then a question."""
    words = TRAINING_TEXT.split()
    history = [{"role": "system", "content": "Answer briefly."}]
    for i in range(30):
        text = " ".join(words[(i * 60) % (len(words) - 60) :][:60])
        history.append({"role": "user" if i % 2 == 0 else "assistant", "content": text})
    history.append({"role": "user", "content": "What is the last thing I asked?"})
    return history


with tempfile.TemporaryDirectory() as workdir:
    server, api_base = start_server(Path(workdir))
    try:
        history = conversation()
        before = copy.deepcopy(history)
        response = completion(
            model="openai/tiny",
            messages=history,
            api_base=api_base,
            api_key="none",
            max_tokens=16,
            on_event=lambda event: print("  chatcli:", event.describe()),
        )
    finally:
        server.terminate()
        server.wait()
print(f"{type(response).__name__}, finish_reason={response.choices[0].finish_reason!r}")
print(f"answered: {bool(response.choices[0].message.content)}")
print(f"your {len(history)} messages are unchanged: {history == before}")

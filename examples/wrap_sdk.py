"""An OpenAI SDK app and an Anthropic SDK app, each made to survive context overflows and cut
answers by one changed line: `client = chatcli.wrap(OpenAI(...))`.

Runs offline: it starts the real llama-server (prebuilt in the xllamacpp wheel of `chatcli-
recovery[local]`, started by scripts/llama-server.py) on chatcli's tiny random model with a
1,024-token window, which serves both `/v1/chat/completions` and `/v1/messages`. The model's
words are nonsense by design; its window, its token counts and its overflow errors are real.
"""

import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from anthropic import Anthropic
from openai import OpenAI

import chatcli
from chatcli.chat.tinymodel import TRAINING_TEXT, write_tiny_model

WINDOW = 1024
# llama.cpp's llama-server, prebuilt in the xllamacpp wheel (extra `local`): the repository's
# launcher takes llama-server's options.
SERVER = [sys.executable, str(Path(__file__).resolve().parent.parent / "scripts/llama-server.py")]


def show(event: chatcli.Event) -> None:
    print("  chatcli:", event.describe())


def conversation() -> list[dict[str, str]]:
    """Thirty turns of about 100 tokens each: three times what the window holds."""
    words = TRAINING_TEXT.split()
    turns = [" ".join(words[i * 60 % (len(words) - 60) :][:60]) for i in range(30)]
    history = [{"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(turns)]
    return [*history, {"role": "user", "content": "And what did I ask first?"}]


def main(base_url: str) -> None:
    history = conversation()

    print("OpenAI SDK, a conversation three windows long:")
    client = chatcli.wrap(OpenAI(base_url=base_url + "/v1", api_key="none"), on_event=show)
    reply = client.chat.completions.create(model="chatcli-tiny", messages=history, max_tokens=16)
    print("  answer:", repr(reply.choices[0].message.content))
    print("  the app's history still has", len(history), "messages")

    print("OpenAI SDK, streamed, the window now known (fitted before sending):")
    stream = client.chat.completions.create(
        model="chatcli-tiny", messages=history, max_tokens=16, stream=True
    )
    text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
    print("  streamed:", repr(text))

    print("Anthropic SDK, an answer cut at max_tokens=4, continued:")
    claude = chatcli.wrap(Anthropic(base_url=base_url, api_key="none"), on_event=show)
    message = claude.messages.create(
        model="chatcli-tiny",
        max_tokens=4,
        messages=[{"role": "user", "content": "Tell me a long story."}],
    )
    print("  answer:", repr(message.content[0].text), "stop_reason:", message.stop_reason)


@contextmanager
def llama_server() -> Iterator[str]:
    """The real llama-server on the tiny model, 1,024-token window, stopped at the end."""
    with tempfile.TemporaryDirectory() as tmp:
        model = write_tiny_model(Path(tmp) / "tiny.gguf", context_length=2048)
        command = [*SERVER, "--model", str(model), "--alias", "chatcli-tiny"]
        port = _free_port()
        command += ["--port", str(port), "--ctx-size", str(WINDOW), "--parallel", "1"]
        command += ["--host", "127.0.0.1", "--threads", "1", "--seed", "1"]
        server = subprocess.Popen(command, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        try:
            base_url = f"http://127.0.0.1:{port}"
            _wait_ready(base_url + "/health", server)
            yield base_url
        finally:
            server.terminate()
            server.wait(10)


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port: int = sock.getsockname()[1]
        return port


def _wait_ready(url: str, server: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and server.poll() is None:
        try:
            with urllib.request.urlopen(url, timeout=2) as answer:
                if answer.status == 200:
                    return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"llama-server did not start (exit code {server.poll()})")


if __name__ == "__main__":
    with llama_server() as url:
        main(url)

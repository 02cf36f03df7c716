"""Proxy replicas sharing one PostgreSQL store, for real: `chatcli proxy` processes in front
of the real C++ llama-server (the tiny model, a 1,024-token window), a real PostgreSQL server
(tests/postgres.py), the official `openai` SDK as the client.

Between the replicas and llama-server sits a counting pass-through (`Front`): it counts the
chat calls that reach the server, can slow a stream down (so a replica can be killed in the
middle of one), counts the calls it refused (llama-server's overflow errors), and
answers 404 to `/props`, so the replicas cannot ask llama.cpp its window
up front, as with a cloud API: only an overflow tells them.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

from chatcli.chat.tinymodel import TRAINING_TEXT
from chatcli.store import SessionStore
from tests.proxy_harness import free_port
from tests.test_proxy_llama import MODEL_NAME, N_CTX

# The fixtures of tests/servers.py (tiny_model, llama_1024) and tests/postgres.py
# (postgres_server).
pytest_plugins = ("tests.servers", "tests.postgres")
pytestmark = pytest.mark.llama_server


class Front:
    """A pass-through to llama-server that counts chat calls (see the module docstring)."""

    def __init__(self, target: str) -> None:
        self.target = target
        self.chat_calls = 0
        self.refused = 0  # chat calls llama-server answered with an error (an overflow)
        self.chunk_delay = 0.0  # seconds before each streamed chunk
        self.app = Starlette(routes=[Route("/{path:path}", self.forward, methods=["GET", "POST"])])

    async def forward(self, request: Request) -> Response:
        path = request.url.path
        if path == "/props":
            return Response(status_code=404)
        if path.endswith("/chat/completions"):
            self.chat_calls += 1
        client = httpx.AsyncClient(base_url=self.target, timeout=120)
        upstream = await client.send(
            client.build_request(
                request.method,
                path,
                content=await request.body(),
                headers={"content-type": request.headers.get("content-type", "")},
            ),
            stream=True,
        )
        if path.endswith("/chat/completions") and upstream.status_code >= 400:
            self.refused += 1

        async def body() -> AsyncIterator[bytes]:
            try:
                async for chunk in upstream.aiter_raw():
                    if self.chunk_delay:
                        await _sleep(self.chunk_delay)
                    yield chunk
            finally:
                await upstream.aclose()
                await client.aclose()

        kind = upstream.headers.get("content-type", "application/json")
        return StreamingResponse(body(), status_code=upstream.status_code, media_type=kind)


async def _sleep(seconds: float) -> None:
    import asyncio

    await asyncio.sleep(seconds)


@pytest.fixture(scope="module")
def front(llama_1024: str) -> Iterator[Front]:
    front = Front(llama_1024)
    server = uvicorn.Server(
        uvicorn.Config(front.app, host="127.0.0.1", port=free_port(), log_level="warning")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        time.sleep(0.01)
    front.url = f"http://127.0.0.1:{server.config.port}"  # type: ignore[attr-defined]
    try:
        yield front
    finally:
        server.should_exit = True
        thread.join(10)


@contextmanager
def replica(
    front: Front, database: str, log: Path, **environ: str
) -> Iterator[tuple[str, subprocess.Popen[bytes]]]:
    """`chatcli proxy` in its own process, on the shared database (and `environ`); its URL
    and process."""
    port = free_port()
    env = {
        **os.environ,
        "CHATCLI_DATABASE_URL": database,
        "CHATCLI_HOME": str(log.parent),
        **environ,
    }
    command = [
        sys.executable,
        *("-c", "import sys; from chatcli.__main__ import main; sys.exit(main())", "proxy"),
        *("--provider", "openai-compatible", "--base-url", front.url + "/v1"),  # type: ignore[attr-defined]
        *("--model", MODEL_NAME, "--max-tokens", "16", "--port", str(port)),
    ]
    with log.open("wb") as out:
        process = subprocess.Popen(command, env=env, stdout=out, stderr=subprocess.STDOUT)
    url = f"http://127.0.0.1:{port}"
    from tests import servers  # a plugin: not imported before pytest loads it

    try:
        servers._wait_ready(process, url + "/healthz", log)
        yield url, process
    finally:
        if process.poll() is None:
            process.terminate()
            process.wait(10)


def new_database(server: str) -> str:
    from tests.postgres import create_database  # a plugin: not imported before pytest loads it

    return create_database(server)


def client(url: str, session: str) -> openai.OpenAI:
    return openai.OpenAI(
        base_url=url + "/v1",
        api_key="k",
        max_retries=0,
        timeout=120,
        default_headers={"x-chatcli-session": session},
    )


def ask(url: str, session: str, text: str, **options: Any) -> str:
    with client(url, session) as oa:
        reply = oa.chat.completions.create(
            model="any", messages=[{"role": "user", "content": text}], **options
        )
    return reply.choices[0].message.content or ""


def stream_text(url: str, session: str, text: str) -> str:
    with client(url, session) as oa:
        chunks = list(
            oa.chat.completions.create(
                model="any", messages=[{"role": "user", "content": text}], stream=True
            )
        )
    finish = [
        c.choices[0].finish_reason for c in chunks if c.choices and c.choices[0].finish_reason
    ]
    assert finish, "the stream ended without its finish"
    return "".join(c.choices[0].delta.content or "" for c in chunks if c.choices)


def test_kill_9_of_a_replica_mid_stream_loses_no_acknowledged_record(
    front: Front, postgres_server: str, tmp_path: Path
) -> None:
    database = new_database(postgres_server)
    acknowledged: dict[str, str] = {}  # session -> the answer the client received in full
    with ExitStack() as replicas:
        (a, a_process), (b, _), (c, _) = (
            replicas.enter_context(replica(front, database, tmp_path / f"{name}.log"))
            for name in "abc"
        )
        for i, url in enumerate([b, c, a, b, c, a]):  # A's last answer just before it dies
            session = f"before-{i}"
            acknowledged[session] = (
                ask(url, session, f"question {i}")
                if i % 2
                else stream_text(url, session, f"question {i}")
            )
        front.chunk_delay = 0.05  # a stream of ~16 chunks now lasts most of a second
        meanwhile: dict[str, str] = {}  # a stream on B, served while A dies
        on_b = threading.Thread(
            target=lambda: meanwhile.update(during=stream_text(b, "during", "and you?"))
        )
        try:
            on_b.start()
            with client(a, "killed") as oa:
                stream = oa.chat.completions.create(
                    model="any", messages=[{"role": "user", "content": "tell me"}], stream=True
                )
                first = next(iter(stream))  # the answer has begun...
                assert first.choices
                os.kill(a_process.pid, signal.SIGKILL)  # ...and its replica dies
                a_process.wait(10)
                with pytest.raises((openai.APIError, httpx.HTTPError)):
                    list(stream)
        finally:
            on_b.join(120)
            front.chunk_delay = 0.0
        acknowledged.update(meanwhile)
        assert "during" in acknowledged
        for i, url in enumerate([b, c, b, c]):  # the others keep serving
            session = f"after-{i}"
            acknowledged[session] = (
                ask(url, session, f"again {i}")
                if i % 2
                else stream_text(url, session, f"again {i}")
            )
    with SessionStore(database) as store:
        for session, answer in acknowledged.items():
            requests = store.requests(session)
            assert [r.tag for r in requests] == ["proxy"], session  # once, not lost or twice
            transcript = store.transcript(session)
            assert [m.role.value for m in transcript] == ["user", "assistant"], session
            assert transcript[-1].text == answer
        # Not acknowledged (its end never came): recorded at most once, and never half (the
        # messages and the request commit together).
        killed = store.requests("killed")
        assert len(killed) <= 1
        assert len(store.transcript("killed")) == 2 * len(killed)
        (total,) = store._conn.execute("SELECT COUNT(*) FROM requests").fetchone()
        assert total == len(acknowledged) + len(killed)


def big_then_small(tag: str) -> list[dict[str, Any]]:
    """An agent's conversation: four big early turns (~2,500 tokens: over the window), then
    twelve short ones. Without a known window it is sent whole and refused; with one, the
    short tail is what pre-flight keeps, and it fits whatever the estimate's error."""
    words = TRAINING_TEXT.split() * 10  # the model's own text (123 words), repeated
    big = [" ".join(words[i * 300 : (i + 1) * 300]) for i in range(4)]
    texts = [f"{tag} {i}: {text}" for i, text in enumerate(big)]
    texts += [f"{tag} short {i}" for i in range(11)] + ["What did I say last?"]
    return [{"role": ("user", "assistant")[i % 2], "content": t} for i, t in enumerate(texts)]


def test_a_window_learned_by_one_replica_spares_another_the_failed_call(
    front: Front, postgres_server: str, tmp_path: Path
) -> None:
    database = new_database(postgres_server)
    # No escalations: the tiny model never ends an answer, and each continuation is a call
    # of its own; here every request is one call unless an overflow adds one.
    one_call = {"CHATCLI_MAX_TOKEN_ESCALATIONS": "0"}
    with replica(front, database, tmp_path / "a.log", **one_call) as (a, _):
        calls, refused = front.chat_calls, front.refused
        with client(a, "first") as oa:
            oa.chat.completions.create(model="any", messages=big_then_small("first"))  # type: ignore[arg-type]
        # llama-server refused the whole conversation, stating its window; then it fit.
        assert (front.chat_calls - calls, front.refused - refused) == (2, 1)
    with SessionStore(database) as store:
        scope = f"openai-compatible {front.url}/v1"  # type: ignore[attr-defined]
        assert store.learned_windows(scope) == {MODEL_NAME: N_CTX}
    with replica(front, database, tmp_path / "b.log", **one_call) as (b, _):
        calls, refused = front.chat_calls, front.refused
        with client(b, "second") as oa:
            reply = oa.chat.completions.create(model="any", messages=big_then_small("second"))  # type: ignore[arg-type]
        assert reply.choices[0].message.content
        # Pre-flighted against the window replica A learned: one call, none refused.
        assert (front.chat_calls - calls, front.refused - refused) == (1, 0)
    with SessionStore(database) as store:
        assert store.events("second")[0].kind == "PreflightRecovery"
        assert "OverflowDetected" not in [e.kind for e in store.events("second")]

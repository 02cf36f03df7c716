"""The chat and the proxy share the windows overflows state, through the store: a window the
proxy learned spares the chat its failed call, and one the chat learned spares a proxy's.
Both sides are built as their commands build them (`chatcli proxy`'s configuration, the
chat's `ChatSession.open` with its provider name and URL), so they key the windows alike
(`window_scope`). The upstream is a replay server playing OpenAI's own overflow (pe-056,
stating 4,097 tokens); the store is a new SQLite file and a new PostgreSQL database."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import openai
import pytest

from chatcli.chat.session import ChatSession
from chatcli.messages import Message
from chatcli.providers.registry import create_provider
from chatcli.store import SessionStore, window_scope
from tests.proxy_harness import running_proxy
from tests.recorded import provider_errors, replayed_error
from tests.replay import ReplayServer, Scripted, replay_server
from tests.test_openai_adapter import CHAT_TEXT

pytest_plugins = ("tests.postgres",)

OVERFLOW = next(r for r in provider_errors("openai") if r["id"] == "pe-056")  # 4,097 tokens
MODEL = "a-fine-tune-no-catalog-knows"  # no window declared: only an overflow tells it
KEY = "sk-upstream"


@pytest.fixture
def upstream() -> Iterator[ReplayServer]:
    with replay_server() as server:
        yield server


def environ(location: str | Path) -> dict[str, str]:
    """The environment both commands read the store from."""
    if isinstance(location, Path):
        return {"OPENAI_API_KEY": KEY, "CHATCLI_HOME": str(location.parent)}
    return {"OPENAI_API_KEY": KEY, "CHATCLI_DATABASE_URL": location}


def store_at(location: str | Path) -> SessionStore:
    return SessionStore(location.parent / "sessions.db" if isinstance(location, Path) else location)


@contextmanager
def proxy(location: str | Path, upstream: ReplayServer) -> Iterator[str]:
    """`chatcli proxy --provider openai --model MODEL --base-url URL`, recording."""
    from chatcli.proxy.main import _configured, build_parser

    flags = ["--provider", "openai", "--model", MODEL, "--base-url", upstream.url + "/v1"]
    up, guard, options = _configured(build_parser().parse_args(flags), environ(location))
    with running_proxy(up, guard=guard, options=options) as url:
        yield url


def ask_proxy(location: str | Path, upstream: ReplayServer, messages: list[Message]) -> None:
    """One request through a new proxy (a replica that never saw an overflow itself)."""
    sent = [{"role": m.role.value, "content": m.text} for m in messages]
    with (
        proxy(location, upstream) as url,
        openai.OpenAI(base_url=url + "/v1", api_key="k", max_retries=0) as oa,
    ):
        oa.chat.completions.create(model=MODEL, messages=sent)  # type: ignore[arg-type]


def chat(store: SessionStore, upstream: ReplayServer) -> ChatSession:
    """A new chat on the same upstream, as `chatcli --provider openai --base-url URL` opens it."""
    url = upstream.url + "/v1"
    provider = create_provider("openai", model=MODEL, base_url=url, environ={"OPENAI_API_KEY": KEY})
    return ChatSession.open(store, provider, provider_name="openai", model=MODEL, base_url=url)


def long_chat() -> list[Message]:
    """About 9,000 tokens: over the 4,097 the overflow states."""
    said = [f"turn {i} " + "lorem ipsum dolor " * 60 for i in range(30)]
    return [Message.user(t) if i % 2 == 0 else Message.assistant(t) for i, t in enumerate(said)]


def test_a_window_the_proxy_learned_spares_the_chat_its_failed_call(
    location: str | Path, upstream: ReplayServer
) -> None:
    history = long_chat()
    upstream.add(replayed_error(OVERFLOW), Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    ask_proxy(location, upstream, [*history, Message.user("q")])
    assert len(upstream.requests) == 2  # the overflow paid once, then the recovered call
    with store_at(location) as store:
        assert store.learned_windows(window_scope("openai", upstream.url + "/v1")) == {MODEL: 4097}
        session = chat(store, upstream)
        assert session.learned_windows == {MODEL: 4097}  # read at start
        session.append(history)
        session.send("and the chat asks")
    assert len(upstream.requests) == 3  # one call: cut before it was sent
    sent = upstream.requests[2].json()["messages"]
    assert len(sent) < len(history) and sent[-1]["content"] == "and the chat asks"


def test_a_window_the_chat_learned_spares_the_proxy_its_failed_call(
    location: str | Path, upstream: ReplayServer
) -> None:
    history = long_chat()
    upstream.add(replayed_error(OVERFLOW), Scripted(body=CHAT_TEXT), Scripted(body=CHAT_TEXT))
    with store_at(location) as store:
        session = chat(store, upstream)
        assert session.learned_windows == {}
        session.append(history)
        session.send("the chat asks first")
        assert session.learned_windows == {MODEL: 4097}
    assert len(upstream.requests) == 2
    ask_proxy(location, upstream, [*history, Message.user("q")])  # a replica that never overflowed
    assert len(upstream.requests) == 3  # one call: pre-flighted against the chat's window
    assert len(upstream.requests[2].json()["messages"]) < len(history)


def test_the_key_is_the_provider_and_its_url_without_credentials() -> None:
    assert window_scope("openai", "https://user:pw@host/v1") == "openai https://***@host/v1"
    assert window_scope("openai", "https://***@host/v1") == window_scope(
        "openai", "https://user:pw@host/v1"
    )  # a stored (redacted) URL keys like the configured one
    assert window_scope("anthropic", None) == "anthropic"

"""The compaction call on the warm prefix against the real llama-server: the server's own
prompt cache serves it.

llama-server keeps the prompt its slot evaluated last and reuses the longest prefix a new
prompt shares with it, reporting the reused tokens in `usage.prompt_tokens_details.cached_tokens`
(the adapter's `Usage.cache_read_tokens`). A chat request is sent through `Client`, then the
conversation with its answer is compacted: the summary request that continues the chat
request finds nearly all of its prompt cached; the rendered request, a new prompt, finds
almost none. The tiny model's summaries are nonsense, so both are rejected, as verification
must (tests/test_compaction_llama.py): what is measured here is what the server reports.
"""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from chatcli.compaction.prompt import STRUCTURED_PROMPT, summary_turn
from chatcli.config import CompactionConfig, RecoveryConfig
from chatcli.errors import CannotSummarise
from chatcli.messages import Message, ToolCall
from chatcli.providers.base import Request, Response, ToolSpec
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Client

pytest_plugins = ("tests.servers",)

READ = ToolSpec(
    name="read_log",
    description="Read the log of one step of the migration.",
    parameters={"type": "object", "properties": {"step": {"type": "integer"}}},
)
# At least this share of the warm summary request's prompt is served from the server's cache.
WARM_SHARE = 0.9


class Recording:
    """The adapter, keeping each request and its answer (or its error)."""

    def __init__(self, inner: OpenAICompatible) -> None:
        self.inner = inner
        self.context_window = inner.context_window
        self.calls: list[tuple[Request, Response | Exception]] = []

    def structured_output_supported(self) -> bool:
        return self.inner.structured_output_supported()

    def structured_output_keeps_prompt(self) -> bool:
        return self.inner.structured_output_keeps_prompt()

    def complete(self, request: Request) -> Response:
        try:
            response = self.inner.complete(request)
        except Exception as exc:
            self.calls.append((request, exc))
            raise
        self.calls.append((request, response))
        return response

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)


@pytest.fixture
def provider(llama_16k: str) -> Iterator[Recording]:
    """The adapter as the chat makes it (the window and the server asked of `/props`); the
    server's answers end at its stop string, a few tokens in."""
    model = str(httpx.get(llama_16k + "/v1/models").json()["data"][0]["id"])
    adapter = OpenAICompatible(llama_16k + "/v1", model, environ={}, discover_window=True)
    yield Recording(adapter)
    adapter.close()


def conversation() -> list[Message]:
    """An agent session of about 6,000 of the tiny model's tokens: ten tool rounds."""
    messages = [Message.system("You are a coding agent. Always run the tests first.")]
    for step in range(1, 11):
        call = ToolCall(id=f"call_{step}", name="read_log", arguments={"step": step})
        log = "\n".join(
            f"{step}.{line:02d} ledger_{step}: copied {line * 1000 + step} rows, index rebuilt"
            for line in range(1, 31)
        )
        messages += [
            Message.user(f"Step {step}: migrate the ledger table {step} and its indexes."),
            Message.assistant(tool_calls=(call,)),
            Message.tool(call.id, log),
            Message.assistant(f"Ledger table {step} is migrated; its indexes are rebuilt."),
        ]
    return [*messages, Message.user("Now write the migration notes.")]


def cached_share(response: Response | Exception) -> float:
    assert isinstance(response, Response)
    usage = response.usage
    return usage.cache_read_tokens / usage.prompt_tokens


@pytest.mark.llama_server
def test_the_servers_prompt_cache_serves_the_warm_summary_request(provider: Recording) -> None:
    client = Client(provider, RecoveryConfig(max_token_escalations=0), microcompact=None)
    assert provider.structured_output_keeps_prompt()  # llama.cpp: a schema is a grammar
    messages = conversation()
    reply = client.send(messages, tools=(READ,), max_tokens=32)
    short = CompactionConfig(summary_tokens=64)  # the random model writes until the limit
    with pytest.raises(CannotSummarise):  # its summaries are nonsense
        client.compact([*messages, reply.message], config=short)
    (sent, chat), (warm, answered), (rendered, rendered_answer) = provider.calls
    assert warm.messages[:-1] == (*sent.messages, reply.message)
    assert warm.messages[-1] == summary_turn(None, structured=True)
    assert warm.tools == sent.tools and warm.settings.response_format is not None
    assert isinstance(chat, Response) and isinstance(answered, Response)
    # What the server reports it reused: the whole chat request, and so most of this one.
    assert answered.usage.cache_read_tokens >= chat.usage.prompt_tokens
    assert cached_share(answered) >= WARM_SHARE
    assert rendered.messages[0].text == STRUCTURED_PROMPT
    assert cached_share(rendered_answer) < 1 - WARM_SHARE  # a new prompt: next to nothing

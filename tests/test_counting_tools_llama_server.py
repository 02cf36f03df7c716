"""The pre-flight estimate counts a request's tool definitions, against the real llama-server.

The request is Claude Code's own (tests/data/claude-code/messages-request.json: a system
prompt, twelve tool definitions in ~32 KB of JSON, a short user turn), as the proxy parses
it. The server runs the tiny model with a chat template that renders tools as Qwen2.5's does
(their JSON, one per line, in the system turn), as real models' templates do; the tiny
model's own ChatML template leaves them out of the prompt. The upstream's count is
llama-server's `/apply-template` of the messages and tools as the OpenAI-compatible adapter
sends them, tokenized by `/tokenize`: the prompt the server would evaluate.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from chatcli.errors import ContextRecoveryError
from chatcli.events import Event, PreflightRecovery
from chatcli.providers.base import Request
from chatcli.providers.counting import LlamaServerTokens, RemoteCounter
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Client
from chatcli.tokens.exact import CountingEstimator
from chatcli.wire.anthropic import AnthropicDialect

pytest_plugins = ("tests.servers",)
pytestmark = pytest.mark.llama_server

MODEL = "chatcli-tiny"
WINDOW = 16384  # under the request's prompt (its tools alone take more, in this tokenizer)
RECORDED = Path(__file__).resolve().parent / "data" / "claude-code" / "messages-request.json"
# Qwen2.5's chat template, its tools part as Qwen ships it (ChatML; tool calls and results
# left out: this request has none).
TOOLS_TEMPLATE = """\
{%- if tools %}
    {{- '<|im_start|>system\\n' }}
    {%- if messages[0]['role'] == 'system' %}
        {{- messages[0]['content'] }}
    {%- else %}
        {{- 'You are a helpful assistant.' }}
    {%- endif %}
    {{- "\\n\\n# Tools\\n\\nYou may call one or more functions to assist with the user query.\
\\n\\nYou are provided with function signatures within <tools></tools> XML tags:\\n<tools>" }}
    {%- for tool in tools %}
        {{- "\\n" }}
        {{- tool | tojson }}
    {%- endfor %}
    {{- "\\n</tools>\\n\\nFor each function call, return a json object with function name and \
arguments within <tool_call></tool_call> XML tags:\\n<tool_call>\\n{\\"name\\": <function-name>, \
\\"arguments\\": <args-json-object>}\\n</tool_call><|im_end|>\\n" }}
{%- elif messages[0]['role'] == 'system' %}
    {{- '<|im_start|>system\\n' + messages[0]['content'] + '<|im_end|>\\n' }}
{%- endif %}
{%- for message in messages %}
    {%- if not (message.role == 'system' and loop.first) %}
        {{- '<|im_start|>' + message.role + '\\n' + (message.content or '') + '<|im_end|>\\n' }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|im_start|>assistant\\n' }}
{%- endif %}
"""


@pytest.fixture(scope="module")
def server(tiny_model: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    from tests.servers import _llama_server

    template = tmp_path_factory.mktemp("template") / "tools.jinja"
    template.write_text(TOOLS_TEMPLATE)
    extra = ("--chat-template-file", str(template))
    with _llama_server(tiny_model, tmp_path_factory, WINDOW, extra) as base_url:
        yield base_url


def upstream_count(provider: OpenAICompatible, request: Request) -> int:
    """The server's count of the prompt `request` makes, tools rendered by its template."""
    params = provider.params(request)
    body = {"messages": params["messages"], "tools": params["tools"]}
    prompt = provider.post_json("/apply-template", body)["prompt"]
    assert "<tools>" in prompt  # the template rendered the definitions
    tokens = provider.post_json("/tokenize", {"content": prompt, "add_special": True})["tokens"]
    return len(tokens)


def test_a_claude_code_request_is_estimated_with_its_tools_within_a_tenth(server: str) -> None:
    parsed = AnthropicDialect().parse(json.loads(RECORDED.read_text()))
    provider = OpenAICompatible(base_url=server + "/v1", model=MODEL, api_key="k")
    actual = upstream_count(provider, Request(messages=parsed.messages, tools=parsed.tools))
    assert actual > WINDOW  # it does not fit: pre-flight says so, and by how much
    events: list[Event] = []
    client = Client(
        provider,
        hooks=(events.append,),
        estimator=CountingEstimator(counter=RemoteCounter(LlamaServerTokens(provider))),
        context_window=WINDOW,
        max_retries=0,
        microcompact=None,
    )
    with pytest.raises(ContextRecoveryError):  # its system prompt and tools alone are over
        client.send(parsed.messages, tools=parsed.tools, max_tokens=16)
    estimate = next(e.estimate for e in events if isinstance(e, PreflightRecovery))
    assert abs(estimate - actual) <= actual / 10, (estimate, actual)
    assert httpx.get(server + "/health").status_code == 200

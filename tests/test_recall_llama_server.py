"""The recall tool (chatcli.recall_tool) round trip through the real llama-server.

A level drops the message holding a deploy key; the tool is offered to the server with the
request, and a scripted assistant turn calls it (the tiny model does not call tools on its
own). The handler answers with the dropped message's original text, and the server is sent
the call and its result: it answers, and the prompt it counted holds the recalled text (the
prompt grows by at least the text's own tokens, as the server's /tokenize counts them).
"""

from __future__ import annotations

import httpx

import chatcli
from chatcli.config import RecoveryConfig
from chatcli.history.truncate import apply_recovery_level
from chatcli.messages import Message, StopReason, ToolCall
from chatcli.providers.openai_compat import OpenAICompatible
from chatcli.recovery import Client

pytest_plugins = ("tests.servers",)

PLANTED = "The deploy key for staging ends in 7Q2 and lives in /srv/keys/staging.pem."


def transcript() -> list[Message]:
    messages = [Message.system("You are a helpful assistant."), Message.user(PLANTED)]
    for n in range(6):
        messages += [Message.assistant("Noted."), Message.user(f"Tell me about topic {n}.")]
    return messages


def test_the_recall_tool_round_trips_a_dropped_message(llama_server: str) -> None:
    history = transcript()
    config = RecoveryConfig(emergency_keep_messages=4, carry_pct=0)
    view = apply_recovery_level(history, 2, config).messages
    assert all(PLANTED not in m.text for m in view)  # the level dropped it

    tool = chatcli.recall_tool(history)
    call = ToolCall(id="call_recall_1", name=tool.name, arguments={"message": 2})
    recalled = tool.result(call)
    assert recalled.tool_result is not None and not recalled.tool_result.is_error
    assert recalled.text.endswith("\n" + PLANTED)
    assert recalled.text.startswith("[message #2 (user), chars 0-")

    model = httpx.get(llama_server + "/v1/models", timeout=30).json()["data"][0]["id"]
    provider = OpenAICompatible(llama_server + "/v1", model, environ={})
    client = Client(provider, microcompact=None)
    try:
        scripted = Message.assistant("", tool_calls=(call,))
        without = client.send([*view, scripted, Message.tool(call.id, "")], tools=[tool.spec])
        reply = client.send([*view, scripted, recalled], tools=[tool.spec], max_tokens=8)
    finally:
        provider.close()
    assert reply.stop_reason in (StopReason.END_TURN, StopReason.MAX_TOKENS)
    tokens = httpx.post(llama_server + "/tokenize", json={"content": recalled.text}, timeout=30)
    grown = reply.usage.input_tokens - without.usage.input_tokens
    assert grown >= len(tokens.json()["tokens"]) > 10


def test_the_definition_has_each_providers_shape_and_bad_calls_are_errors() -> None:
    tool = chatcli.recall_tool(transcript())
    assert tool.openai["type"] == "function" and tool.openai["function"]["name"] == tool.name
    assert tool.anthropic["input_schema"]["required"] == ["message"]
    assert tool.gemini["parameters_json_schema"]["properties"]["message"]["type"] == "integer"
    text, error = tool({"message": 2, "start": 4, "length": 6})
    assert (text.splitlines()[1], error) == ("deploy", False)
    assert tool({"message": 99})[1] and tool({"message": "2"})[1]

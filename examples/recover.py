"""A conversation that no longer fits the window, recovered by chatcli (runs offline).

The provider below is a stand-in for a real model with a 500-token window: it rejects a prompt
that does not fit with OpenAI's own error text, exactly as the API words it.
"""

from chatcli import Client, Message, Request, Response, StopReason, Usage


class SmallModel:
    """A toy provider: about 4 characters per token, a 500-token window."""

    def complete(self, request: Request) -> Response:
        tokens = sum(len(m.text) for m in request.messages) // 4
        if tokens > 500:
            raise RuntimeError(
                "This model's maximum context length is 500 tokens. However, your messages "
                f"resulted in {tokens} tokens. Please reduce the length of the messages."
            )
        last = request.messages[-1].text
        answer = Message.assistant(f"You asked: {last!r}")
        return Response(message=answer, stop_reason=StopReason.END_TURN, usage=Usage(tokens, 8))

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)


history = [Message.system("You are terse.")]
for i in range(30):
    history += [Message.user(f"Question {i}: " + "x" * 150), Message.assistant("y" * 150)]
history.append(Message.user("What is the capital of Portugal?"))

client = Client(SmallModel(), hooks=[lambda event: print("  chatcli:", event.describe())])
reply = client.send(history)
print(reply.message.text)
print(
    f"{reply.calls} calls; {len(reply.view)} of {len(history)} messages sent; "
    f"the full history ({len(history)} messages) is untouched"
)

"""An answer streamed through chatcli, with request settings, continued past max_tokens as one
stream (runs offline).

The provider below is a stand-in for a real model that streams: it writes its answer in small
pieces, stops at `max_tokens` (about 4 characters a token) as real models do, and, asked to
continue, resumes a few characters early, as models often do at the seam.
"""

from collections.abc import Iterator

from chatcli import (
    Client,
    Event,
    Message,
    Reply,
    Request,
    Response,
    Settings,
    StopReason,
    TextDelta,
    Usage,
)

ANSWER = (
    "Lisbon is the capital of Portugal. It lies on the Tagus estuary, on the Atlantic coast, "
    "and has been the seat of government since the thirteenth century."
)


class StreamingModel:
    """A toy provider that streams its answer in 8-char pieces and honours max_tokens."""

    def complete(self, request: Request) -> Response:
        partial = request.messages[-2].text if len(request.messages) > 2 else ""
        start = max(0, len(partial) - 24)  # a continuation repeats a few words at the seam
        rest = ANSWER[start:]
        budget = 4 * (request.max_tokens or 1000)
        stop = StopReason.MAX_TOKENS if len(rest) > budget else StopReason.END_TURN
        text = rest[:budget]
        usage = Usage(input_tokens=40, output_tokens=len(text) // 4)
        return Response(message=Message.assistant(text), stop_reason=stop, usage=usage)

    async def acomplete(self, request: Request) -> Response:
        return self.complete(request)

    def stream(self, request: Request) -> Iterator[TextDelta | Response]:
        response = self.complete(request)
        text = response.message.text
        for start in range(0, len(text), 8):
            yield TextDelta(text=text[start : start + 8])
        yield response


client = Client(StreamingModel(), settings=Settings(temperature=0.2))
history = [Message.system("Answer in full sentences."), Message.user("Capital of Portugal?")]
shown = ""
for item in client.stream(history, max_tokens=20, settings=Settings(seed=7)):
    if isinstance(item, TextDelta):
        shown += item.text
    elif isinstance(item, Event):
        print("  chatcli:", item.describe())
    elif isinstance(item, Reply):
        print(shown)
        print(f"{item.calls} calls, one answer; shown == reply: {shown == item.message.text}")

"""The replay server itself: answers in order, records what the SDKs sent."""

import json
import urllib.request

from tests.replay import Scripted, replay_server


def test_replays_in_order_and_records_requests() -> None:
    with replay_server() as server:
        server.add(Scripted(status=200, body={"ok": 1}), Scripted(events=[{"a": 1}, "[DONE]"]))
        req = urllib.request.Request(server.url + "/v1/x", data=b'{"q": 2}', method="POST")
        with urllib.request.urlopen(req) as r:
            assert json.loads(r.read()) == {"ok": 1}
        with urllib.request.urlopen(server.url + "/s") as r:
            assert r.read() == b'data: {"a": 1}\n\ndata: [DONE]\n\n'
    assert [r.path for r in server.requests] == ["/v1/x", "/s"]
    assert server.requests[0].json() == {"q": 2}

"""The suite-wide network guard: loopback only."""

import socket

import pytest


def test_non_loopback_connection_is_refused() -> None:
    with socket.socket() as s, pytest.raises(RuntimeError, match="reach the network"):
        s.connect(("192.0.2.1", 80))


def test_loopback_is_allowed() -> None:
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        with socket.socket() as client:
            client.connect(server.getsockname())
            accepted, _ = server.accept()
            with accepted:
                assert accepted.getpeername() == client.getsockname()

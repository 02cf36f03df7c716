"""The model calls of a compaction, written once for the sync and the async entry points.

A compaction's steps are a generator (`Steps`) that yields `Call`s (a request, and how long to
wait before sending it) and receives `Response`s, or the provider's exception thrown in, so
the steps decide what a failure means. `drive` and `adrive` run the steps against a provider;
they catch `Exception` only, so cancellation (`asyncio.CancelledError`, `KeyboardInterrupt`)
propagates as itself and `asyncio.timeout` and task cancellation keep working.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from dataclasses import dataclass
from typing import TypeVar

from chatcli.providers.base import Provider, Request, Response

__all__ = ["AsyncSleep", "Call", "Sleep", "Steps", "adrive", "drive"]

T = TypeVar("T")
Sleep = Callable[[float], object]
AsyncSleep = Callable[[float], Awaitable[object]]


@dataclass(frozen=True, slots=True, kw_only=True)
class Call:
    """What the steps ask the driver: wait `wait` seconds (a retry's backoff), then send."""

    request: Request
    wait: float = 0.0


Steps = Generator[Call, Response, T]


def drive(steps: Steps[T], provider: Provider, sleep: Sleep) -> T:
    """Run `steps` against `provider`: its exceptions are thrown into the steps, which decide."""
    try:
        call = next(steps)
        while True:
            if call.wait:
                sleep(call.wait)
            try:
                response = provider.complete(call.request)
            except Exception as exc:
                call = steps.throw(exc)
            else:
                call = steps.send(response)
    except StopIteration as stop:
        value: T = stop.value
        return value


async def adrive(steps: Steps[T], provider: Provider, asleep: AsyncSleep) -> T:
    """The async twin of `drive`."""
    try:
        call = next(steps)
        while True:
            if call.wait:
                await asleep(call.wait)
            try:
                response = await provider.acomplete(call.request)
            except Exception as exc:
                call = steps.throw(exc)
            else:
                call = steps.send(response)
    except StopIteration as stop:
        value: T = stop.value
        return value

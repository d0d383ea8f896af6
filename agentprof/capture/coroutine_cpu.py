"""Await a coroutine and count the thread CPU used by its own steps (not by the tasks that run while it waits):
the CPU time of an async tool."""

from __future__ import annotations

from collections.abc import Generator
from time import thread_time_ns as _thread_time
from typing import Any


class MeasuredCoroutine:
    """Await a coroutine, summing the thread CPU used while it (not the tasks it waits on) runs.

    Drives the coroutine step by step exactly as ``await`` does (PEP 380 delegation), timing each step.
    """

    __slots__ = ("coro", "cpu_ns")

    def __init__(self, coro: Any) -> None:
        self.coro = coro
        self.cpu_ns = 0

    def __await__(self) -> Generator[Any, Any, Any]:
        coro = self.coro
        tt = _thread_time
        send: Any = None
        throw: BaseException | None = None
        while True:
            t = tt()
            try:
                yielded = coro.throw(throw) if throw is not None else coro.send(send)
            except StopIteration as stop:
                self.cpu_ns += tt() - t
                return stop.value
            except BaseException:
                self.cpu_ns += tt() - t
                raise
            self.cpu_ns += tt() - t
            try:
                send, throw = (yield yielded), None
            except GeneratorExit:
                coro.close()
                raise
            except BaseException as e:
                send, throw = None, e

"""A clock that moves by declared costs, so that what a reader measures is scripted, not timed.

A `BlockReader` decides where its blocks are read from what it measures on
its clock (`grainfn._src.core.executor_policy`). Given a `ScriptedClock`, it
measures only what the test declares: an element read in the consumer costs
what `charged` says, a block from an executor what `CostedExecutor` says, and
its decisions are the same on any machine, however busy. The executors may
be real (worker processes, threads, Ray actors): the clock stays in the
consumer's process, and nothing of it is sent to them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from grainfn import fn
from grainfn._src.core.blocks import Executor, Result, Task

Cost = float | Callable[[int], float]
"""Seconds for the element at a position: a number, or a function of the position."""


def seconds_at(cost: Cost, position: int) -> float:
    return cost(position) if callable(cost) else cost


class ScriptedClock:
    """A clock that moves only when told: wall seconds, and the consumer thread's CPU seconds.

    Examples:
        >>> clock = ScriptedClock()
        >>> clock.advance(0.5), clock.advance(0.25, cpu=0.0)
        (None, None)
        >>> clock.now(), clock.cpu()
        (0.75, 0.5)
    """

    def __init__(self) -> None:
        self.seconds = 0.0
        self.cpu_seconds = 0.0

    def now(self) -> float:
        return self.seconds

    def cpu(self) -> float:
        return self.cpu_seconds

    def advance(self, seconds: float, cpu: float | None = None) -> None:
        """`seconds` pass, of which the thread computed `cpu` (all of them by default)."""
        self.seconds += seconds
        self.cpu_seconds += seconds if cpu is None else cpu


def charged(dataset: Any, clock: ScriptedClock, cost: Cost, waits: bool = False) -> Any:
    """`dataset`, each element read costing `cost` seconds of `clock` (waiting, if `waits`).

    For the reader in the consumer only: what it reads here is charged, and
    the executor reads its own copy of `dataset`, uncharged.
    """

    def charge(position: int, element: Any) -> Any:
        seconds = seconds_at(cost, position)
        clock.advance(seconds, 0.0 if waits else seconds)
        return element

    return fn.map_with_index(charge, dataset)


class CostedTask:
    """A real executor's task, whose block keeps the consumer waiting its declared cost."""

    def __init__(self, owner: CostedExecutor, task: Task, first: int, stop: int) -> None:
        self.owner, self.task, self.first, self.stop = owner, task, first, stop

    def result(self) -> Result:
        block, error, _ = self.task.result()  # however long it really took
        seconds = sum(seconds_at(self.owner.cost, x) for x in range(self.first, self.stop))
        self.owner.clock.advance(seconds, 0.0)  # the consumer waits, computing nothing
        self.owner.blocks.append((self.first, self.stop))
        return block, error, seconds

    def cancel(self) -> bool:
        return self.task.cancel()


class CostedExecutor:
    """`executor` (worker processes, threads, Ray actors), its blocks costing `cost` an element.

    The consumer waits `cost` seconds of `clock` per element of each block it
    takes, whatever the real wait; the task reports that cost as its own.
    Everything else is the executor's (`ready`, `start_seconds`, ...).
    `blocks` lists the `(first, stop)` of the blocks taken, in order.
    """

    def __init__(self, executor: Executor, clock: ScriptedClock, cost: Cost) -> None:
        self.executor, self.clock, self.cost = executor, clock, cost
        self.blocks: list[tuple[int, int]] = []

    @property
    def task_seconds(self) -> float:
        return self.executor.task_seconds

    @property
    def max_tasks(self) -> int:
        return self.executor.max_tasks

    def submit(self, first: int, stop: int) -> CostedTask:
        return CostedTask(self, self.executor.submit(first, stop), first, stop)

    def close(self) -> None:
        self.executor.close()

    def __getattr__(self, name: str) -> Any:  # the executor's optional attributes
        if name == "executor":
            raise AttributeError(name)
        return getattr(self.executor, name)

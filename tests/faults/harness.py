"""Reading a pipeline through its faults, checking what each error leaves behind."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from support.waiting import GENEROUS


@dataclasses.dataclass
class Run:
    """What reading through the faults gave."""

    elements: list[Any]
    errors: list[BaseException]
    states: list[Any]  # get_state() right after each error
    delivered_at_error: list[int]  # how many elements had been delivered at each error
    seconds_to_error: list[float]  # from the read that raised to the error

    def assert_no_hang(self) -> None:
        """Each error came while its read waited, not after a timeout: a worker's death
        is an error within seconds, never a freeze."""
        slowest = max(self.seconds_to_error, default=0.0)
        assert slowest < GENEROUS, f"an error took {slowest:.0f} s to arrive: a hang"


def read_through(it: Any, max_errors: int, catch: tuple[type[BaseException], ...]) -> Run:
    """Reads `it` to its end, catching up to `max_errors` errors of the `catch` types."""
    run = Run([], [], [], [], [])
    while True:
        started = time.monotonic()
        try:
            element = next(it)
        except StopIteration:
            return run
        except catch as error:
            run.seconds_to_error.append(time.monotonic() - started)
            # Without its traceback: frames would keep the test's iterators (and workers) alive.
            run.errors.append(error.with_traceback(None))
            run.states.append(it.get_state())
            run.delivered_at_error.append(len(run.elements))
            if len(run.errors) >= max_errors:
                return run
            continue
        run.elements.append(element)


def reference_states(make: Callable[[], Any]) -> list[Any]:
    """`get_state()` of a fault-free iterator after 0, 1, 2, ... elements."""
    it = iter(make())
    states = [it.get_state()]
    for _ in it:
        states.append(it.get_state())
    return states


def flat(elements: list[Any]) -> list[int]:
    """The numbers in a list of elements or batches, sorted: the multiset delivered."""
    out: list[int] = []
    for element in elements:
        out.extend(np.asarray(element).ravel().tolist())
    return sorted(out)


def payload(state: Any) -> Any:
    """The position in a state, without the lines that name the pipeline's functions."""
    if isinstance(state, bytes):
        import json

        state = json.loads(state)
    return {k: v for k, v in state.items() if k not in ("pipeline", "sampler", "data_source")}

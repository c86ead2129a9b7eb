"""A checkpointable iterator that is not a pipeline's, as a Grain user may write one."""

from __future__ import annotations


class Scripted:
    """Reads `script` one step per `next`: a value, an error, or an end that later calls read past.

    Each step is `("value", v)`, `("error", v)` (an OSError naming v) or
    `("end", v)` (a StopIteration). What it yields depends on its position
    alone, so read-ahead timing changes nothing. Its state is
    `{"position": n}`; `closed` says whether `close` was called.
    """

    def __init__(self, script: list[tuple[str, int]]) -> None:
        self.script, self.position = script, 0
        self.closed = False

    def __iter__(self) -> Scripted:
        return self

    def __next__(self) -> int:
        if self.position >= len(self.script):
            raise StopIteration
        kind, value = self.script[self.position]
        self.position += 1
        if kind == "error":
            raise OSError(f"bad record {value}")
        if kind == "end":
            raise StopIteration
        return value

    def get_state(self) -> dict[str, int]:
        return {"position": self.position}

    def set_state(self, state: dict[str, int]) -> None:
        self.position = state["position"]

    def close(self) -> None:
        self.closed = True

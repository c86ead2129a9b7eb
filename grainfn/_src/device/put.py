"""put_on_device: a stream's elements as jax arrays on a device, with the stream's own states.

Moving elements to a device changes where they live, not what they are, so
the stage is transparent: a state saved with it restores without it, and the
other way round (as `mp_prefetch` and `thread_prefetch` are).
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grainfn._src.core.stream import BaseCursor, Cursor, PassThroughStream, Stream


@dataclasses.dataclass(frozen=True, repr=False)
class PutOnDeviceStream(PassThroughStream):
    """`jax.device_put(element, device)` for each element of the parent."""

    transparent = True  # the same elements, on a device; the same states
    spec_rule = "parent"

    device: Any

    def open(self, state: Any) -> Cursor:
        import jax  # heavy: only where elements go to a device

        return _PutCursor(self.parent.open(state), self.device, jax.device_put)

    def describe_stage(self) -> str:
        return f"put_on_device({self.device})"


class _PutCursor(BaseCursor):
    def __init__(self, parent: Cursor, device: Any, put: Any) -> None:
        self.parent, self.device, self.put = parent, device, put

    def next(self) -> Any:
        return self.put(self.parent.next(), self.device)

    def next_many(self, count: int) -> list[Any]:
        put, device = self.put, self.device
        return [put(element, device) for element in self.parent.next_many(count)]

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


def put_on_device(device: Any, stream: Stream[Any]) -> Stream[Any]:
    """`stream` with each element put on `device` (anything `jax.device_put` takes).

    Examples:
        >>> import jax
        >>> from grainfn import fn
        >>> stream = put_on_device(jax.devices()[0], fn.from_dataset(fn.range(3)))
        >>> [type(x).__name__ for x in fn.iterate(stream)][:1]
        ['ArrayImpl']
    """
    return PutOnDeviceStream(stream, device)

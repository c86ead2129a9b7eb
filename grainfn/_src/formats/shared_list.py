"""SharedMemoryDataSource: a list of small values in shared memory, read by every process.

Grain's `grain.sources.SharedMemoryDataSource` (`grain.python.InMemoryDataSource`):
a `multiprocessing.shared_memory.ShareableList` that is also a data source.
It pickles as its name, so worker processes attach to the same segment
instead of copying the values. Values are those a ShareableList holds: int,
float, bool, str and bytes (each under 10 MB) and None, in a list whose length
is fixed. The segment lives until `unlink()`: the process that made it
unlinks it when done, as with any shared memory.
"""

from __future__ import annotations

from collections.abc import Sequence
from multiprocessing import shared_memory
from typing import Any


class SharedMemoryDataSource(shared_memory.ShareableList):
    """A data source in shared memory: made from `elements`, or attached to by `name`.

    Examples:
        >>> source = SharedMemoryDataSource([3, "a", b"b", None, 1.5])
        >>> len(source), source[1], source[3]
        (5, 'a', None)
        >>> again = SharedMemoryDataSource(name=source.shm.name)  # another process would
        >>> again[0]
        3
        >>> again.close()
        >>> source.close()
        >>> source.unlink()
    """

    def __init__(self, elements: Sequence[Any] | None = None, *, name: str | None = None) -> None:
        if elements is None and name is None:
            raise ValueError(
                "SharedMemoryDataSource needs the elements to share, or the name of a segment "
                "to attach to (source.shm.name of the one that made it)."
            )
        super().__init__(elements, name=name)

    def __str__(self) -> str:
        return f"InMemoryDataSource(name={self.shm.name}, len={len(self)})"

    def close(self) -> None:
        """Detaches this process from the segment (the values stay for the others)."""
        self.shm.close()

    def unlink(self) -> None:
        """Frees the segment; call it once, in the process that made it, when all are done."""
        self.shm.unlink()

"""Background save and load of an iterator: the two halves of Orbax v1's `StatefulCheckpointable`.

Orbax v1 (`orbax.checkpoint.experimental.v1`) saves an object that has
`async def save(directory) -> Awaitable[None]` and `async def load(directory)
-> Awaitable[None]`: it awaits `save` on the training thread, which must take
what it needs and return at once, and runs the returned awaitable in the
background, after the (temporary) directory exists. `DatasetIterator` and the
`DataLoader` iterator implement the pair with one line each over `save` and
`load` below: the state is taken with `get_state()` before `save` returns,
and encoding and file I/O happen in the background.
"""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

from grainfn._src.checkpoint import files


def save(iterator: files.StatefulIterator, directory: Any) -> Coroutine[Any, Any, None]:
    """Takes `iterator`'s state now; returns a coroutine that writes its file into `directory`.

    Args:
        iterator: An iterator with Grain's `get_state`.
        directory: Orbax's `PathAwaitingCreation` (awaited before writing), or
            an existing directory as a path or string.

    Returns:
        A coroutine, not yet started, that waits for `directory` to exist and
        writes this process's state file there (see `files.write_state`).

    Examples:
        >>> import asyncio, tempfile
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(4).to_iter_dataset())
        >>> next(it)
        0
        >>> directory = tempfile.mkdtemp()
        >>> writing = save(it, directory)  # the state is taken here
        >>> next(it)
        1
        >>> asyncio.run(writing)
        >>> asyncio.run(load(it, directory))
        >>> next(it)
        1
    """
    return _write(directory, iterator.get_state())


def load(iterator: files.StatefulIterator, directory: Any) -> Coroutine[Any, Any, None]:
    """A coroutine that reads this process's state file in `directory` and sets `iterator` to it.

    Raises (when awaited):
        ValueError: if the file is missing, corrupt, truncated or the state of
            another pipeline; the message names the file (see `files.read_state`).
    """
    return _read_and_set(iterator, directory)


async def _write(directory: Any, state: Any) -> None:
    if hasattr(directory, "await_creation"):
        directory = await directory.await_creation()
    await asyncio.to_thread(files.write_state, directory, state)


async def _read_and_set(iterator: files.StatefulIterator, directory: Any) -> None:
    await asyncio.to_thread(files.restore, iterator, directory)

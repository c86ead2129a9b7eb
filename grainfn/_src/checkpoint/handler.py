"""The Orbax CheckpointHandler of iterators, and its `CheckpointSave`/`CheckpointRestore` args.

`orbax.checkpoint.CheckpointManager(dir).save(step,
args=CheckpointSave(iterator))` writes one JSON file per JAX process
(`files.state_file_name`) into the step's directory, alone or as one item of
`ocp.args.Composite` beside a model. The handler is asynchronous: the training
thread only calls `iterator.get_state()`; encoding and writing happen in
Orbax's background commit, after Orbax has created the temporary directory
that it renames into place once every item is written, so an interrupted save
never replaces a complete checkpoint. The file itself is always written
atomically too (`file_io.write_atomically`), so even a save straight into a
directory that holds a state leaves that state if it fails.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import threading
from typing import Any

import orbax.checkpoint as ocp

from grainfn._src.checkpoint import files
from grainfn._src.core import validate


class CheckpointHandler(ocp.AsyncCheckpointHandler):
    """Orbax handler that saves and restores iterators with Grain's get_state and set_state.

    It serves iterators whose `get_state()` returns a dict (`DatasetIterator`)
    and those whose `get_state()` returns JSON bytes (`DataLoader`
    iterators), like Grain's handler. Use it through `CheckpointSave` and
    `CheckpointRestore`; Orbax finds the handler from them. With an
    asynchronous manager (Orbax's default), `save` holds the caller only for
    `get_state()`: the file is encoded and written in Orbax's background commit.

    Examples:
        >>> import tempfile
        >>> import orbax.checkpoint as ocp
        >>> import grainfn as grain
        >>> import grainfn.checkpoint
        >>> ds = grain.MapDataset.range(10).seed(1).shuffle().to_iter_dataset()
        >>> it = iter(ds)
        >>> first = [next(it) for _ in range(3)]
        >>> with ocp.CheckpointManager(tempfile.mkdtemp()) as mgr:
        ...     _ = mgr.save(3, args=grainfn.checkpoint.CheckpointSave(it))
        ...     mgr.wait_until_finished()
        ...     rest = list(it)
        ...     restored = mgr.restore(3, args=grainfn.checkpoint.CheckpointRestore(iter(ds)))
        >>> list(restored) == rest
        True
    """

    async def async_save(
        self, directory: Any, item: Any = None, args: CheckpointSave | None = None
    ) -> list[ocp.future.Future]:
        """Takes the iterator's state now; returns the commit that writes its file later.

        Args:
            directory: The item's (temporary) directory; the commit waits for
                Orbax to create it.
            item: The iterator (Orbax's older calling convention).
            args: `CheckpointSave(iterator)`.
        """
        return [_WriteWhenAwaited(directory, _state(item, args))]

    def save(self, directory: Any, item: Any = None, args: CheckpointSave | None = None) -> None:
        """Writes the iterator's state file now (Orbax's synchronous path).

        The file is replaced atomically (`files.write_state`): a save that
        fails, into a directory that holds a state already, leaves that state.
        """
        files.write_state(directory, _state(item, args))

    def restore(
        self, directory: Any, item: Any = None, args: CheckpointRestore | None = None
    ) -> Any:
        """Sets the iterator to the state saved in `directory` and returns it.

        Raises:
            ValueError: if this process's file is missing, corrupt, truncated
                or the state of another pipeline; the message names the file.
        """
        iterator = _iterator(item, args, "restore")
        files.restore(iterator, directory)
        start_prefetch = getattr(iterator, "start_prefetch", None)
        if callable(start_prefetch):
            start_prefetch()
        return iterator

    def metadata(self, directory: Any) -> None:
        """Iterator checkpoints have no metadata (as in Grain)."""
        del directory

    def structure(self, directory: Any) -> None:
        """Iterator checkpoints have no tree structure (as in Grain)."""
        del directory

    def finalize(self, directory: Any) -> None:
        """Nothing to do once the checkpoint is complete."""
        del directory

    def close(self) -> None:
        """Nothing to release."""

    @classmethod
    def typestr(cls) -> str:
        """The name Orbax records for this handler."""
        return f"{cls.__module__}.{cls.__qualname__}"


@ocp.args.register_with_handler(CheckpointHandler, for_save=True)
@dataclasses.dataclass
class CheckpointSave(ocp.args.CheckpointArgs):
    """Orbax args that save an iterator's state: `mgr.save(step, args=CheckpointSave(it))`.

    Attributes:
        item: A `DatasetIterator` or `DataLoader` iterator (anything with
            Grain's `get_state`/`set_state`).
        grain_format: Write the state in Grain's own format (the iterator's
            `grain_state()`; a DataLoader's for Grain with 0 workers), so that
            Grain restores the checkpoint: for going back to Grain mid-run.
    """

    item: Any
    grain_format: bool = False

    def __post_init__(self) -> None:
        validate.check_flag(self.grain_format, "CheckpointSave grain_format")
        if self.grain_format and not callable(getattr(self.item, "grain_state", None)):
            raise TypeError(
                "CheckpointSave(grain_format=True) needs a grainfn DatasetIterator or DataLoader "
                "iterator (their grain_state() writes Grain's format), got "
                f"{type(self.item).__qualname__}. Save it without grain_format."
            )


@ocp.args.register_with_handler(CheckpointHandler, for_restore=True)
@dataclasses.dataclass
class CheckpointRestore(ocp.args.CheckpointArgs):
    """Orbax args that restore into an iterator: `mgr.restore(step, args=CheckpointRestore(it))`.

    The iterator is set to the saved state and returned; it must be built by
    the same pipeline code as the saved one (another pipeline is refused).

    Attributes:
        item: The iterator to set.
    """

    item: Any


class _WriteWhenAwaited:
    """The commit of an iterator's state file, started when Orbax first waits for it.

    Orbax waits for a save's commits in its background thread, in order, after
    the commit that creates the directories; so starting the write there keeps
    even the start of a thread off the training thread, whose part of the
    save is then `get_state()` alone. The write still waits for Orbax's
    directory signals (`CommitFutureAwaitingContractedSignals`), and a
    synchronous Checkpointer, which waits on the calling thread, just writes.
    """

    def __init__(self, directory: Any, state: Any) -> None:
        self._directory, self._state = directory, state
        self._lock = threading.Lock()
        self._commit: ocp.future.Future | None = None
        self._cancelled = False

    def result(self, timeout: float | None = None) -> Any:
        with self._lock:
            if self._cancelled:
                raise concurrent.futures.CancelledError("The iterator save was cancelled.")
            if self._commit is None:
                self._commit = ocp.future.CommitFutureAwaitingContractedSignals(
                    _write(self._directory, self._state), name="grainfn_iterator_save"
                )
            commit = self._commit
        return commit.result(timeout=timeout)

    def cancel(self) -> None:
        with self._lock:
            self._cancelled = True
            if self._commit is not None:
                self._commit.cancel()


async def _write(directory: Any, state: Any) -> None:
    files.write_state(directory, state)


def _state(item: Any, args: CheckpointSave | None) -> Any:
    """The state to save: `get_state()`, or Grain's format where `args.grain_format` asks."""
    iterator = _iterator(item, args, "save")
    if args is not None and args.grain_format:
        return iterator.grain_state()
    return iterator.get_state()


def _iterator(item: Any, args: Any, action: str) -> Any:
    iterator = args.item if args is not None else item
    if not (hasattr(iterator, "get_state") and hasattr(iterator, "set_state")):
        raise TypeError(
            f"grainfn's CheckpointHandler can only {action} an iterator with get_state and "
            f"set_state, got {type(iterator).__name__}. Pass "
            f"grainfn.checkpoint.Checkpoint{action.capitalize()}(iter(dataset))."
        )
    return iterator

"""Grain's DatasetIterator, as a thin wrapper over a core StreamIterator."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, TypeVar

from grainfn._src.checkpoint import background
from grainfn._src.core.iterator import StreamIterator, open_iterator
from grainfn._src.core.state_codec import StateCodec
from grainfn._src.core.stream import Stream
from grainfn._src.facade.config import config

T = TypeVar("T")
It = TypeVar("It", bound="CheckpointableIterator[Any]")


class CheckpointableIterator(Iterator[T]):
    """What the Grain API's iterators share: Orbax v1 save and load, `close`, `with` blocks."""

    state_protocol_only = True  # its get_state and set_state are placeholders (stages/iterable.py)

    def get_state(self) -> Any:
        """The position after the last element returned (JSON-able)."""
        raise NotImplementedError

    def set_state(self, state: Any) -> None:
        """Continues from a state `get_state` returned."""
        raise NotImplementedError

    async def save(self, directory: Any) -> Awaitable[None]:
        """Orbax v1's checkpointable save: takes the state now, returns the background write."""
        return background.save(self, directory)

    async def load(self, directory: Any) -> Awaitable[None]:
        """Orbax v1's checkpointable load: returns the background read that sets the state."""
        return background.load(self, directory)

    def close(self) -> None:
        """Releases threads and processes; `next` then raises ValueError."""
        raise NotImplementedError

    def __enter__(self: It) -> It:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


class DatasetIterator(CheckpointableIterator[T]):
    """A checkpointable iterator over an IterDataset: Grain's `DatasetIterator`.

    `get_state()` returns a small JSON-able dict (positions and counters, never
    data) that names the pipeline; `set_state` refuses one of another pipeline.
    The core iterator is `.core`; its `.state` is the same position as a
    record of integers.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(5).to_iter_dataset())
        >>> next(it), next(it)
        (0, 1)
        >>> saved = it.get_state()
        >>> next(it)
        2
        >>> it.set_state(saved)
        >>> next(it)
        2
    """

    state_protocol_only = True  # its get_state and set_state read the pipeline's own iterator

    _core: StreamIterator[T]
    _codec: StateCodec
    _next: Callable[[], T]

    def __init__(self, parents: Any = ()) -> None:
        """Grain's constructor, for subclasses that implement the iterator themselves."""
        self._parents = tuple(parents) if isinstance(parents, Sequence) else (parents,)

    @property
    def _parent(self) -> Any:
        """The one parent iterator: what a Grain subclass reads after `super().__init__(parent)`."""
        if len(self._parents) != 1:
            raise AttributeError(
                f"{type(self).__qualname__} has {len(self._parents)} parent iterators, not 1."
            )
        return self._parents[0]

    @classmethod
    def over(cls, stream: Stream[T]) -> DatasetIterator[T]:
        """An iterator over a core stream, from its start.

        The stream goes through the instruments set now (see
        `grainfn._src.core.instrument`): with `grainfn.config` option
        `py_debug_mode` on, the iterator runs a timed copy of it (same elements
        and states, see `grainfn.describe`); with
        `py_dataset_visualization_output_dir` set, the pipeline is written there
        first (`save_pipeline`).
        """
        it: DatasetIterator[T] = object.__new__(DatasetIterator)
        it._parents = ()
        it._codec = StateCodec(stream)
        it._attach(open_iterator(stream, None, config.instruments))
        return it

    def _attach(self, core: StreamIterator[T]) -> None:
        self._core = core
        self._next = core.next_element

    @property
    def core(self) -> StreamIterator[T]:
        """The core iterator; `.core.state` is the state record."""
        return self._core

    def __next__(self) -> T:
        return self._next()

    def get_state(self) -> dict[str, Any]:
        """The position after the last element returned, as a JSON-able dict."""
        return self._codec.encode(self._core.state)

    def set_state(self, state: dict[str, Any]) -> None:
        """Continues from a state that `get_state` returned for this pipeline.

        A state written by Grain itself (`{"next_index": ...}` and the like,
        also read from an Orbax checkpoint Grain wrote) is taken where it
        determines grainfn's (see `grainfn._src.grain_states.streams`).

        Raises:
            ValueError: if the state belongs to another pipeline or version, or
                is truncated, or is Grain's for a stage whose position it does
                not determine; the message names what differs.
        """
        # Imported here: Grain's states name every stage, packing and file formats included.
        from grainfn._src.grain_states.decoding import decode_state

        self.restart_at(decode_state(self._codec, state))

    def grain_state(self) -> dict[str, Any]:
        """The position after the last element returned, written as Grain's own state.

        For going back to Grain mid-run: Grain's `set_state` of the same
        pipeline continues from it with the elements this iterator would
        yield next (`grainfn.checkpoint.CheckpointSave(it, grain_format=True)`
        writes it in an Orbax checkpoint Grain restores).

        Raises:
            ValueError: naming the stage whose Grain state grainfn cannot write
                (Grain's `mp_prefetch` splits its state between its workers:
                write the state of the pipeline without it, for Grain without it).

        Examples:
            >>> import grainfn as grain
            >>> it = iter(grain.MapDataset.range(9).to_iter_dataset().filter(lambda x: x % 3))
            >>> next(it), next(it), next(it)
            (1, 2, 4)
            >>> it.grain_state()  # positions 0 to 4 read
            {'next_index': 5}
        """
        from grainfn._src.grain_states.streams import to_grain  # knows every stage: imported here

        return to_grain(self._codec.stream, self._core.state)

    def restart_at(self, record: Any) -> None:
        """Continues from a state record of this pipeline (checked)."""
        self._core.close()
        self._attach(StreamIterator(self._core.stream, record))

    def start_prefetch(self) -> None:
        """Starts the background reads now, for example before restoring a model."""
        self._core.start_prefetch()

    def close(self) -> None:
        """Releases threads (and, with workers, processes); `next` then raises ValueError.

        A subclass that iterates by itself (Grain's protocol) has nothing to release here.
        """
        core = getattr(self, "_core", None)
        if core is not None:
            core.close()
            self._next = core.next_element

    def __repr__(self) -> str:
        if not hasattr(self, "_codec"):  # a subclass that iterates by itself
            return object.__repr__(self)
        lines = "\n".join("  " + line for line in self._codec.pipeline)
        return f"DatasetIterator at {self._core.state} of:\n{lines}"

"""Grain's `get_next_index` and `set_next_index` of a DatasetIterator.

The rules are the stages' own (`grainfn._src.grain_states.next_index`); these
functions only take the iterator apart and move it.
"""

from __future__ import annotations

from typing import Any

from grainfn._src.core import validate
from grainfn._src.facade.iterator import DatasetIterator
from grainfn._src.grain_states.next_index import at_next_index, next_index


def get_next_index(ds_iter: DatasetIterator[Any]) -> int:
    """The index of the next element `ds_iter` returns.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(10).to_iter_dataset().batch(2))
        >>> _ = next(it)
        >>> get_next_index(it)
        1
    """
    core = _core(ds_iter)
    return next_index(core.stream, core.state)


def set_next_index(ds_iter: DatasetIterator[Any], index: int) -> None:
    """Moves `ds_iter` so that its next element is the one at `index`.

    Examples:
        >>> import grainfn as grain
        >>> it = iter(grain.MapDataset.range(10).to_iter_dataset())
        >>> set_next_index(it, 7)
        >>> next(it)
        7

    Raises:
        IndexError: for an index past the end of the dataset read.
        NotImplementedError: for a pipeline whose position is not one index.
    """
    index = validate.check_nonnegative_int(index, "index")
    core = _core(ds_iter)
    ds_iter.restart_at(at_next_index(core.stream, core.state, index))


def _core(ds_iter: Any) -> Any:
    if not isinstance(ds_iter, DatasetIterator):
        raise TypeError(f"Expected a grainfn DatasetIterator, got {type(ds_iter).__name__}.")
    return ds_iter.core

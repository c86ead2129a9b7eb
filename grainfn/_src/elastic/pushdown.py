"""Stream maps and filters over a dataset read, moved into the dataset: the same elements, faster.

`filter(p, from_dataset(d))` yields what `from_dataset(filter(p, d))` yields
(the second skips the holes the filter leaves), with the same states (the
position in `d`), and likewise for `map`. Read as a dataset, a logical shard
judges and maps whole blocks of its positions, and an `mp_prefetch` runs them
in its workers. A filter moves only onto a dataset without holes, so that
Grain's filter check counts the same elements in the same windows. Each stage
says whether and how it moves (`Stream.moved_into_dataset`, in its module).
"""

from __future__ import annotations

from typing import Any

from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.rebuild import with_parents


def into_dataset(stream: Any) -> Any:
    """`stream` with each map and filter directly over a `from_dataset` moved into its dataset.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.map(str, fn.filter(lambda x: x % 2, fn.from_dataset(fn.range(6))))
        >>> moved = into_dataset(stream)
        >>> print(moved)
        from_dataset()
          map(str)  [length 6]
            filter(<lambda>)  [length 6]
              range(0, 6, 1)  [length 6]
        >>> list(fn.iterate(moved)) == list(fn.iterate(stream))
        True
    """
    if isinstance(stream, Dataset) or not stream.parents:
        return stream
    stream = with_parents(stream, tuple(into_dataset(p) for p in stream.parents)) or stream
    leaf = getattr(stream, "parent", None)
    if type(leaf) is not FromDatasetStream or leaf.allow_nones:
        return stream
    return stream.moved_into_dataset(leaf) or stream  # as the stage declares

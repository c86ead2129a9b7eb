"""Worker processes and read-ahead sized from a RAM budget, by the size of a few elements.

The rule is Grain's (`pick_performance_config`): the average size of a few
elements decides how many fit in the budget. Worker processes each hold about
one element of the whole pipeline; the read-ahead buffers of the datasets a
stream reads with `from_dataset` share the budget between them.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import math
import sys
from typing import Any, NamedTuple

import numpy as np

from grainfn._src.core import validate
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.iterator import StreamIterator
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.stream import Stream

_logger = logging.getLogger("grainfn")

DEFAULT_MAX_BUFFER = 1000
"""The read-ahead buffer when neither the budget nor `max_buffer_size` limits it."""


class BudgetSizes(NamedTuple):
    """What fits a RAM budget: worker processes, and positions read ahead."""

    num_workers: int
    buffer_size: int


def element_bytes(element: Any) -> int:
    """The bytes an element holds: arrays by `nbytes`, containers by their items.

    Examples:
        >>> element_bytes({"x": np.zeros(4, np.float32), "y": [np.zeros(2, np.int64)]})
        32
    """
    if isinstance(element, dict):
        return sum(element_bytes(value) for value in element.values())
    if isinstance(element, (list, tuple)):
        return sum(element_bytes(item) for item in element)
    if isinstance(element, np.ndarray):
        return int(element.nbytes)
    return sys.getsizeof(element)


def sizes_for_budget(
    data: Dataset[Any] | Stream[Any],
    ram_budget_mb: int,
    *,
    max_workers: int,
    max_buffer_size: int | None = None,
    samples: int = 5,
) -> BudgetSizes:
    """Workers and a read-ahead buffer that fit `ram_budget_mb`, from the size of a few elements.

    Workers: as many elements of `data` as fit the budget, at most
    `max_workers`. Read-ahead: as many elements of the datasets `data` reads
    with `from_dataset` as fit the budget shared between them, at most
    `max_buffer_size` (None: `DEFAULT_MAX_BUFFER`). When fewer than `samples`
    elements can be read, the maxima are taken. A dataset has no read-ahead
    under it: its workers are sized from its own elements, and the buffer is
    the maximum.

    Args:
        data: The pipeline: a stream, or a dataset (read in order).
        ram_budget_mb: The megabytes the prefetched elements may take.
        max_workers: The most worker processes.
        max_buffer_size: The most positions read ahead; None: `DEFAULT_MAX_BUFFER`.
        samples: How many elements to measure.

    Examples:
        >>> from grainfn import fn
        >>> megabyte = fn.map(lambda x: np.zeros(1024 * 1024 // 8), fn.range(100))
        >>> sizes_for_budget(fn.from_dataset(megabyte), 4, max_workers=8)
        BudgetSizes(num_workers=4, buffer_size=4)
    """
    budget = validate.check_positive_int(ram_budget_mb, "ram_budget_mb")
    samples = validate.check_positive_int(samples, "samples_to_check")
    workers = validate.check_nonnegative_int(max_workers, "max_workers")
    if max_buffer_size is None:
        buffer_cap = DEFAULT_MAX_BUFFER
    else:
        buffer_cap = validate.check_nonnegative_int(max_buffer_size, "max_buffer_size")
    if isinstance(data, Dataset):
        stream: Stream[Any] = FromDatasetStream(data)
        leaves: list[Stream[Any]] = []  # no from_dataset, so no read-ahead buffer to size
    elif isinstance(data, Stream):
        stream, leaves = data, read_streams(data)
    else:
        raise TypeError(
            f"sizes_for_budget takes a Stream or a Dataset, got {validate.short_repr(data)} of "
            f"type {type(data).__name__}."
        )
    element_mb = average_mb([stream], samples)
    num_workers = workers if element_mb <= 0 else min(int(budget / element_mb), workers)
    leaf_mb = average_mb(leaves, samples)
    fitting = buffer_cap if leaf_mb <= 0 else int(budget / (leaf_mb * len(leaves)))
    return BudgetSizes(num_workers, min(fitting, buffer_cap))


def average_mb(streams: list[Stream[Any]], samples: int) -> float:
    """The average megabytes of the first `samples` elements of `streams` (0 if too few to tell).

    Examples:
        >>> from grainfn import fn
        >>> quarter = fn.map(lambda x: np.zeros(1024 * 1024 // 32), fn.range(10))
        >>> average_mb([fn.from_dataset(quarter)], samples=4)
        0.25
    """
    if not streams:
        return 0.0
    each = math.ceil(samples / len(streams))
    found: list[Any] = []
    for stream in streams:
        with contextlib.closing(StreamIterator(stream)) as elements:
            found += itertools.islice(elements, each)
    if len(found) < samples:
        _logger.warning(
            "pick_performance_config: %d of %d elements to measure; taking the maxima.",
            len(found),
            samples,
        )
        return 0.0
    return float(np.mean([element_bytes(e) for e in found])) / (1024 * 1024)


def read_streams(stream: Stream[Any]) -> list[Stream[Any]]:
    """The datasets `stream` reads with `from_dataset`, each read on its own.

    Examples:
        >>> from grainfn import fn
        >>> both = fn.mix([fn.from_dataset(fn.range(3)), fn.from_dataset(fn.range(5))])
        >>> [s.dataset.length for s in read_streams(both)]
        [3, 5]
    """
    found: list[Stream[Any]] = []

    def visit(node: Any) -> None:
        if isinstance(node, FromDatasetStream):
            found.append(FromDatasetStream(node.dataset))
            return
        if isinstance(node, Stream):
            for parent in node.parents:
                visit(parent)

    visit(stream)
    return found

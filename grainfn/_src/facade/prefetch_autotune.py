"""Grain's `pick_performance_config`: workers and read-ahead sized from a RAM budget.

The rule is Grain's: the average size of a few elements decides how many
fit in the budget. Worker processes each hold about one element of the whole
pipeline; the read-ahead buffers of the MapDatasets under `to_iter_dataset`
share the budget between them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import itertools
import logging
import math
import sys
from typing import Any

import numpy as np

from grainfn._src.core import validate
from grainfn._src.core.iterator import StreamIterator
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.stream import Stream
from grainfn._src.facade.dataset import IterDataset, MapDataset, iter_core
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions, available_cores

_logger = logging.getLogger("grainfn")

DEFAULT_MAX_BUFFER = 1000
"""The read-ahead buffer when neither the budget nor `max_buffer_size` limits it."""


@dataclasses.dataclass(slots=True)
class PerformanceConfig:
    """What `pick_performance_config` chose: options for `mp_prefetch` and `to_iter_dataset`.

    Attributes:
        multiprocessing_options: Worker processes for `mp_prefetch`.
        read_options: Read-ahead for `to_iter_dataset`.
    """

    multiprocessing_options: MultiprocessingOptions | None = None
    read_options: ReadOptions | None = None


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


def pick_performance_config(
    ds: IterDataset[Any] | MapDataset[Any],
    *,
    ram_budget_mb: int | None,
    max_workers: int | None,
    max_buffer_size: int | None,
    samples_to_check: int = 5,
) -> PerformanceConfig:
    """Workers and a read-ahead buffer that fit `ram_budget_mb`, from the size of a few elements.

    Workers: as many elements of `ds` as fit the budget, at most
    `max_workers` (default: every core). Read-ahead: as many elements of the
    MapDatasets under `to_iter_dataset` as fit the budget shared between them,
    at most `max_buffer_size` (default 1000). When fewer than
    `samples_to_check` elements can be read, the maxima are taken. A
    MapDataset (as Grain takes one) has no read-ahead under it: its workers
    are sized from its own elements, and the buffer is the maximum.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(100).map(lambda x: np.zeros(1024 * 1024 // 8))
        >>> config = pick_performance_config(
        ...     ds.to_iter_dataset(), ram_budget_mb=4, max_workers=8, max_buffer_size=None)
        >>> config.multiprocessing_options.num_workers, config.read_options.prefetch_buffer_size
        (4, 4)
    """
    if ram_budget_mb is None:
        raise TypeError(
            "pick_performance_config needs ram_budget_mb, the megabytes the prefetched "
            "elements may take; got None."
        )
    budget = validate.check_positive_int(ram_budget_mb, "ram_budget_mb")
    samples = validate.check_positive_int(samples_to_check, "samples_to_check")
    if max_workers is not None:
        validate.check_nonnegative_int(max_workers, "max_workers")
    if max_buffer_size is not None:
        validate.check_nonnegative_int(max_buffer_size, "max_buffer_size")
    workers = available_cores() if max_workers is None else max_workers
    if not isinstance(ds, (MapDataset, IterDataset)):
        raise TypeError(
            "pick_performance_config takes an IterDataset or a MapDataset, got "
            f"{validate.short_repr(ds)} of type {type(ds).__name__}."
        )
    if isinstance(ds, MapDataset):
        stream: Stream[Any] = FromDatasetStream(ds.core)
        leaves = []  # no to_iter_dataset, so no read-ahead buffer to size
    else:
        stream = iter_core(ds, "pick_performance_config")
        leaves = _read_streams(stream)
    element_mb = _average_mb([stream], samples)
    num_workers = workers if element_mb <= 0 else min(int(budget / element_mb), workers)
    buffer_cap = DEFAULT_MAX_BUFFER if max_buffer_size is None else max_buffer_size
    leaf_mb = _average_mb(leaves, samples)
    fitting = buffer_cap if leaf_mb <= 0 else int(budget / (leaf_mb * len(leaves)))
    buffer = min(fitting, buffer_cap)
    return PerformanceConfig(
        MultiprocessingOptions(num_workers=num_workers), ReadOptions(prefetch_buffer_size=buffer)
    )


def _average_mb(streams: list[Stream[Any]], samples: int) -> float:
    """The average megabytes of the first elements of `streams` (0 if too few to tell)."""
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


def _read_streams(stream: Stream[Any]) -> list[Stream[Any]]:
    """The MapDatasets the pipeline reads with `to_iter_dataset`, each read on its own."""
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

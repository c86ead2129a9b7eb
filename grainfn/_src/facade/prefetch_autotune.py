"""Grain's `prefetch_autotune` module: `pick_performance_config` and its `PerformanceConfig`.

The sizing is the core's (`grainfn._src.parallel.sizing`, Grain's rule): the
average size of a few elements decides how many fit in a RAM budget. Here the
sizes become Grain's options.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from grainfn._src.core import validate
from grainfn._src.facade.dataset import IterDataset, MapDataset
from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions
from grainfn._src.parallel.cores import available_cores
from grainfn._src.parallel.sizing import sizes_for_budget


@dataclasses.dataclass(slots=True)
class PerformanceConfig:
    """What `pick_performance_config` chose: options for `mp_prefetch` and `to_iter_dataset`.

    Attributes:
        multiprocessing_options: Worker processes for `mp_prefetch`.
        read_options: Read-ahead for `to_iter_dataset`.
    """

    multiprocessing_options: MultiprocessingOptions | None = None
    read_options: ReadOptions | None = None


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
        >>> import numpy as np
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
    if not isinstance(ds, (MapDataset, IterDataset)):
        raise TypeError(
            "pick_performance_config takes an IterDataset or a MapDataset, got "
            f"{validate.short_repr(ds)} of type {type(ds).__name__}."
        )
    sizes = sizes_for_budget(
        ds.core,
        ram_budget_mb,
        max_workers=available_cores() if max_workers is None else max_workers,
        max_buffer_size=max_buffer_size,
        samples=samples_to_check,
    )
    return PerformanceConfig(
        MultiprocessingOptions(num_workers=sizes.num_workers),
        ReadOptions(prefetch_buffer_size=sizes.buffer_size),
    )

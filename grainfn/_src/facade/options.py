"""ReadOptions and MultiprocessingOptions: how a pipeline reads, never what it yields."""

from __future__ import annotations

import dataclasses
import logging
from typing import Any

from grainfn._src.core import validate
from grainfn._src.parallel.cores import available_cores
from grainfn._src.parallel.deaths import check_worker_timeout

_logger = logging.getLogger("grainfn")


GRAIN_READ_THREADS = "grain-prefetch"
"""How Grain names the threads that read a MapDataset: `grain-prefetch_<n>`, `n < num_threads`."""


@dataclasses.dataclass(frozen=True)
class ReadOptions:
    """How `to_iter_dataset` reads a MapDataset: threads and read-ahead.

    As in Grain, the map-level pipeline (its data source included) is read in
    `num_threads` threads named `grain-prefetch_0`, `grain-prefetch_1`, ...,
    in worker processes too, or in the calling thread if either option is 0
    (sources may look at the name: MaxText's Hugging Face source does). They
    are handed one block of positions at a time, in order, and read up to
    `prefetch_buffer_size` positions ahead only where that pays: after a
    second of reading (at once where an element takes 0.1 ms or more), and
    for as long as the consumer then waits at least 1.5 times less. So the
    default of 16 threads costs cheap pipelines little. Elements and states
    never depend on these options.

    Attributes:
        num_threads: The most threads reading at once; 0 reads in the calling thread.
        prefetch_buffer_size: The most positions read ahead of the consumer.

    Examples:
        >>> ReadOptions(num_threads=0)
        ReadOptions(num_threads=0, prefetch_buffer_size=500)
    """

    num_threads: int = 16
    prefetch_buffer_size: int = 500

    def __post_init__(self) -> None:
        validate.check_nonnegative_int(self.num_threads, "ReadOptions.num_threads")
        validate.check_nonnegative_int(
            self.prefetch_buffer_size, "ReadOptions.prefetch_buffer_size"
        )
        if 0 < self.prefetch_buffer_size < self.num_threads:  # 0 turns read-ahead off
            _logger.warning(
                "ReadOptions: prefetch_buffer_size=%d is below num_threads=%d, so at most %d "
                "threads can read at once; set prefetch_buffer_size >= num_threads.",
                self.prefetch_buffer_size,
                self.num_threads,
                self.prefetch_buffer_size,
            )

    @property
    def threads(self) -> int:
        """The threads a reader may start (`fn.from_dataset`): none if nothing may be read ahead."""
        return self.num_threads if self.prefetch_buffer_size else 0

    @property
    def buffer(self) -> int:
        """The positions a reader may read ahead (`fn.from_dataset`), at least one."""
        return max(1, self.prefetch_buffer_size)

    @property
    def thread_name(self) -> str | None:
        """The name of the threads that read (`fn.from_dataset`): Grain's, or None for none.

        Examples:
            >>> ReadOptions(num_threads=2).thread_name, ReadOptions(num_threads=0).thread_name
            ('grain-prefetch', None)
        """
        return GRAIN_READ_THREADS if self.threads else None


@dataclasses.dataclass(frozen=True)
class MultiprocessingOptions:
    """How `mp_prefetch` and `DataLoader` spread the per-position work over processes.

    Attributes:
        num_workers: Worker processes; 0 runs everything in this process.
        per_worker_buffer_size: Blocks each worker computes ahead of the consumer.
        enable_profiling: Accepted for Grain compatibility; grainfn has no profiler.
        worker_timeout: Seconds to wait for a worker's next answer before the
            worker is killed and `next()` raises `WorkerError` (nothing is
            lost: the next `next()` reads the block again with a new worker).
            None, the default, waits as long as the worker lives; at most
            2147483 (about 24.8 days, the longest wait poll() takes). Not in
            Grain; PyTorch's DataLoader calls it `timeout`.
        adaptive: Whether blocks may be read in this process while the
            workers start and where their work is too cheap to pay for its
            trip (the default; see `fn.mp_prefetch`). False keeps every read
            in the workers, for work that may crash a process. Not in Grain.

    Examples:
        >>> MultiprocessingOptions(num_workers=2).per_worker_buffer_size
        1
        >>> MultiprocessingOptions(2, 1, False, 30.0).worker_timeout
        30.0
    """

    num_workers: int = 0
    per_worker_buffer_size: int = 1
    enable_profiling: bool = False
    worker_timeout: float | None = None  # after Grain's: Grain code builds these positionally
    adaptive: bool = True

    def __post_init__(self) -> None:
        validate.check_nonnegative_int(self.num_workers, "MultiprocessingOptions.num_workers")
        validate.check_positive_int(
            self.per_worker_buffer_size, "MultiprocessingOptions.per_worker_buffer_size"
        )
        check_worker_timeout(self.worker_timeout, "MultiprocessingOptions.worker_timeout")
        validate.check_flag(self.enable_profiling, "MultiprocessingOptions.enable_profiling")
        validate.check_flag(self.adaptive, "MultiprocessingOptions.adaptive")

    def prefetch_arguments(self) -> dict[str, Any]:
        """What these options set of `fn.mp_prefetch`'s keyword arguments.

        Examples:
            >>> MultiprocessingOptions(2, 3).prefetch_arguments()
            {'buffer_per_worker': 3, 'worker_timeout': None, 'adaptive': True}
        """
        return {
            "buffer_per_worker": self.per_worker_buffer_size,
            "worker_timeout": self.worker_timeout,
            "adaptive": self.adaptive,
        }


def determine_worker_count(input_worker_count: int | None) -> int:
    """How many worker processes a request for `input_worker_count` gets.

    `DataLoader`'s rule for its `worker_count`, and Grain's internal
    `data_loader._determine_worker_count`: a count is checked and kept, None
    is every core this process may run on (Grain counts every core of the
    machine, `os.cpu_count()`, and keeps a negative count).

    Args:
        input_worker_count: A number of workers, or None.

    Raises:
        TypeError: if the count is not an integer.
        ValueError: if it is negative.

    Examples:
        >>> determine_worker_count(3)
        3
        >>> determine_worker_count(None) == available_cores()
        True
        >>> determine_worker_count(-1)
        Traceback (most recent call last):
        ...
        ValueError: worker_count must be an integer >= 0, got -1.
    """
    if input_worker_count is None:
        return available_cores()
    return validate.check_nonnegative_int(input_worker_count, "worker_count")

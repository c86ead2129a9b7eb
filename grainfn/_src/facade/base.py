"""Grain's dataset `base` module: the in-place protocols of some datasets, and DatasetOptions.

Grain's prefetch machinery finds the in-place protocols by attribute
(`SupportsInPlaceSlicing`, `SupportsSharedMemoryOutput`): `set_slice` of a
source, shared-memory batches. So here, as there, a dataset has the attribute
only where Grain's does: each is a property that raises AttributeError on any
other dataset. The facade datasets inherit these mixins; the logic is the
core's (`sequential_part`).

`DatasetOptions` are options for a whole pipeline (`WithOptionsIterDataset`
applies them). The options grainfn acts on are the filter thresholds (see
`grainfn._src.core.filter_check`). `execution_tracking_mode` and
`min_shm_size` are accepted and kept, and change nothing: per-stage timing is
`grainfn.config.update("py_debug_mode", True)`, and worker processes always
hand arrays over through memory files.
"""

from __future__ import annotations

import builtins
import contextlib
import enum
from collections.abc import Callable, Iterator
from typing import Any

from grainfn._src.core import validate
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.filter_check import RAISE_SETTING, WARN_SETTING
from grainfn._src.stages.batch import BatchedDataset, BatchedStream
from grainfn._src.stages.slice import sequential_part
from grainfn._src.stages.sources import RangeDataset, SourceDataset


class SharedMemoryOutput:
    """`enable_shared_memory_output`, which a batch has (MapDataset and IterDataset)."""

    _core: Any

    @property
    def enable_shared_memory_output(self) -> Callable[[], None]:
        """Grain's `enable_shared_memory_output()` of a batch: accepted, and it changes nothing.

        Grain's batch datasets write their batches to shared memory when asked
        (its `mp_prefetch` asks), so that worker processes hand numpy arrays
        over without a copy. grainfn's workers move every numpy payload
        through shared memory already, so here the call is a no-op: the
        elements, states and element spec stay the same. As in Grain, only a
        batch has it: on any other dataset it is an AttributeError (and
        `hasattr` is False).

        Examples:
            >>> import grainfn as grain
            >>> ds = grain.MapDataset.range(5).to_iter_dataset().batch(2)
            >>> ds.enable_shared_memory_output()
            >>> [b.tolist() for b in ds]
            [[0, 1], [2, 3], [4]]
            >>> hasattr(grain.MapDataset.range(5), "enable_shared_memory_output")
            False
        """
        core = getattr(self, "_core", None)
        if not isinstance(core, (BatchedDataset, BatchedStream)):
            last = f" (this one ends in {core.describe_stage()})" if core is not None else ""
            raise AttributeError(
                f"{type(self).__name__} object has no attribute 'enable_shared_memory_output': "
                f"as in Grain, only a batch (ds.batch(n)) has it{last}."
            )
        return _shared_memory_output_enabled


class InPlaceSlicing:
    """`set_slice`, which a source and a range have (MapDataset)."""

    _core: Any
    _unsliced: Dataset[Any]

    @property
    def set_slice(self) -> Callable[..., None]:
        """Grain's in-place `set_slice(sl, sequential_slice=True)` of a source or a range.

        `ds.set_slice(slice(i, None, n), sequential_slice=True)` makes `ds` read
        only part `i` of `n` contiguous, nearly equal parts of its data from
        then on (the part `even_split` gives shard `i` of `n`; the slice's stop
        is ignored, as in Grain). The part is always one of the whole source:
        a second call replaces the first. Non-sequential slicing is refused,
        as in Grain, with an error that is both a ValueError and an
        AssertionError (Grain asserts).

        Two differences, both because grainfn's datasets are values: a dataset
        built from `ds` before the call keeps reading all of it (in Grain it
        reads the part), and a second call on a source splits the whole source
        (Grain's splits by the current part's length). As in Grain, only a
        source (`MapDataset.source`) and a range (`MapDataset.range`) have
        `set_slice`; on any other dataset it is an AttributeError (and
        `hasattr` is False).

        Examples:
            >>> import grainfn as grain
            >>> ds = grain.MapDataset.range(21)
            >>> ds.set_slice(slice(2, None, 3), sequential_slice=True)
            >>> list(ds)
            [14, 15, 16, 17, 18, 19, 20]
            >>> hasattr(ds.map(str), "set_slice")
            False
        """
        whole = getattr(self, "_unsliced", None) or getattr(self, "_core", None)
        if not isinstance(whole, (SourceDataset, RangeDataset)):
            last = f" (this one ends in {whole.describe_stage()})" if whole is not None else ""
            raise AttributeError(
                f"{type(self).__name__} object has no attribute 'set_slice': as in Grain, only a "
                f"source (MapDataset.source) or a range (MapDataset.range) has it{last}."
            )
        source: Dataset[Any] = whole

        def set_slice(sl: builtins.slice, sequential_slice: bool = False) -> None:
            if not sequential_slice:
                raise SequentialSliceOnlyError(
                    f"set_slice({sl!r}, sequential_slice=False): a source reads only a "
                    "sequential slice (slice(part, None, parts)), as in Grain; pass "
                    "sequential_slice=True, or use ds[sl] for a new dataset of those positions."
                )
            self._core = sequential_part(sl, source)
            self._unsliced = source

        return set_slice


class NoStats:
    """What a Grain dataset or iterator subclass finds at `self._stats`: Grain's recorders, inert.

    Grain's `Stats` records per-stage times for its execution summary; a
    subclass calls them in its `__getitem__` or `__next__` (`with
    self._stats.record_self_time(): ...`). grainfn times stages its own way
    (`grainfn.config.update("py_debug_mode", True)`, then
    `grainfn.stage_stats`), so these record nothing and change nothing.

    Examples:
        >>> stats = NoStats()
        >>> with stats.record_self_time(num_elements=2):
        ...     pass
        >>> stats.record_output_spec([1, 2])
        [1, 2]
    """

    @contextlib.contextmanager
    def record_self_time(self, *, num_elements: int = 1, offset_ns: float = 0) -> Iterator[None]:
        """Grain's: times the block inside it. Here: runs it."""
        yield

    def record_output_spec(self, element: Any) -> Any:
        """Grain's: notes the structure of `element`, which it returns. Here: returns it."""
        return element

    def record_bytes_consumed(self, num_bytes: int) -> None:
        """Grain's: counts bytes read. Here: nothing."""

    def record_bytes_produced(self, num_bytes: int) -> None:
        """Grain's: counts bytes made. Here: nothing."""

    def report(self) -> None:
        """Grain's: logs the summary. Here: nothing (see `grainfn.stage_stats`)."""


class SequentialSliceOnlyError(ValueError, AssertionError):
    """A non-sequential `set_slice` of a source: a ValueError, and Grain's AssertionError."""


def _shared_memory_output_enabled() -> None:
    """What a batch's `enable_shared_memory_output()` does: nothing (see there)."""


class ExecutionTrackingMode(enum.Enum):
    """Which execution statistics a pipeline collects (kept; grainfn times with py_debug_mode)."""

    DISABLED = 1
    STAGE_TIMING = 2


_DEFAULTS: dict[str, Any] = {
    WARN_SETTING: 0.9,
    RAISE_SETTING: None,
    "execution_tracking_mode": ExecutionTrackingMode.DISABLED,
    "min_shm_size": 0,
}


class DatasetOptions:
    """Options for every stage of a pipeline; it remembers which ones were set explicitly.

    Attributes:
        filter_warn_threshold_ratio: A filter that drops this ratio of the
            elements in a window of 1000 it sees, or more, logs a warning (once
            per process, as Grain does). None: never. Default 0.9.
        filter_raise_threshold_ratio: A filter that drops this ratio or more
            raises ValueError. None (the default): never.
        execution_tracking_mode: Kept for Grain's API; it changes nothing.
        min_shm_size: Kept for Grain's API; it changes nothing.

    Examples:
        >>> a = DatasetOptions(filter_warn_threshold_ratio=0.5)
        >>> b = DatasetOptions(filter_warn_threshold_ratio=0.7, filter_raise_threshold_ratio=0.2)
        >>> a.merge(b)
        DatasetOptions(filter_warn_threshold_ratio=0.5, filter_raise_threshold_ratio=0.2)
    """

    def __init__(self, **settings: Any) -> None:
        unknown = sorted(set(settings) - set(_DEFAULTS))
        if unknown:
            raise TypeError(
                f"DatasetOptions got unknown option {unknown[0]!r}; the options are "
                f"{sorted(_DEFAULTS)}."
            )
        for name in (WARN_SETTING, RAISE_SETTING):
            if name in settings:
                _check_ratio(name, settings[name])
        mode = settings.get("execution_tracking_mode", ExecutionTrackingMode.DISABLED)
        if not isinstance(mode, ExecutionTrackingMode):
            raise TypeError(
                f"execution_tracking_mode must be an ExecutionTrackingMode, got {mode!r}."
            )
        self._set = dict(settings)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("_") or name not in _DEFAULTS:
            raise AttributeError(name)
        return self._set.get(name, _DEFAULTS[name])

    def merge(self, other: DatasetOptions | None) -> DatasetOptions:
        """These options, with `other`'s explicit settings where these set nothing."""
        if other is None:
            return self
        return DatasetOptions(**{**other._set, **self._set})

    def __eq__(self, other: object) -> bool:
        return isinstance(other, DatasetOptions) and self._set == other._set

    def __hash__(self) -> int:
        return hash(tuple(sorted(self._set.items(), key=lambda item: item[0])))

    def __repr__(self) -> str:
        shown = {
            name: self._set.get(name, _DEFAULTS[name]) for name in (WARN_SETTING, RAISE_SETTING)
        }
        shown.update({k: v for k, v in self._set.items() if k not in shown})
        return f"DatasetOptions({', '.join(f'{k}={v!r}' for k, v in shown.items())})"


def _check_ratio(name: str, value: Any) -> None:
    if value is None:
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 <= value <= 1:
        raise ValueError(
            f"{name} must be a ratio in [0, 1] or None, got {validate.short_repr(value)}."
        )

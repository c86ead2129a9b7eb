"""Grain's `DatasetOptions` and `WithOptionsIterDataset`: options for a whole pipeline.

The options grainfn acts on are the filter thresholds (see
`grainfn._src.core.filter_check`). `execution_tracking_mode` and `min_shm_size`
are accepted and kept, and change nothing: per-stage timing is
`grainfn.config.update("py_debug_mode", True)`, and worker processes always
hand arrays over through memory files.
"""

from __future__ import annotations

import enum
from typing import Any, TypeVar

from grainfn._src.core import validate
from grainfn._src.core.filter_check import RAISE_SETTING, WARN_SETTING, WithOptionsStream
from grainfn._src.facade.datasets import IterDataset, iter_core

T = TypeVar("T")


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


class WithOptionsIterDataset(IterDataset[T]):
    """`parent` with `options` applied to every stage of the pipeline, before and after it.

    Set several times, the options merge, and the setting nearest the end of
    the pipeline wins. Neither the elements nor the states change.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(3000).to_iter_dataset().filter(lambda x: x % 20 == 0)
        >>> ds = WithOptionsIterDataset(ds, DatasetOptions(filter_raise_threshold_ratio=0.9))
        >>> list(ds)
        Traceback (most recent call last):
        ...
        ValueError: filter(<lambda>) dropped 95.00% of the last 1000 elements it saw, ...
    """

    def __init__(self, parent: IterDataset[T], options: DatasetOptions) -> None:
        super().__init__(parent)
        if not isinstance(options, DatasetOptions):
            raise TypeError(f"WithOptionsIterDataset takes a DatasetOptions, got {options!r}.")
        self.options = options
        settings = tuple(sorted(options._set.items(), key=lambda item: item[0]))
        self._core = WithOptionsStream(iter_core(parent, "WithOptionsIterDataset"), settings)

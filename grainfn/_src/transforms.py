"""Grain's transformation classes, and how each becomes a plain function for the core.

A transformation is an object with one method (`map`, `random_map`, `filter`,
`flat_map`, `map_with_index`) or a `Batch` record. The core takes plain
functions, so each class is turned into its bound method; a plain callable is
taken as it is.
"""

from __future__ import annotations

import abc
import dataclasses
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple, Union

import numpy as np

from grainfn._src.core import validate


class Map(abc.ABC):
    """A one-to-one transformation: subclass it and define `map(element)`."""

    @abc.abstractmethod
    def map(self, element: Any) -> Any:
        """Returns the transformed element."""


class RandomMap(abc.ABC):
    """A random one-to-one transformation: define `random_map(element, rng)`.

    `rng` is a `np.random.Generator` that depends only on the pipeline's seed
    and the element's position: use it, and nothing else, for randomness.
    """

    @abc.abstractmethod
    def random_map(self, element: Any, rng: np.random.Generator) -> Any:
        """Returns the transformed element, drawing randomness from `rng` only."""


class TfRandomMap(abc.ABC):
    """A random one-to-one transformation for the DataLoader: define `np_random_map(element, rng)`.

    The DataLoader applies it as it applies a `RandomMap`; datasets refuse it,
    as Grain's do (use `RandomMap` there).
    """

    @abc.abstractmethod
    def np_random_map(self, element: Any, rng: np.random.Generator) -> Any:
        """Returns the transformed element, drawing randomness from `rng` only."""


class MapWithIndex(abc.ABC):
    """A one-to-one transformation that also sees the position: define `map_with_index`."""

    @abc.abstractmethod
    def map_with_index(self, index: int, element: Any) -> Any:
        """Returns the transformed element at `index`."""


class Filter(abc.ABC):
    """Keeps the elements for which `filter(element)` is true."""

    @abc.abstractmethod
    def filter(self, element: Any) -> bool:
        """Returns whether to keep `element`."""


class FlatMap(abc.ABC):
    """Splits an element into at most `max_fan_out` elements: define `flat_map(element)`.

    Attributes:
        max_fan_out: The most parts one element may give. A MapDataset reserves
            this many positions per element, so keep it close to the real maximum.
    """

    max_fan_out: int

    @abc.abstractmethod
    def flat_map(self, element: Any) -> Sequence[Any]:
        """Returns the parts of `element`."""


@dataclasses.dataclass(frozen=True)
class Batch:
    """Batches `batch_size` consecutive elements (see `MapDataset.batch`)."""

    batch_size: int
    drop_remainder: bool = False
    batch_fn: Callable[[Sequence[Any]], Any] | None = None

    def __post_init__(self) -> None:
        validate.check_flag(self.drop_remainder, "Batch drop_remainder")


class DatasetSelectionMap(abc.ABC):
    """Maps each position of a selection to `(dataset index, index in that dataset)`."""

    @abc.abstractmethod
    def __len__(self) -> int:
        """The number of positions of the selected dataset."""

    @abc.abstractmethod
    def __getitem__(self, index: int) -> tuple[int, int]:
        """Returns `(dataset index, index within that dataset)` for position `index`."""


Transformation = Union[Batch, Map, RandomMap, TfRandomMap, MapWithIndex, Filter, FlatMap]  # noqa: UP007
Transformations = Sequence[Transformation]


class Step(NamedTuple):
    """What a transformation does: the stage it becomes and the function it gives that stage.

    Attributes:
        stage: One of "map", "random_map", "map_with_index", "filter",
            "flat_map" and "batch": the `grainfn.fn` function that applies it.
        function: The function the stage calls (a bound method), or for a
            batch its `batch_fn` (None: stack).
        transform: The transformation itself (a Batch's size and remainder
            rule, a FlatMap's `max_fan_out` are read from it).
    """

    stage: str
    function: Callable[..., Any] | None
    transform: Any


TRANSFORMS: tuple[tuple[type[Any], str, str], ...] = (
    (Map, "map", "map"),
    (RandomMap, "random_map", "random_map"),
    (MapWithIndex, "map_with_index", "map_with_index"),
    (Filter, "filter", "filter"),
    (FlatMap, "flat_map", "flat_map"),
    (Batch, "batch", "batch_fn"),
)
"""Each transformation class, the stage it becomes and the attribute holding its function.

The one table from transformation to stage: the dataset methods, `apply` and
the DataLoader (which adds Grain's legacy operations to it) all read it.
"""


_CLASS_OF_STAGE = {stage: kind for kind, stage, _ in TRANSFORMS}
"""The transformation class of each stage, for error messages."""


def step_of(
    transform: Any, table: Sequence[tuple[type[Any], str, str]] = TRANSFORMS
) -> Step | None:
    """The step `transform` takes, by the first class of `table` it is an instance of; else None.

    Examples:
        >>> step_of(Batch(4)).stage, step_of(print)
        ('batch', None)
    """
    for kind, stage, attribute in table:
        if isinstance(transform, kind):
            return Step(stage, getattr(transform, attribute), transform)
    return None


def as_function(transform: Any, method: str) -> Callable[..., Any]:
    """The function the dataset method `method` applies for `transform`.

    A transformation object of the matching class gives its bound method; a
    plain callable is used as it is. A transformation of another kind is
    refused with the method that takes it.

    Examples:
        >>> class Double(Map):
        ...     def map(self, x):
        ...         return 2 * x
        >>> as_function(Double(), "map")(4)
        8
        >>> as_function(Double(), "filter")
        Traceback (most recent call last):
        ...
        TypeError: filter got a Map transformation (Double); pass it to .map(...) instead.
    """
    step = step_of(transform)
    if step is None:
        if not callable(transform):
            kind = _CLASS_OF_STAGE[method]
            raise TypeError(
                f"{method} takes a {kind.__name__} transformation or a callable, got {transform!r}."
            )
        return transform
    if step.stage == method:
        assert step.function is not None
        return step.function
    kind = _CLASS_OF_STAGE[step.stage]
    use = {"flat_map": ".apply(...)", "batch": ".batch(...) or .apply(...)"}
    raise TypeError(
        f"{method} got a {kind.__name__} transformation ({type(transform).__qualname__}); "
        f"pass it to {use.get(step.stage, f'.{step.stage}(...)')} instead."
    )


def apply_transformations(ds: Any, transformations: Any) -> Any:
    """Applies one transformation object, or a sequence of them, with the dataset's methods.

    Works on a MapDataset or an IterDataset alike.

    Examples:
        >>> import grainfn as grain
        >>> class AddOne(Map):
        ...     def map(self, x):
        ...         return x + 1
        >>> ds = apply_transformations(grain.MapDataset.range(4), [AddOne(), Batch(2)])
        >>> [b.tolist() for b in ds]
        [[1, 2], [3, 4]]
    """
    steps = transformations if isinstance(transformations, Sequence) else (transformations,)
    for transform in steps:
        if isinstance(transform, TfRandomMap):
            raise NotImplementedError(
                f"{type(transform).__name__} is a TfRandomMap, which the DataLoader applies "
                "(as in Grain); a dataset takes a RandomMap with random_map(element, rng)."
            )
        step = step_of(transform)
        if step is None:
            raise TypeError(
                f"apply takes Map, RandomMap, MapWithIndex, FlatMap, Filter or Batch "
                f"transformations, got {transform!r} of type {type(transform).__name__}. Wrap "
                "a plain function with .map(fn) instead."
            )
        if step.stage == "batch":
            ds = ds.batch(
                transform.batch_size,
                drop_remainder=transform.drop_remainder,
                batch_fn=transform.batch_fn,
            )
        elif step.stage == "flat_map":
            ds = ds.flat_map(step.function, max_fan_out=transform.max_fan_out)
        else:
            ds = getattr(ds, step.stage)(step.function)
    return ds


# Grain's other names for the transformation classes (`grain.MapTransform`, ...).
MapTransform = Map
RandomMapTransform = RandomMap
MapWithIndexTransform = MapWithIndex
FilterTransform = Filter
FlatMapTransform = FlatMap

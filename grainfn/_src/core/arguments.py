"""What the combinators accept: datasets or streams, sequences of them, and op seeds.

A map-level combinator takes its data through `as_dataset`, and a stream
combinator through `as_stream`, which reads a dataset as `fn.from_dataset(ds)`
does: `fn.limit(2, fn.range(5))` is `fn.limit(2, fn.from_dataset(fn.range(5)))`.
Both are defined in `grainfn._src.core.reading`, next to `from_dataset`, and
listed here with the other argument checks.

A value of an API built above the core (the Grain API's `MapDataset` and
`IterDataset`) that stands for a core value is a `Wrapper`; the core
unwraps one only with `core_of`, and never names the classes above it.
"""

from __future__ import annotations

from typing import Any, Protocol

from grainfn._src.core import validate
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import as_dataset as as_dataset
from grainfn._src.core.reading import as_stream as as_stream
from grainfn._src.core.stream import Stream
from grainfn._src.index.seeds import derive_seed

Data = Dataset[Any] | Stream[Any]
"""A dataset or a stream: the combinators that take either return the same kind."""


class Wrapper(Protocol):
    """A value that stands for a core value, which its class's `core` property gives.

    The Grain API's `MapDataset` (a `Dataset` inside) and `IterDataset` (a
    `Stream`) are wrappers. A wrapper's `core` may raise TypeError where it
    has no core value (an `IterDataset` subclass that iterates by itself may).
    """

    @property
    def core(self) -> Any:
        """The core value this one stands for: a grainfn Dataset or Stream."""
        ...


def core_of(value: Any) -> Any:
    """The core value `value` stands for: the `core` of a `Wrapper`, else `value` itself.

    A value is a wrapper when its class has a `core` property (the member of
    `Wrapper`); whatever else it is, it is returned unchanged.

    Args:
        value: A core value, a wrapper, or anything else.

    Returns:
        `value.core` for a wrapper, otherwise `value`.

    Raises:
        TypeError: where a wrapper's `core` does (it has no core value).

    Examples:
        >>> import grainfn
        >>> from grainfn import fn
        >>> core_of(grainfn.MapDataset.range(3))
        range(0, 3, 1)  [length 3]
        >>> ds = fn.range(3)
        >>> core_of(ds) is ds, core_of([1, 2])
        (True, [1, 2])
    """
    if isinstance(getattr(type(value), "core", None), property):
        wrapper: Wrapper = value
        return wrapper.core
    return value


def op_seed(
    seed: int | None, data: Data, what: str, limit: int | None = validate.SEED_LIMIT
) -> int:
    """`seed` checked, or the seed a `seed` stage upstream derives for this stage.

    An explicit seed must lie below `limit` (None: any seed >= 0 is allowed).
    """
    if seed is not None:
        return validate.check_seed(seed, f"{what} seed", limit)
    derived = derive_seed([data])
    if derived is None:
        raise ValueError(
            f"{what} needs a seed: pass seed=..., or seed the pipeline upstream with "
            "fn.seed(s, ds) (ds.seed(s) in the Grain API) to seed every random stage below it."
        )
    return derived


def as_components(datasets: Any, what: str, streams: bool = True) -> tuple[Any, ...]:
    """A non-empty list of datasets (or, if `streams`, of streams) as a tuple."""
    components = validate.check_list(
        datasets, what, "datasets or streams" if streams else "datasets"
    )
    if streams and all(isinstance(d, Stream) for d in components):
        return components
    return tuple(as_dataset(d, what) for d in components)


def as_data_list(data: Any, what: str) -> tuple[Any, ...]:
    """A non-empty list of datasets and streams as a tuple; a clear error for anything else."""
    components = validate.check_list(data, what, "grainfn datasets or streams")
    for position, item in enumerate(components):
        if not isinstance(item, (Dataset, Stream)):
            raise TypeError(
                f"{what} takes grainfn datasets or streams, but item {position} is "
                f"{validate.short_repr(item)} of type {type(item).__name__}."
            )
    return components

"""Grain's experimental `testing` module: `assert_equal_output_after_checkpoint`."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any, TypeVar

from grainfn._src.facade.dataset import IterDataset, MapDataset, iter_core
from grainfn._src.testing.assertions import assert_iterator_restores, assert_resumable

T = TypeVar("T")


_CHECKPOINT_ELEMENTS = 1000


def assert_equal_output_after_checkpoint(ds: Iterable[Any]) -> None:
    """Asserts that restoring the state saved before any element gives the same rest.

    Reads up to 1000 elements. A dataset built with grainfn's methods is
    checked on its core pipeline: each state goes through JSON into a fresh
    iterator (`assert_resumable`). Anything else whose iterator has
    `get_state` and `set_state` (a DataLoader, an ElasticIterator, an
    IterDataset subclass with its own iterator, ...) gets Grain's checks
    (`assert_iterator_restores`): the state keeps its structure, and an
    iterator set to any state gives it back and yields the same rest.

    Examples:
        >>> import grainfn as grain
        >>> assert_equal_output_after_checkpoint(grain.MapDataset.range(5).shuffle(seed=1))
        >>> ds = grain.MapDataset.range(12).shuffle(seed=1)
        >>> elastic = grain.experimental.ElasticIterator(ds, 4, grain.sharding.NoSharding())
        >>> assert_equal_output_after_checkpoint(elastic)
    """
    if isinstance(ds, MapDataset):
        ds = ds.to_iter_dataset()
    if not isinstance(ds, IterDataset) or getattr(ds, "_core", None) is None:
        assert_iterator_restores(ds, max_elements=_CHECKPOINT_ELEMENTS)
        return
    core = iter_core(ds, "assert_equal_output_after_checkpoint")
    assert_resumable(
        lambda: core,
        max_elements=_CHECKPOINT_ELEMENTS,
        resume_points=_CHECKPOINT_ELEMENTS + 1,
    )

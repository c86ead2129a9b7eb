"""What the combinators accept: one `as_stream`, one `as_dataset`, one check of a list."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import grainfn
from grainfn import fn
from grainfn._src.core import arguments, reading
from grainfn._src.core.arguments import core_of
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.stream import Stream
from grainfn._src.testing.specs import INTEGERS, apply_op, declared_stages

from support.registry import leaf_kinds, names, simplest_op


def sequences() -> Dataset[Any]:
    """Five elements that packing takes: {"x": an int32 sequence}."""
    return fn.map(lambda i: {"x": np.arange(i % 3 + 1, dtype=np.int32)}, fn.range(5))


def integers() -> Dataset[Any]:
    """Five integers, seeded: what every other stream combinator takes, drawn ones included."""
    return fn.seed(0, fn.range(5))


def batches() -> Dataset[Any]:
    """Batches of two integers: what rebatch takes."""
    return fn.batch(2, fn.range(5))


@functools.cache
def ray_pool() -> fn.RayPool:
    """One pool, so that two pipelines over it are equal (it starts Ray only when read)."""
    return fn.RayPool(2)


def on_device(data: Any) -> Any:
    import jax

    return fn.put_on_device(jax.devices()[0], data)


@dataclasses.dataclass(frozen=True)
class Combinator:
    """A stream function of one parent applied with fixed options, and the data it takes.

    Attributes:
        apply: The function applied to its data.
        data: The dataset it reads.
        read: Whether the test reads it (False: reading it starts a Ray cluster, so the
            pipelines are compared as built).
    """

    apply: Callable[[Any], Any]
    data: Callable[[], Dataset[Any]] = integers
    read: bool = True


UNDECLARED: dict[str, Combinator] = {
    "cache": Combinator(lambda data: fn.cache(data)),
    "thread_prefetch": Combinator(lambda data: fn.thread_prefetch(2, data)),
    "mp_prefetch": Combinator(lambda data: fn.mp_prefetch(0, data)),
    "ray_prefetch": Combinator(lambda data: fn.ray_prefetch(ray_pool(), data), read=False),
    "first_fit_pack": Combinator(
        lambda data: fn.first_fit_pack({"x": 4}, data, num_packing_bins=2), sequences
    ),
    "best_fit_pack": Combinator(
        lambda data: fn.best_fit_pack({"x": 4}, data, num_packing_bins=2), sequences
    ),
    "concat_then_split": Combinator(lambda data: fn.concat_then_split({"x": 4}, data), sequences),
    "pack_and_batch": Combinator(lambda data: fn.pack_and_batch({"x": 4}, 2, data), sequences),
    "rebatch": Combinator(lambda data: fn.rebatch(3, data), batches),
    "elastic_batches": Combinator(lambda data: fn.elastic_batches(2, data, num_logical_shards=1)),
    "grain_worker_order": Combinator(lambda data: fn.grain_worker_order(2, data)),
    "put_on_device": Combinator(on_device),
}
"""The stream-only functions of one parent whose stages declare no `random_stage`, with options.

A stage that declares one is drawn from its declaration (`declared`).
"""

UNDECLARED_AT_BOTH_LEVELS: dict[str, Combinator] = {
    "window_shuffle": Combinator(lambda data: fn.window_shuffle(2, data, seed=1)),
    "flat_map": Combinator(lambda data: fn.flat_map(lambda x: [x, x], data, max_fan_out=2)),
    "timed": Combinator(lambda data: fn.timed(data)),
}
"""Functions of one parent with a stage at each level and no `random_stage` on the stream's."""

NOT_ONE_PARENT: dict[str, str] = {
    "FromDatasetStream": "the lift itself",
    "MixedStream": "takes a list of pipelines (LIST_TAKERS)",
    "ZippedStream": "takes a list of pipelines (LIST_TAKERS)",
    "InterleavedDatasetsStream": "takes a list of pipelines (LIST_TAKERS)",
    "IterableStream": "a leaf: reads a user's iterable",
    "TFRecordStream": "a leaf: reads files",
    "ParquetFileStream": "a leaf: reads files",
    "PooledLeaf": "the leaf mp_prefetch and ray_prefetch read in their workers, built by them",
    "WithOptionsStream": "built by the Grain API's IterDataset options, not by a function of fn",
}
"""The leaf stream stages no function of one parent builds, each with why."""


def declared(both_levels: bool) -> dict[str, Combinator]:
    """The declared stream stages of one parent, each applied as its simplest spec.

    `both_levels`: those whose function has a declared map-level stage too
    (it keeps a Dataset at map level), else the stream-only ones (they lift it).
    """
    at_dataset = {stage.function for _, stage in declared_stages("dataset")}
    return {
        stage.name: Combinator(
            functools.partial(apply_op, simplest_op(stage, INTEGERS), level="stream")
        )
        for _, stage in declared_stages("stream")
        if not stage.combines and (stage.function in at_dataset) == both_levels
    }


def lifting() -> dict[str, Combinator]:
    """Every stream-only function of one parent: each lifts a Dataset with from_dataset."""
    return {**declared(both_levels=False), **UNDECLARED}


def at_both_levels() -> dict[str, Combinator]:
    """Every function of one parent with a stage at each level."""
    return {**declared(both_levels=True), **UNDECLARED_AT_BOTH_LEVELS}


def test_both_import_paths_are_the_one_definition() -> None:
    assert arguments.as_stream is reading.as_stream
    assert arguments.as_dataset is reading.as_dataset


def test_limit_takes_a_dataset_as_from_dataset_reads_it() -> None:
    assert list(fn.iterate(fn.limit(2, fn.range(5)))) == [0, 1]
    assert fn.limit(2, fn.range(5)) == fn.limit(2, fn.from_dataset(fn.range(5)))


@pytest.mark.parametrize("name", sorted(lifting()))
def test_a_stream_combinator_reads_a_dataset_as_its_from_dataset(name: str) -> None:
    combinator = lifting()[name]
    data = combinator.data()
    lifted, explicit = combinator.apply(data), combinator.apply(fn.from_dataset(data))
    assert repr(lifted) == repr(explicit)
    assert lifted == explicit
    if not combinator.read:
        return
    expected = list(fn.iterate(explicit))
    got = list(fn.iterate(lifted))
    assert len(got) == len(expected) > 0
    for x, y in zip(got, expected):
        assert repr(x) == repr(y)


@pytest.mark.parametrize("name", sorted(at_both_levels()))
def test_a_function_with_a_stage_at_each_level_keeps_a_dataset_at_map_level(name: str) -> None:
    combinator = at_both_levels()[name]
    assert isinstance(combinator.apply(combinator.data()), Dataset)
    assert isinstance(combinator.apply(fn.from_dataset(combinator.data())), Stream)


def test_every_stream_stage_of_one_parent_is_checked_here() -> None:
    built = {**lifting(), **at_both_levels()}
    reached = {type(c.apply(fn.from_dataset(c.data()))).__qualname__ for c in built.values()}
    leaves = set(names(leaf_kinds("stream")))
    missing = leaves - reached - set(NOT_ONE_PARENT)
    assert not missing, f"stream stages no combinator here builds: {sorted(missing)}"
    assert set(NOT_ONE_PARENT) <= leaves - reached, "NOT_ONE_PARENT names a stage built here"


def test_as_stream_lifts_a_dataset_with_from_dataset() -> None:
    ds = fn.range(3)
    stream = arguments.as_stream(ds, "limit")
    assert isinstance(stream, FromDatasetStream)
    assert stream == fn.from_dataset(ds)
    already = fn.from_dataset(ds)
    assert arguments.as_stream(already, "limit") is already


@pytest.mark.parametrize("bad", [[1, 2], 3, "abc", None, np.arange(3)])
def test_a_stream_combinator_names_the_bad_value_and_what_it_takes(bad: Any) -> None:
    message = rf"^limit needs a grainfn Stream or Dataset, got .* of type {type(bad).__name__}\."
    with pytest.raises(TypeError, match=message):
        fn.limit(2, bad)
    with pytest.raises(TypeError, match=r"It takes a Stream, a Dataset .* or a to_jax value"):
        arguments.as_stream(bad, "cache")


def test_as_dataset_refuses_a_stream_and_names_anything_else() -> None:
    with pytest.raises(TypeError, match="shuffle needs random access"):
        arguments.as_dataset(fn.from_dataset(fn.range(3)), "shuffle")
    with pytest.raises(TypeError, match=r"shuffle expects a grainfn Dataset .* of type list"):
        arguments.as_dataset([1, 2], "shuffle")


def test_core_of_unwraps_a_wrapper_and_returns_anything_else_as_it_is() -> None:
    ds = grainfn.MapDataset.range(4)
    iter_ds = ds.to_iter_dataset()
    assert core_of(ds) is ds.core and core_of(iter_ds) is iter_ds.core
    for value in (fn.range(3), fn.from_dataset(fn.range(3)), [1, 2], 3, None):
        assert core_of(value) is value


def test_core_of_passes_on_a_wrappers_type_error() -> None:
    class NoCore:
        @property
        def core(self) -> Any:
            raise TypeError("no core value")

    with pytest.raises(TypeError, match="no core value"):
        core_of(NoCore())


LIST_TAKERS: dict[str, Callable[[Any], Any]] = {
    "mix": lambda datasets: fn.mix(datasets),
    "concatenate": lambda datasets: fn.concatenate(datasets),
    "select_from_datasets": lambda datasets: fn.select_from_datasets(datasets, [(0, 0)]),
    "zip": lambda datasets: fn.zip(datasets),
    "interleave": lambda datasets: fn.interleave(2, datasets),
    "MapDataset.mix": lambda datasets: grainfn.MapDataset.mix(datasets),
    "MapDataset.concatenate": lambda datasets: grainfn.MapDataset.concatenate(datasets),
    "IterDataset.mix": lambda datasets: grainfn.IterDataset.mix(datasets),
    "ZipMapDataset": lambda datasets: grainfn.experimental.ZipMapDataset(datasets),
    "ZipIterDataset": lambda datasets: grainfn.experimental.ZipIterDataset(datasets),
}
"""Every function that takes a list of datasets, by the name its messages give."""


@pytest.mark.parametrize("name", sorted(LIST_TAKERS))
def test_a_list_of_datasets_is_checked_once_the_same_way(name: str) -> None:
    take = LIST_TAKERS[name]
    with pytest.raises(ValueError, match=rf"^{name} takes a non-empty list of .*, got \[\]\.$"):
        take([])
    with pytest.raises(TypeError, match=rf"^{name} takes a list of .*, got 'ab' \(a str\)\.$"):
        take("ab")

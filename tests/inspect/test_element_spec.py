"""get_element_spec against Grain 0.2.18's on the same pipelines, and its errors."""

from __future__ import annotations

import collections
import functools
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest

import grainfn
from grainfn import experimental, fn
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.read_threads import InNamedThreads, NamedThreads
from grainfn.experimental import (
    ParquetIterDataset,
    ShapeDtypeStruct,
    ShapeDtypeStructProtocol,
    batch_and_pad,
    get_element_spec,
)
from grainfn.fn import element_spec

from support.registry import kinds_in, leaf_kinds, names

pytestmark = pytest.mark.grain

Pair = collections.namedtuple("Pair", ["left", "right"])


class Library:
    """What a pipeline needs from a library: grainfn's facade or Grain's."""

    def __init__(self, name: str) -> None:
        if name == "grain":
            import grain

            self.g: Any = grain
            self.struct: Any = grain.experimental.ShapeDtypeStruct
            self.experimental: Any = grain.experimental
            self.zip: Any = grain.experimental.ZipMapDataset
            self.interleave: Any = grain.experimental.InterleaveIterDataset
            self.rebatch: Any = grain.experimental.RebatchIterDataset
        else:
            self.g, self.struct = grainfn, ShapeDtypeStruct
            self.experimental = grainfn.experimental
            self.zip = experimental.ZipMapDataset
            self.interleave = experimental.InterleaveIterDataset
            self.rebatch = experimental.RebatchIterDataset
        transforms, struct = self.g.transforms, self.struct

        class ToExample(transforms.Map):
            def map(self, x: Any) -> Any:
                return {"image": np.zeros((4, 4, 3), np.uint8), "label": x, "extra": None}

            def output_spec(self, spec: Any) -> Any:
                return {"image": struct((4, 4, 3), np.uint8), "label": spec, "extra": None}

        class Jitter(transforms.RandomMap):
            def random_map(self, x: Any, rng: np.random.Generator) -> Any:
                return x

            def output_spec(self, spec: Any) -> Any:
                return Pair(spec, [struct((2,), np.float32), struct((), np.bool_)])

        class Indexed(transforms.MapWithIndex):
            def map_with_index(self, i: int, x: Any) -> Any:
                return (i, x)

            def output_spec(self, spec: Any) -> Any:
                return (struct((), np.int64), spec)

        class NoSpec(transforms.Map):
            def map(self, x: Any) -> Any:
                return x

        class Split(self.experimental.FlatMapTransform):
            max_fan_out = 2

            def flat_map(self, x: Any) -> Any:
                return [x, x]

        self.ToExample, self.Jitter, self.Indexed, self.NoSpec = ToExample, Jitter, Indexed, NoSpec
        self.Split = Split


class BatchWithSpec:
    """A custom batch_fn that states the spec of its batches."""

    def __call__(self, values: Any) -> Any:
        return list(values)

    def output_spec(self, spec: Any, batch_size: int, drop_remainder: bool) -> Any:
        return {"rows": spec, "size": batch_size, "drop": drop_remainder}


PIPELINES: dict[str, Callable[[Library], Any]] = {
    "range": lambda lib: lib.g.MapDataset.range(10),
    "dict with arrays": lambda lib: lib.g.MapDataset.range(10).map(lib.ToExample()),
    "batched dict": lambda lib: lib.g.MapDataset.range(10).map(lib.ToExample()).batch(4),
    "batched dict, drop_remainder": lambda lib: (
        lib.g.MapDataset.range(10).map(lib.ToExample()).batch(4, drop_remainder=True)
    ),
    "namedtuple from random_map, index stages": lambda lib: (
        lib.g.MapDataset.range(10)
        .seed(3)
        .shuffle()
        .slice(slice(1, 8))
        .repeat(2)
        .random_map(lib.Jitter())
    ),
    "tuple from map_with_index, filtered iter batch": lambda lib: (
        lib.g.MapDataset.range(10)
        .map_with_index(lib.Indexed())
        .filter(lambda x: True)
        .to_iter_dataset()
        .filter(lambda x: True)
        .batch(3, drop_remainder=True)
    ),
    "batch of batches": lambda lib: (
        lib.g.MapDataset.range(10).batch(2, drop_remainder=True).batch(3)
    ),
    "mix, concatenate, select": lambda lib: lib.g.MapDataset.concatenate(
        [
            lib.g.MapDataset.mix([lib.g.MapDataset.range(4), lib.g.MapDataset.source([1])]),
            lib.g.MapDataset.select_from_datasets([lib.g.MapDataset.range(3)], [(0, 1)]),
        ]
    ),
    "iter mix, limit, repeat, prefetch": lambda lib: lib.experimental.RepeatIterDataset(
        lib.experimental.LimitIterDataset(
            lib.g.IterDataset.mix(
                [lib.g.MapDataset.range(5).map(lib.ToExample()).to_iter_dataset()]
            ),
            count=3,
        ),
        num_epochs=2,
    ).mp_prefetch(lib.g.MultiprocessingOptions(num_workers=0)),
    "window shuffle": lambda lib: lib.experimental.WindowShuffleMapDataset(
        lib.g.MapDataset.range(9), window_size=3, seed=1
    ),
    "custom batch_fn with output_spec": lambda lib: (
        lib.g.MapDataset.range(5).to_iter_dataset().batch(2, batch_fn=BatchWithSpec())
    ),
    "zip": lambda lib: lib.zip(
        [lib.g.MapDataset.range(4), lib.g.MapDataset.range(4).map_with_index(lib.Indexed())]
    ),
    "interleave": lambda lib: lib.interleave(
        [
            lib.g.MapDataset.range(3).to_iter_dataset(),
            lib.g.MapDataset.source([1]).to_iter_dataset(),
        ],
        cycle_length=2,
    ),
    "rebatch": lambda lib: lib.rebatch(
        lib.g.MapDataset.range(10).map(lib.ToExample()).to_iter_dataset().batch(2), batch_size=5
    ),
    "iter seed, map, random_map, map_with_index": lambda lib: (
        lib.g.MapDataset.range(10)
        .to_iter_dataset()
        .seed(3)
        .map(lib.ToExample())
        .random_map(lib.Jitter())
        .map_with_index(lib.Indexed())
    ),
    "iter zip, window shuffle, cache, thread prefetch, options": lambda lib: (
        lib.experimental.WithOptionsIterDataset(
            lib.experimental.ThreadPrefetchIterDataset(
                lib.experimental.CacheIterDataset(
                    lib.experimental.WindowShuffleIterDataset(
                        lib.experimental.ZipIterDataset(
                            [
                                lib.g.MapDataset.range(4).to_iter_dataset(),
                                lib.g.MapDataset.range(4).map(lib.ToExample()).to_iter_dataset(),
                            ]
                        ),
                        window_size=2,
                        seed=1,
                    )
                ),
                prefetch_buffer_size=2,
            ),
            lib.experimental.DatasetOptions(filter_raise_threshold_ratio=0.5),
        )
    ),
    "interleave of a dataset of datasets": lambda lib: lib.interleave(
        lib.g.MapDataset.range(2).map(lambda k: lib.g.MapDataset.range(3).to_iter_dataset()),
        cycle_length=2,
    ),
}


@functools.cache
def ray_pool() -> fn.RayPool:
    """One pool for the test's Ray stage (it starts Ray only when read, which it is not)."""
    return fn.RayPool(2)


WITHOUT_A_GRAIN_TWIN: dict[str, Callable[[Any], Any]] = {
    "TakenWhileStream": lambda data: fn.take_while(lambda x: x < 5, fn.from_dataset(data)),
    "GrainWorkerOrderStream": lambda data: fn.grain_worker_order(2, data),
    "ElasticStream": lambda data: fn.elastic_batches(4, data, num_logical_shards=2),
    "PositionsDataset": lambda data: fn.slice([3, 1, 4], data),
    "InNamedThreads": lambda data: InNamedThreads(data, NamedThreads("spec", 1)),
    "RayPrefetchedStream": lambda data: fn.ray_prefetch(ray_pool(), data),
    "PutOnDeviceStream": lambda data: fn.put_on_device(None, fn.from_dataset(data)),
}
"""The stages whose spec no pipeline above compares with Grain's, each built over `data`."""

NOT_READ: dict[str, str] = {
    "RayPrefetchedStream": "reading it starts a Ray cluster",
    "PutOnDeviceStream": "its elements are jax arrays, of jax's dtypes",
}
"""The stages of WITHOUT_A_GRAIN_TWIN whose spec is checked against their parent's, unread."""

ELSEWHERE: dict[str, str] = {
    "ObjectDataset": "test_subclasses_state_their_own_spec_as_in_grain",
    "HostRows": "built inside elastic reads (elastic/rows.py), never asked for its spec",
    "CompiledStage": "to_jax's host twin, built by its compiler with jax",
}
"""The stages whose spec rule infers that no test here builds, each with where or why."""


def shape_and_dtype(value: Any) -> tuple[tuple[Any, ...], np.dtype]:
    """A spec's, or an element's, shape and dtype, so that the two compare."""
    leaf = value if isinstance(value, ShapeDtypeStruct) else np.asarray(value)
    return tuple(leaf.shape), np.dtype(leaf.dtype)


@pytest.mark.parametrize("name", sorted(WITHOUT_A_GRAIN_TWIN))
def test_a_stage_without_a_grain_twin_infers_the_spec_of_what_it_yields(name: str) -> None:
    data = fn.range(10)
    stage = WITHOUT_A_GRAIN_TWIN[name](data)
    assert type(stage).__qualname__ == name
    spec = element_spec(stage)
    if name in NOT_READ:
        assert spec == element_spec(data)
        return
    stream = fn.from_dataset(stage) if isinstance(stage, Dataset) else stage
    first = next(iter(fn.iterate(stream)))
    assert shape_and_dtype(spec) == shape_and_dtype(first)


def test_every_stage_whose_spec_rule_infers_is_checked() -> None:
    ours = Library("grainfn")
    reached = set().union(*(kinds_in(make(ours)) for make in PIPELINES.values()))
    inferring = {
        kind
        for level in ("dataset", "stream")
        for kind in leaf_kinds(level)
        if kind.spec_rule.infers
    }
    left = set(names(inferring - reached))
    missing = left - set(WITHOUT_A_GRAIN_TWIN) - set(ELSEWHERE)
    assert not missing, f"stages whose spec rule infers that nothing checks: {sorted(missing)}"
    assert set(WITHOUT_A_GRAIN_TWIN) | set(ELSEWHERE) <= left, "a stage is listed twice"


def canonical(spec: Any, struct: type) -> Any:
    """The spec with each ShapeDtypeStruct of `struct` as a ("leaf", shape, dtype, type) tuple.

    The dtype's type is kept: `np.int64` (the class, as Grain gives it) equals
    `np.dtype("int64")` but is not the same spec.
    """
    if isinstance(spec, struct):
        return ("leaf", spec.shape, spec.dtype, type(spec.dtype))
    if isinstance(spec, dict):
        return {key: canonical(value, struct) for key, value in spec.items()}
    if isinstance(spec, tuple) and hasattr(spec, "_fields"):
        return type(spec)(*(canonical(value, struct) for value in spec))
    if isinstance(spec, (list, tuple)):
        return type(spec)(canonical(value, struct) for value in spec)
    return spec


@pytest.mark.parametrize("name", sorted(PIPELINES))
def test_specs_equal_grains(name: str) -> None:
    ours_lib, grain_lib = Library("grainfn"), Library("grain")
    ours = get_element_spec(PIPELINES[name](ours_lib))
    theirs = grain_lib.experimental.get_element_spec(PIPELINES[name](grain_lib))
    # Dicts compare without their key order: Grain sorts the keys of a batched
    # spec (as it sorts those of a batch); grainfn keeps the order of its batches.
    assert canonical(ours, ShapeDtypeStruct) == canonical(theirs, grain_lib.struct)


ERRORS: dict[str, tuple[Callable[[Library], Any], type[Exception], str]] = {
    "source": (lambda lib: lib.g.MapDataset.source([1, 2]), NotImplementedError, "source"),
    "map over a source": (
        lambda lib: lib.g.MapDataset.source([1]).map(lib.ToExample()),
        NotImplementedError,
        "source",
    ),
    "lambda": (lambda lib: lib.g.MapDataset.range(3).map(lambda x: x), ValueError, "<lambda>"),
    "transform without output_spec": (
        lambda lib: lib.g.MapDataset.source([1]).to_iter_dataset().map(lib.NoSpec()),
        ValueError,
        "NoSpec",
    ),
    "custom batch_fn": (
        lambda lib: lib.g.MapDataset.range(4).batch(2, batch_fn=list),
        NotImplementedError,
        "custom batch_fn",
    ),
    "flat_map": (
        lambda lib: lib.experimental.FlatMapIterDataset(
            lib.g.MapDataset.range(3).to_iter_dataset(), lib.Split()
        ),
        NotImplementedError,
        "flat_map",
    ),
    "mix led by a source": (
        lambda lib: lib.g.MapDataset.mix([lib.g.MapDataset.source([1]), lib.g.MapDataset.range(3)]),
        NotImplementedError,
        "source",
    ),
}


@pytest.mark.parametrize("name", sorted(ERRORS))
def test_the_same_errors_as_grain(name: str) -> None:
    build, error, words = ERRORS[name]
    with pytest.raises(error):
        Library("grain").experimental.get_element_spec(build(Library("grain")))
    with pytest.raises(error, match=words):
        get_element_spec(build(Library("grainfn")))


def test_subclasses_state_their_own_spec_as_in_grain() -> None:
    import grain

    for lib, struct in ((grain, grain.experimental.ShapeDtypeStruct), (grainfn, ShapeDtypeStruct)):
        get = grain.experimental.get_element_spec if lib is grain else get_element_spec

        class Squares(lib.MapDataset):  # type: ignore[name-defined,misc]
            def __init__(self) -> None:
                super().__init__([])

            def __len__(self) -> int:
                return 3

            def __getitem__(self, index: int) -> int:
                return index * index

        class Stated(Squares):
            spec = struct((), np.int64)

            @property
            def _element_spec(self) -> Any:
                return self.spec

        with pytest.raises(NotImplementedError, match="Squares"):
            get(Squares())
        assert canonical(get(Stated().batch(2)), struct) == ("leaf", (None,), np.int64, type)

    class OwnIterator(grainfn.IterDataset):
        def __iter__(self) -> Any:
            return iter([1, 2])

    with pytest.raises(NotImplementedError, match="OwnIterator"):
        get_element_spec(OwnIterator())


def test_parquet_has_no_spec_as_in_grain(tmp_path: Path) -> None:
    import grain

    path = str(tmp_path / "x.parquet")
    pq.write_table(pa.table({"x": [1, 2]}), path)
    with pytest.raises(NotImplementedError):
        grain.experimental.get_element_spec(grain.experimental.ParquetIterDataset(path))
    with pytest.raises(NotImplementedError, match="parquet"):
        get_element_spec(ParquetIterDataset(path))


def test_batch_and_pad_gives_full_batches_where_grain_gives_up() -> None:
    import grain

    theirs_pad = functools.partial(grain.experimental.batch_and_pad, batch_size=4)
    with pytest.raises(NotImplementedError):
        grain.experimental.get_element_spec(
            grain.MapDataset.range(10).batch(4, batch_fn=theirs_pad)
        )
    pad = functools.partial(batch_and_pad, batch_size=4)
    spec = get_element_spec(grainfn.MapDataset.range(10).batch(4, batch_fn=pad))
    assert spec == ShapeDtypeStruct((4,), np.int64)
    assert all(b.shape == spec.shape for b in grainfn.MapDataset.range(10).batch(4, batch_fn=pad))


def test_core_values_and_spec_leaves() -> None:
    stream = fn.batch(5, fn.from_dataset(fn.shuffle(fn.range(12), seed=2)), drop_remainder=True)
    assert element_spec(stream) == get_element_spec(stream) == ShapeDtypeStruct((5,), np.int64)
    assert isinstance(ShapeDtypeStruct((1,), np.int8), ShapeDtypeStructProtocol)
    assert hash(ShapeDtypeStruct((1,), np.int8)) == hash(ShapeDtypeStruct((1,), np.int8))
    with pytest.raises(TypeError, match="takes a MapDataset, an IterDataset"):
        get_element_spec([1, 2])
    with pytest.raises(TypeError, match="element_spec takes a grainfn Dataset or Stream"):
        element_spec("range")


def test_an_iterator_is_named_as_what_get_element_spec_does_not_take() -> None:
    iterator = iter(grainfn.MapDataset.range(3).to_iter_dataset())
    with pytest.raises(TypeError, match=r"(?s)takes a MapDataset, .* of type DatasetIterator\.$"):
        get_element_spec(iterator)

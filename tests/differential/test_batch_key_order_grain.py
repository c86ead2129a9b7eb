"""The key order of batched dicts, against Grain 0.2.18, on random nested structures.

Grain stacks a batch with JAX's pytree functions, which give every dict of the
batch its keys in sorted order, at every level (an `OrderedDict` keeps its
order): `MapDataset.batch`, `IterDataset.batch` and a DataLoader's `Batch`, with
or without workers. An element that is not batched keeps its own order, and so
does a `batch_fn`'s batch (with 0 workers). grainfn's Grain API gives the same
order (`fn.batch(..., sort_keys=True)`); the core `fn.batch` keeps the
elements' insertion order unless asked. Each test compares the key lists at
every nesting level, and the values leaf by leaf.
"""

from __future__ import annotations

import collections
import dataclasses
import subprocess
import sys
from typing import Any

import jax
import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

import grainfn
from grainfn import fn

from support.trees import assert_same_tree, element, templates

pytestmark = pytest.mark.grain


def assert_same_batches(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert_same_tree(a, b, f"batch {k}")


def loader(module: Any, data: list[Any], operations: list[Any], workers: int) -> Any:
    sampler = module.samplers.IndexSampler(
        num_records=len(data),
        shard_options=module.sharding.NoSharding(),
        shuffle=False,
        num_epochs=1,
    )
    return module.DataLoader(
        data_source=data, sampler=sampler, operations=operations, worker_count=workers
    )


def read_both(kind: str, data: list[Any], size: int, drop: bool) -> tuple[list[Any], list[Any]]:
    """What grainfn's Grain API and Grain itself yield for one batch kind."""
    import grain

    def build(module: Any) -> Any:
        ds = module.MapDataset.source(data)
        if kind == "MapDataset.batch":
            return ds.batch(size, drop_remainder=drop)
        if kind == "IterDataset.batch":
            return ds.to_iter_dataset().batch(size, drop_remainder=drop)
        if kind == "MapDataset.map":  # not batched: the element's own order
            return ds.map(lambda x: x)
        operations = [module.transforms.Batch(size, drop_remainder=drop)]
        return loader(module, data, operations, workers=0)

    return list(build(grainfn)), list(build(grain))


KINDS = ["MapDataset.batch", "IterDataset.batch", "DataLoader Batch", "MapDataset.map"]


@settings(max_examples=60)
@given(
    templates(),
    st.integers(1, 6),
    st.integers(1, 3),
    st.booleans(),
    st.sampled_from(KINDS),
)
def test_batched_dicts_have_grains_key_order(
    template: dict[Any, Any], count: int, size: int, drop: bool, kind: str
) -> None:
    note(f"template = {template!r}")
    data = [element(template, i) for i in range(count)]
    ours, theirs = read_both(kind, data, size, drop)
    assert_same_batches(ours, theirs)


@pytest.mark.slow
@pytest.mark.usefixtures("absl_flags_parsed")
@settings(max_examples=2)
@given(templates(), st.integers(1, 3))
def test_a_dataloader_with_workers_batches_in_grains_key_order(
    template: dict[Any, Any], size: int
) -> None:
    import grain

    note(f"template = {template!r}")
    data = [element(template, i) for i in range(5)]
    ours = list(loader(grainfn, data, [grainfn.transforms.Batch(size)], workers=1))
    theirs = list(loader(grain, data, [grain.transforms.Batch(size)], workers=1))
    assert_same_batches(ours, theirs)


def test_an_ordered_dict_keeps_its_order_and_keys_that_do_not_compare_keep_theirs() -> None:
    import grain

    ordered = collections.OrderedDict([("b", 1), ("a", {"d": 2, "c": 3})])
    ours = grainfn.MapDataset.source([ordered] * 2).batch(2)[0]
    theirs = grain.MapDataset.source([ordered] * 2).batch(2)[0]
    assert list(ours) == list(theirs) == ["b", "a"]
    assert list(ours["a"]) == list(theirs["a"]) == ["c", "d"]
    # Grain refuses such a dict wherever it reads one; grainfn batches it in its own order.
    mixed = grainfn.MapDataset.source([{"b": 1, 2: 3}] * 2).batch(2)[0]
    assert list(mixed) == ["b", 2]


def test_a_batch_fns_batches_keep_their_order_as_in_grain() -> None:
    import grain

    def make(values: list[Any]) -> dict[str, Any]:
        return {"z": len(values), "a": values[0]}

    data = [{"b": i, "a": i} for i in range(4)]
    for build in (
        lambda m: list(m.MapDataset.source(data).batch(2, batch_fn=make)),
        lambda m: list(loader(m, data, [m.transforms.Batch(2, batch_fn=make)], workers=0)),
    ):
        ours, theirs = build(grainfn), build(grain)
        assert [list(b) for b in ours] == [list(b) for b in theirs] == [["z", "a"]] * 2


@jax.tree_util.register_dataclass
@dataclasses.dataclass
class Example:
    """An element as tunix's are: a dataclass JAX registers as a pytree node."""

    tokens: np.ndarray
    mask: dict[str, Any]
    label: int


@pytest.mark.parametrize("kind", ["MapDataset.batch", "IterDataset.batch", "DataLoader Batch"])
def test_a_batch_of_jax_pytree_nodes_is_one_node_of_arrays_as_in_grain(kind: str) -> None:
    data = [Example(np.arange(3) + i, {"b": np.ones(2) * i, "a": i}, i) for i in range(5)]
    ours, theirs = read_both(kind, data, 2, drop=False)
    assert len(ours) == len(theirs) == 3
    for a, b in zip(ours, theirs):
        assert type(a) is type(b) is Example
        assert list(a.mask) == list(b.mask) == ["a", "b"]
        for field in ("tokens", "label"):
            np.testing.assert_array_equal(getattr(a, field), getattr(b, field))
        for key in ("a", "b"):
            np.testing.assert_array_equal(a.mask[key], b.mask[key])


def test_batching_objects_does_not_import_jax() -> None:
    script = (
        "import sys, grainfn as grain\n"
        "class Point:\n"
        "    def __init__(self, x): self.x = x\n"
        "batches = list(grain.MapDataset.source([Point(i) for i in range(4)]).batch(2))\n"
        "assert batches[0].dtype == object and 'jax' not in sys.modules, sorted(sys.modules)\n"
    )
    result = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr[-2000:]


def test_grains_batch_and_pad_sorts_keys_as_grains_does() -> None:
    import functools

    import grain

    data = [{"tokens": np.arange(3) + i, "mask": {"z": i, "b": np.ones(2)}} for i in range(5)]

    def padded(module: Any) -> list[Any]:
        pad = functools.partial(module.experimental.batch_and_pad, batch_size=3)
        return list(module.MapDataset.source(data).batch(3, batch_fn=pad))

    ours, theirs = padded(grainfn), padded(grain)
    assert_same_batches(ours, theirs)  # the key lists at every level, and the values
    assert list(ours[1]) == ["mask", "tokens"] and list(ours[1]["mask"]) == ["b", "z"]


def test_the_legacy_batch_operation_sorts_keys_as_grains() -> None:
    import grain.python as grain_python

    import grainfn.python

    def batched(module: Any) -> list[Any]:
        records = [
            module.Record(module.RecordMetadata(i, record_key=i), {"b": i, "a": {"y": i, "x": i}})
            for i in range(3)
        ]
        return [r.data for r in module.BatchOperation(2)(iter(records))]

    assert_same_batches(batched(grainfn.python), batched(grain_python))


def test_the_core_batch_keeps_insertion_order_unless_asked() -> None:
    data = fn.source([{"b": i, "a": {"z": i, "y": i}} for i in range(4)])
    kept = fn.batch(2, data).get(0)
    assert list(kept) == ["b", "a"] and list(kept["a"]) == ["z", "y"]
    for batched in (fn.batch(2, data, sort_keys=True), fn.batch(2, fn.from_dataset(data))):
        first = next(fn.iterate(batched))
        sort = batched.sort_keys
        assert list(first) == (["a", "b"] if sort else ["b", "a"])


def test_the_element_spec_of_a_batch_has_the_batches_key_order() -> None:
    import grain

    def spec(module: Any, batch: Any) -> Any:
        struct = module.experimental.ShapeDtypeStruct

        class Record(module.transforms.Map):
            def map(self, x: int) -> dict[str, Any]:
                return {"b": x, "a": {"z": 1.0, "y": x}}

            def output_spec(self, input_spec: Any) -> dict[str, Any]:
                del input_spec
                inner = {"z": struct((), np.float64), "y": struct((), np.int64)}
                return {"b": struct((), np.int64), "a": inner}

        return module.experimental.get_element_spec(batch(module.MapDataset.range(4).map(Record())))

    for batch in (lambda ds: ds.batch(2), lambda ds: ds.to_iter_dataset().batch(2)):
        ours, theirs = spec(grainfn, batch), spec(grain, batch)
        assert list(ours) == list(theirs) == ["a", "b"]
        assert list(ours["a"]) == list(theirs["a"]) == ["y", "z"]

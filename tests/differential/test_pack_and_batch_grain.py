"""PackAndBatchOperation against Grain 0.2.18's, on records and in a DataLoader.

The same random examples go through both; the batch records must agree in
metadata index, tree structure (dict key order included), dtypes, shapes and
values. Grain's operation keeps its last batch between calls, so each call
gets a new one; Grain fails on an empty input, so inputs are never empty.
"""

from __future__ import annotations

import collections
from typing import Any

import grain
import grain.python as grain_python
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn
from grainfn.testing import assert_elements_equal

pytestmark = pytest.mark.grain

DTYPES = (np.int32, np.int64, np.float32, np.uint8)


def run(module: Any, length_struct: Any, datas: list[Any], batch_size: int, limit: Any) -> Any:
    python = grain_python if module is grain else grainfn.python
    records = [
        python.Record(python.RecordMetadata(index=i, record_key=100 + i), data)
        for i, data in enumerate(datas)
    ]
    op = module.experimental.PackAndBatchOperation(length_struct, batch_size, limit)
    return list(op(iter(records)))


def assert_same_trees(ours: Any, theirs: Any, where: str = "batch") -> None:
    """Equal leaf by leaf (dtype, shape, value), with the same container types and key order."""
    assert type(ours) is type(theirs), f"{where}: {type(ours)} != {type(theirs)}"
    if isinstance(ours, dict):
        assert list(ours) == list(theirs), f"{where}: keys {list(ours)} != {list(theirs)}"
        for key in ours:
            assert_same_trees(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(ours, (list, tuple)):
        assert len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same_trees(a, b, f"{where}[{i}]")
    else:
        assert_elements_equal(ours, theirs, where)


def assert_same_records(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs)
    for k, (a, b) in enumerate(zip(ours, theirs)):
        assert a.metadata.index == b.metadata.index
        assert a.metadata.record_key is None and b.metadata.record_key is None
        assert_same_trees(a.data, b.data, f"batch {k}")


@st.composite
def flat_examples(draw: st.DrawFn) -> tuple[dict[str, int], list[Any], int, Any]:
    names = draw(st.lists(st.sampled_from("abcde"), min_size=1, max_size=3, unique=True))
    length_struct = {name: draw(st.integers(1, 7)) for name in names}
    dtypes = {name: draw(st.sampled_from(DTYPES)) for name in names}
    inner = {name: draw(st.sampled_from([(), (2,)])) for name in names}
    count = draw(st.integers(1, 25))
    datas = []
    for _ in range(count):
        element = {}
        for name in names:
            size = draw(st.integers(0, length_struct[name]))
            element[name] = np.arange(1, 1 + size * int(np.prod(inner[name], dtype=int)))
            element[name] = element[name].reshape(size, *inner[name]).astype(dtypes[name])
        datas.append(element)
    batch_size = draw(st.integers(1, 4))
    limit = draw(st.sampled_from([None, 1, 2, 3]))
    return length_struct, datas, batch_size, limit


@settings(max_examples=150)
@given(flat_examples())
def test_the_same_batches_as_grain(example: tuple[dict[str, int], list[Any], int, Any]) -> None:
    length_struct, datas, batch_size, limit = example
    ours = run(grainfn, length_struct, datas, batch_size, limit)
    assert_same_records(ours, run(grain, length_struct, datas, batch_size, limit))


Pair = collections.namedtuple("Pair", ["tokens", "labels"])


def nested_case(kind: str, rng: np.random.Generator) -> tuple[Any, list[Any]]:
    def seq(n: int) -> np.ndarray:
        return rng.integers(1, 9, int(rng.integers(0, n + 1)))

    if kind == "one array":
        return 5, [rng.random((int(rng.integers(0, 6)), 3)) for _ in range(12)]
    if kind == "tuple with a dict":
        return (3, {"z": 4, "c": 2}), [(seq(3), {"z": seq(4), "c": seq(2)}) for _ in range(12)]
    if kind == "namedtuple":
        return Pair(4, 3), [Pair(seq(4), seq(3)) for _ in range(12)]
    return {"b": {"y": 3, "x": 2}, "a": [4]}, [
        {"a": [seq(4)], "b": {"x": seq(2), "y": seq(3)}} for _ in range(12)
    ]


@pytest.mark.parametrize("kind", ["one array", "tuple with a dict", "namedtuple", "nested dict"])
@pytest.mark.parametrize(("batch_size", "limit"), [(1, None), (2, 2), (3, None)])
def test_nested_structures_as_grain(kind: str, batch_size: int, limit: Any) -> None:
    length_struct, datas = nested_case(kind, np.random.default_rng(len(kind) + batch_size))
    ours = run(grainfn, length_struct, datas, batch_size, limit)
    assert_same_records(ours, run(grain, length_struct, datas, batch_size, limit))


def test_an_element_longer_than_its_row_is_an_error_in_both() -> None:
    datas = [{"x": np.arange(2)}, {"x": np.arange(5)}]
    for module in (grain, grainfn):
        with pytest.raises(ValueError, match="must be truncated"):
            run(module, {"x": 4}, datas, 2, None)


def loader(module: Any, datas: list[Any], worker_count: int) -> Any:
    shard = module.sharding.ShardOptions(0, 1)
    sampler = module.samplers.IndexSampler(
        len(datas), shuffle=True, seed=11, num_epochs=2, shard_options=shard
    )
    python = grain_python if module is grain else grainfn.python
    return module.DataLoader(
        data_source=datas,
        sampler=sampler,
        operations=[
            python.FilterOperation(lambda d: len(d["inputs"]) != 3),
            module.experimental.PackAndBatchOperation(
                {"inputs": 8, "targets": 6}, batch_size=3, max_sequences_per_bin=3
            ),
        ],
        worker_count=worker_count,
    )


def test_a_dataloader_packs_as_grains_without_workers_and_ours_with_any() -> None:
    rng = np.random.default_rng(4)
    datas = [
        {
            "inputs": rng.integers(1, 99, int(rng.integers(1, 9))).astype(np.int32),
            "targets": rng.integers(1, 99, int(rng.integers(1, 7))),
        }
        for _ in range(40)
    ]
    theirs = list(loader(grain, datas, 0))
    assert len(theirs) > 10
    for workers in (0, 2):
        ours = list(loader(grainfn, datas, workers))
        assert len(ours) == len(theirs)
        for k, (a, b) in enumerate(zip(ours, theirs)):
            assert_same_trees(a, b, f"batch {k} with {workers} workers")

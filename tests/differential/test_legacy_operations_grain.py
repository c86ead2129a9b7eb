"""Grain's legacy operations called on iterators of records, against Grain 0.2.18."""

from __future__ import annotations

from typing import Any

import grain.python as grain_python
import numpy as np
import pytest

import grainfn.python

pytestmark = pytest.mark.grain


def records(module: Any, count: int = 7) -> list[Any]:
    return [
        module.Record(
            module.RecordMetadata(
                index=i, record_key=count - i, rng=np.random.Generator(np.random.Philox(key=i))
            ),
            i,
        )
        for i in range(count)
    ]


def described(out: list[Any]) -> list[tuple[Any, ...]]:
    return [(r.metadata.index, r.metadata.record_key, np.asarray(r.data).tolist()) for r in out]


OPERATIONS = {
    "map": lambda m: m.MapOperation(map_function=lambda x: x * 3),
    "random map": lambda m: m.RandomMapOperation(
        random_map_function=lambda x, rng: x + int(rng.integers(1000))
    ),
    "filter": lambda m: m.FilterOperation(condition_function=lambda x: x % 3 != 1),
    "batch": lambda m: m.BatchOperation(batch_size=3),
    "batch, drop remainder": lambda m: m.BatchOperation(batch_size=3, drop_remainder=True),
    "batch_fn": lambda m: m.BatchOperation(batch_size=2, batch_fn=lambda xs: sum(xs)),
}


@pytest.mark.parametrize("operation", OPERATIONS)
def test_an_operation_makes_grains_records(operation: str) -> None:
    theirs = list(OPERATIONS[operation](grain_python)(iter(records(grain_python))))
    ours = list(OPERATIONS[operation](grainfn.python)(iter(records(grainfn.python))))
    assert described(ours) == described(theirs)


def test_errors_are_value_errors_naming_the_function_and_bad_sizes_are_refused() -> None:
    def broken(x: int) -> int:
        raise KeyError(x)

    for module in (grain_python, grainfn.python):
        with pytest.raises(ValueError):
            list(module.MapOperation(map_function=broken)(iter(records(module))))
        with pytest.raises(ValueError):
            module.BatchOperation(batch_size=0)
    with pytest.raises(ValueError, match=r"map_function .*broken raised KeyError: 0 \(the record"):
        list(grainfn.python.MapOperation(map_function=broken)(iter(records(grainfn.python))))


MISMATCHED = {
    "dict keys": [{"a": 1}, {"b": 2}],
    "list lengths": [[1, 2], [3, 4, 5]],
    "nested dict keys": [{"a": {"x": 1}}, {"a": {"y": 1}}],
    "leaf, then dict": [1, {"a": 1}],
    "dict, then leaf": [{"a": 1}, 1],
    "tuple, then list": [(1, 2), [1, 2]],
    "None, then leaf": [None, 1],
    "two of three differ": [{"a": 1}, {"b": 2}, {"c": 3}],
    "leaf, then list deeper": [{"a": [1, 2]}, {"a": [1, [2]]}],
}
SAME_STRUCTURE = {
    "leaf shapes": [np.zeros(2), np.zeros(3)],  # a ValueError in both: same structure
    "nested leaf shapes": [{"a": np.zeros(2)}, {"a": np.zeros((2, 1))}],
}


def batched(module: Any, data: list[Any]) -> list[Any]:
    batch = module.BatchOperation(batch_size=len(data))
    out = batch(
        iter(module.Record(module.RecordMetadata(i, record_key=i), d) for i, d in enumerate(data))
    )
    return list(out)


def loaded(module: Any, data: list[Any], worker_count: int = 0) -> list[Any]:
    loader = module.DataLoader(
        data_source=data,
        sampler=module.SequentialSampler(len(data), module.NoSharding()),
        operations=[module.BatchOperation(batch_size=len(data))],
        worker_count=worker_count,
    )
    return list(loader)


@pytest.mark.parametrize("case", [*MISMATCHED, *SAME_STRUCTURE])
def test_batch_operation_raises_grains_exception_type(case: str) -> None:
    data = {**MISMATCHED, **SAME_STRUCTURE}[case]
    expected = TypeError if case in MISMATCHED else ValueError
    with pytest.raises(expected):
        batched(grain_python, data)
    with pytest.raises(expected) as error:
        batched(grainfn.python, data)
    assert type(error.value) is expected
    with pytest.raises(expected):
        loaded(grain_python, data)
    with pytest.raises(expected):
        loaded(grainfn.python, data)
    if case in MISMATCHED:  # ours names where the structures differ
        assert "Cannot batch elements of different structure at" in str(error.value)


def test_batch_operation_mismatch_is_a_type_error_with_workers_too() -> None:
    with pytest.raises(TypeError, match="element 0 is a dict with keys \\['a'\\]"):
        loaded(grainfn.python, MISMATCHED["dict keys"], worker_count=1)


def test_batch_transformation_and_dataset_batch_keep_value_errors_like_grain() -> None:
    import grain

    data = MISMATCHED["dict keys"]
    for module in (grain, grainfn):
        with pytest.raises(ValueError):
            module.MapDataset.source(data).batch(2)[0]
        # A leaf beside a subtree is stacked into an object array by a dataset's batch.
        assert module.MapDataset.source([1, {"a": 1}]).batch(2)[0].dtype == object
    for python_module in (grain_python, grainfn.python):
        loader = python_module.DataLoader(
            data_source=data,
            sampler=python_module.SequentialSampler(len(data), python_module.NoSharding()),
            operations=[python_module.Batch(batch_size=len(data))],
            worker_count=0,
        )
        with pytest.raises(ValueError):
            list(loader)

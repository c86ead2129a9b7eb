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

"""Program keys: a pipeline built again keys equal where its program is the same, else apart."""

from __future__ import annotations

from typing import Any

import numpy as np

from grainfn import fn
from grainfn._src.device.program_key import function_key, pipeline_key


def build(scale: float, images: np.ndarray) -> Any:
    """A build function, as a training script writes one: fresh lambdas every call."""

    def normalize(x: Any) -> Any:
        return x * scale - 0.5

    return fn.batch(4, fn.map(lambda x: normalize(x) + 1.0, fn.shuffle(fn.source(images), seed=3)))


def test_a_pipeline_built_again_keys_equal_though_its_lambdas_and_arrays_are_new() -> None:
    first = build(1 / 255, np.zeros((16, 3), np.float32))
    again = build(1 / 255, np.ones((16, 3), np.float32))  # other values: arguments, not program
    assert pipeline_key(first) == pipeline_key(again)
    assert hash(pipeline_key(first)) == hash(pipeline_key(again))


def test_what_changes_the_program_changes_the_key() -> None:
    base = pipeline_key(build(1 / 255, np.zeros((16, 3), np.float32)))
    assert pipeline_key(build(1 / 128, np.zeros((16, 3), np.float32))) != base  # a constant
    assert pipeline_key(build(1 / 255, np.zeros((16, 4), np.float32))) != base  # a shape
    assert pipeline_key(build(1 / 255, np.zeros((16, 3), np.float64))) != base  # a dtype
    seeded = fn.batch(4, fn.shuffle(fn.source(np.zeros((16, 3), np.float32)), seed=4))
    assert pipeline_key(seeded) != base


def test_constants_are_compared_with_their_types() -> None:
    def scaled(k: Any) -> Any:
        return lambda x: x * k

    keys = [function_key(scaled(k)) for k in (1, 1.0, True, "1", None, (1, 2))]
    assert len(set(keys)) == len(keys)
    assert function_key(scaled((1, 2))) == function_key(scaled((1, 2)))


def test_a_function_closing_over_anything_but_constants_keeps_its_identity() -> None:
    def over(value: Any) -> Any:
        return lambda x: x + value

    table = np.arange(3)
    for value in (table, [1, 2], {"a": 1}, object()):
        assert function_key(over(value)) != function_key(over(value))
        assert function_key(over(value))[0] == "object"
    same = over(table)
    assert function_key(same) == function_key(same)  # the same object: the same key


def test_helpers_a_function_calls_count_by_what_they_compute_three_deep() -> None:
    def chain(depth: int, k: int) -> Any:
        def base(x: Any) -> Any:
            return x + k

        function = base
        for _ in range(depth):
            function = (lambda inner: lambda x: inner(x) * 2)(function)
        return function

    assert function_key(chain(3, 1)) == function_key(chain(3, 1))
    assert function_key(chain(3, 1)) != function_key(chain(3, 2))
    assert function_key(chain(4, 1))[0] == "object"  # deeper: by identity


def test_a_closure_cell_not_filled_yet_keys_by_identity() -> None:
    def later() -> Any:
        def use(x: Any) -> Any:
            return x + value

        key = function_key(use)  # `value` is not set yet
        value = 1
        return key, use(0)

    key, computed = later()
    assert key[0] == "object" and computed == 1

"""batch_and_pad against Grain 0.2.18's: structures, dtypes, pad values, pipelines, errors."""

from __future__ import annotations

import collections
import functools
from typing import Any

import numpy as np
import pytest

import grainfn
from grainfn import fn
from grainfn.experimental import batch_and_pad

Point = collections.namedtuple("Point", ["x", "y"])


def assert_same(ours: Any, theirs: Any, where: str = "batch") -> None:
    """The same structure, and leaves of the same type, dtype, shape and values."""
    if isinstance(theirs, dict):
        assert isinstance(ours, dict) and sorted(ours) == sorted(theirs), where
        for key in theirs:
            assert_same(ours[key], theirs[key], f"{where}[{key!r}]")
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs) and len(ours) == len(theirs), where
        for i, (a, b) in enumerate(zip(ours, theirs)):
            assert_same(a, b, f"{where}[{i}]")
    elif theirs is None:
        assert ours is None, where
    else:
        assert type(ours) is type(theirs), f"{where}: {type(ours)} vs {type(theirs)}"
        assert (ours.dtype, ours.shape) == (theirs.dtype, theirs.shape), where
        np.testing.assert_array_equal(ours, theirs, err_msg=where)


def grain_batch_and_pad(values: list[Any], **kwargs: Any) -> Any:
    import grain

    return grain.experimental.batch_and_pad(values, **kwargs)


CASES = {
    "python ints": [1, 2, 3],
    "mixed python and numpy scalars": [np.int8(1), 2, np.int16(3)],
    "ints then a float": [1, 2.5],
    "float32 and python float": [np.float32(1.5), 2.0],
    "bools": [True, False],
    "strings of different lengths": ["a", "bbb"],
    "bytes": [b"xy", b"z"],
    "arrays": [np.arange(6, dtype=np.uint8).reshape(2, 3), np.ones((2, 3), np.uint8)],
    "nested dicts, tuples, lists and None": [
        {"image": np.full((2, 2), i, np.float32), "meta": (i, [f"id{i}", i * 0.5]), "none": None}
        for i in range(3)
    ],
    "namedtuples": [Point(np.arange(2), np.float64(i)) for i in range(2)],
}


@pytest.mark.grain
@pytest.mark.parametrize("name", sorted(CASES))
@pytest.mark.parametrize("pad_value", [0, -1, 7.5, "zzzz"])
def test_equals_grain_for_short_and_full_batches(name: str, pad_value: Any) -> None:
    values = CASES[name]
    for batch_size in (len(values), len(values) + 1, len(values) + 3):
        kwargs = {"batch_size": batch_size, "pad_value": pad_value}
        try:
            theirs = grain_batch_and_pad(values, **kwargs)
        except (OverflowError, TypeError, ValueError):  # numpy refuses the pad value
            with pytest.raises(ValueError, match=f"pad_value={pad_value!r} does not fit"):
                batch_and_pad(values, **kwargs)
            continue
        assert_same(batch_and_pad(values, **kwargs), theirs, f"{name}, {kwargs}")


@pytest.mark.grain
def test_as_the_batch_fn_of_a_pipeline_equals_grain() -> None:
    import grain

    def to_example(x: int) -> dict[str, Any]:
        return {"x": x, "vector": np.full(3, x, np.int32)}

    pad = functools.partial(batch_and_pad, batch_size=4, pad_value=-1)
    theirs_pad = functools.partial(grain.experimental.batch_and_pad, batch_size=4, pad_value=-1)
    ours = grainfn.MapDataset.range(10).map(to_example)
    theirs = grain.MapDataset.range(10).map(to_example)
    pairs = [
        (ours.batch(4, batch_fn=pad), theirs.batch(4, batch_fn=theirs_pad)),
        (
            ours.to_iter_dataset().filter(lambda e: e["x"] % 3).batch(4, batch_fn=pad),
            theirs.to_iter_dataset().filter(lambda e: e["x"] % 3).batch(4, batch_fn=theirs_pad),
        ),
    ]
    for (ours_ds, theirs_ds), count in zip(pairs, (3, 2)):
        ours_batches, theirs_batches = list(ours_ds), list(theirs_ds)
        assert len(ours_batches) == len(theirs_batches) == count
        for a, b in zip(ours_batches, theirs_batches):
            assert_same(a, b)
            assert a["x"].shape == (4,)


def test_a_core_stream_batch_pads_its_last_batch() -> None:
    stream = fn.batch(
        3, fn.from_dataset(fn.range(5)), batch_fn=functools.partial(batch_and_pad, batch_size=3)
    )
    assert [b.tolist() for b in fn.iterate(stream)] == [[0, 1, 2], [3, 4, 0]]


def test_errors_name_the_count_and_the_batch_size() -> None:
    with pytest.raises(ValueError, match="got 3 values for a batch of batch_size=2"):
        batch_and_pad([1, 2, 3], batch_size=2)
    with pytest.raises(ValueError, match="at least one value"):
        batch_and_pad([], batch_size=2)
    with pytest.raises(ValueError, match="batch_size must be a positive integer, got 0"):
        batch_and_pad([1], batch_size=0)
    with pytest.raises(TypeError, match="batch_size must be a positive integer"):
        batch_and_pad([1], batch_size=2.0)  # type: ignore[arg-type]
    with pytest.raises(ValueError, match=r"element 0 has shape \(2,\) but element 1 has shape"):
        batch_and_pad([np.zeros(2), np.zeros(3)], batch_size=4)
    with pytest.raises(ValueError, match="different structure"):
        batch_and_pad([{"a": 1}, {"b": 1}], batch_size=4)

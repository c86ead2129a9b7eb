"""batch: stacking, epochs, key order (sort_keys), stream states, and batch_and_pad.

batch_and_pad is checked against Grain 0.2.18's: structures, dtypes, pad values,
pipelines, errors. With `sort_keys` (which the Grain API sets) batched dicts come
out in the order JAX's pytree functions give them, checked against
`jax.tree_util` itself; without it, a batch keeps the insertion order of its
first element.
"""

from __future__ import annotations

import collections
import functools
from typing import Any

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

import grainfn
from grainfn import fn
from grainfn._src.core import pytree
from grainfn._src.stages.batch import sorted_keys
from grainfn.experimental import batch_and_pad
from grainfn.testing import assert_elements_equal

from support import conformance
from support.reading import read

# Stacking and epochs.


def test_batch_stacks_pytrees_and_batches_each_epoch_separately() -> None:
    point = collections.namedtuple("point", "x y")
    ds = fn.source([{"a": point(i, float(i)), "b": np.full(2, i)} for i in range(5)])
    batches = fn.batch(2, ds)
    assert batches.length == 3
    last = batches.get(2)
    assert isinstance(last["a"], point)
    np.testing.assert_array_equal(last["a"].x, [4])
    np.testing.assert_array_equal(batches.get(3)["b"], [[0, 0], [1, 1]])
    assert fn.batch(2, ds, drop_remainder=True).length == 2
    summed = fn.batch(2, fn.range(5), batch_fn=sum)
    assert read(summed) == [1, 5, 4]


def test_batch_names_the_leaf_whose_shapes_differ() -> None:
    ds = fn.batch(2, fn.source([{"image": np.zeros((2, 2))}, {"image": np.zeros((3, 2))}]))
    with pytest.raises(ValueError, match=r"leaf \['image'\].*\(2, 2\).*\(3, 2\)"):
        ds.get(0)
    ds = fn.batch(2, fn.source([{"a": 1}, {"b": 1}]))
    with pytest.raises(ValueError, match=r"different structure.*keys \['a'\].*keys \['b'\]"):
        ds.get(0)


def layout(element: Any) -> Any:
    """An element's structure with key order, container types, and each array's
    type, dtype, shape, contiguity and writability: what values alone do not show."""
    if isinstance(element, dict):
        return [type(element), [(key, layout(value)) for key, value in element.items()]]
    if isinstance(element, (list, tuple)):
        return [type(element), [layout(value) for value in element]]
    flags = (element.flags.c_contiguous, element.flags.writeable)
    return (type(element), element.dtype, element.shape, flags)


ROW_DTYPES = st.sampled_from(["uint8", "int32", "int64", "float32", "float64", "bool", "complex64"])


@st.composite
def array_trees(draw: st.DrawFn) -> dict[str, Any]:
    """A dict of numpy arrays of numbers (nesting dicts, lists and tuples), 1 to 9 records."""
    records = draw(st.integers(1, 9))

    def array() -> np.ndarray:
        shape = (records, *draw(st.lists(st.integers(0, 3), max_size=2)))
        values = np.arange(int(np.prod(shape))).reshape(shape) % 7
        return values.astype(draw(ROW_DTYPES))

    nested = st.sampled_from(["array", "list", "tuple", "dict"])
    out: dict[str, Any] = {}
    for key in draw(st.lists(st.sampled_from("zyxab"), min_size=1, max_size=3, unique=True)):
        kind = draw(nested)
        if kind == "array":
            out[key] = array()
        elif kind == "dict":
            out[key] = {inner: array() for inner in ("q", "p")}
        else:
            out[key] = (list if kind == "list" else tuple)([array(), array()])
    return out


@given(array_trees(), st.integers(1, 4), st.booleans(), st.booleans(), st.integers(0, 3))
def test_a_dict_of_arrays_is_batched_by_one_gather_per_array(
    arrays: dict[str, Any], size: int, drop: bool, sort_keys: bool, seed: int
) -> None:
    # The records, stacked one batch at a time, are what the gathers must give.
    shuffled = fn.shuffle(fn.repeat(2, fn.source(arrays)), seed=seed)
    batches = fn.batch(size, shuffled, drop_remainder=drop, sort_keys=sort_keys)
    records = [shuffled.get(i) for i in range(shuffled.length)]
    runs = [records[i : i + size] for i in range(0, len(records), size)]
    expected = [pytree.stack(run) for run in runs if len(run) == size or not drop]
    if sort_keys:
        expected = [sorted_keys(batch, batch) for batch in expected]
    got = batches.get_many(list(range(batches.length)))
    assert len(got) == len(expected) == batches.length
    for k, (ours, theirs) in enumerate(zip(got, expected, strict=True)):
        assert_elements_equal(ours, theirs, f"batch {k}")
        assert layout(ours) == layout(theirs)
    # One block's gathers start at a multiple of 64 bytes: XLA's CPU client takes them as they are.
    for leaf in pytree.leaves(got[0]) if got else []:
        assert leaf.size == 0 or leaf.ctypes.data % 64 == 0


def test_a_dict_with_other_arrays_is_batched_record_by_record() -> None:
    # Strings and objects are not gathered: their batches are what stacking the records gives.
    for arrays in (
        {"word": np.array(["a", "bb", "ccc"]), "n": np.arange(3)},
        {"o": np.array([1, 2, 3], dtype=object), "n": np.arange(3)},
    ):
        ds = fn.source(arrays)
        expected = pytree.stack([ds.get(i) for i in range(3)])
        assert_elements_equal(fn.batch(3, ds).get(0), expected)
        assert layout(fn.batch(3, ds).get(0)) == layout(expected)


def test_last_batch_of_an_infinite_dataset_is_short_not_wrapped() -> None:
    batches = fn.batch(2, fn.repeat(None, fn.range(1)))
    assert batches.length == 2**62
    np.testing.assert_array_equal(batches.get(2**62 - 1), [0])
    np.testing.assert_array_equal(batches.get_many([2**62 - 2, 2**62 - 1])[1], [0])


def test_drop_remainder_drops_each_epochs_short_batch_of_a_dataset() -> None:
    ds = fn.batch(2, fn.range(5), drop_remainder=True)
    assert [b.tolist() for b in read(ds, 4)] == [[0, 1], [2, 3], [0, 1], [2, 3]]


# Streams.


def test_a_stream_batch_has_a_short_last_batch_unless_drop_remainder() -> None:
    stream = fn.from_dataset(fn.range(5))
    assert [b.tolist() for b in fn.iterate(fn.batch(2, stream))] == [[0, 1], [2, 3], [4]]
    dropped = fn.batch(2, stream, drop_remainder=True)
    assert [b.tolist() for b in fn.iterate(dropped)] == [[0, 1], [2, 3]]


def test_a_stream_batch_keeps_its_parents_state_and_resumes_from_a_dict() -> None:
    stream = fn.batch(2, fn.from_dataset(fn.range(5)))
    it = fn.iterate(stream)
    next(it)
    assert it.state == fn.DatasetPosition(2)
    restored = fn.state_from_dict(stream, fn.state_to_dict(stream, it.state))
    assert restored == it.state
    assert [b.tolist() for b in fn.iterate(stream, restored)] == [[2, 3], [4]]


def broken(values: list[int]) -> int:
    raise ZeroDivisionError("no batch")


def test_a_batch_fn_error_keeps_its_type_and_names_the_batch() -> None:
    stream = fn.batch(2, fn.from_dataset(fn.range(5)), batch_fn=broken)
    with pytest.raises(ZeroDivisionError, match="no batch") as raised:
        next(fn.iterate(stream))
    assert raised.value.__notes__ == [
        "Raised by the function of batch(2, batch_fn=broken), reading the batch of 2 elements "
        "that ends at state DatasetPosition(position=2)."
    ]


# Key order: sort_keys and sorted_keys.

KEYS = st.sampled_from(["a", "b", "B", "_", "10", "9", "ab", "z"])

trees = st.recursive(
    st.integers(0, 9),
    lambda children: st.one_of(
        st.dictionaries(KEYS, children, max_size=4),
        st.dictionaries(st.integers(-2, 5), children, max_size=3),
        st.lists(children, min_size=1, max_size=3),
        st.lists(children, min_size=1, max_size=3).map(tuple),
        st.dictionaries(KEYS, children, max_size=3).map(collections.OrderedDict),
    ),
    max_leaves=10,
)


def key_orders(tree: Any) -> Any:
    if isinstance(tree, dict):
        return [(key, key_orders(value)) for key, value in tree.items()]
    if isinstance(tree, (list, tuple)):
        return [key_orders(value) for value in tree]
    return None


@given(trees)
def test_sorted_keys_gives_jaxs_key_order(tree: Any) -> None:
    import jax

    elements = [tree, tree]
    ours = sorted_keys(pytree.stack(elements), tree)
    theirs = jax.tree_util.tree_map(lambda *leaves: np.stack(leaves), *elements)
    assert key_orders(ours) == key_orders(theirs)
    assert [leaf.tolist() for leaf in pytree.leaves(ours)] == [
        leaf.tolist() for leaf in jax.tree_util.tree_leaves(theirs)
    ]


DATA = [{"b": i, "a": {"z": i, "y": [i, {"d": i, "c": i}]}} for i in range(5)]


@pytest.mark.parametrize("as_stream", [False, True])
def test_the_batch_keeps_insertion_order_unless_asked(as_stream: bool) -> None:
    data = fn.from_dataset(fn.source(DATA)) if as_stream else fn.source(DATA)
    kept = next(fn.iterate(fn.batch(2, data)))
    assert list(kept) == ["b", "a"] and list(kept["a"]) == ["z", "y"]
    assert list(kept["a"]["y"][1]) == ["d", "c"]
    batched = fn.batch(2, data, sort_keys=True)
    for batch in list(fn.iterate(batched)):
        assert list(batch) == ["a", "b"] and list(batch["a"]) == ["y", "z"]
        assert list(batch["a"]["y"][1]) == ["c", "d"]
    expected = [pytree.stack(DATA[i : i + 2]) for i in range(0, 5, 2)]
    for k, (ours, theirs) in enumerate(zip(fn.iterate(batched), expected, strict=True)):
        assert_elements_equal(ours, theirs, f"batch {k}")


def test_map_level_reads_in_blocks_sort_every_batch() -> None:
    ds = fn.batch(2, fn.source(DATA), sort_keys=True)
    for batch in ds.get_many([0, 2, 1, 3, 0]):
        assert list(batch) == ["a", "b"] and list(batch["a"]) == ["y", "z"]
    numbers = fn.batch(2, fn.range(5), sort_keys=True)
    assert [b.tolist() for b in numbers.get_many([0, 1, 2])] == [[0, 1], [2, 3], [4]]


def test_the_option_is_in_the_description_only_when_set() -> None:
    stream = fn.from_dataset(fn.range(4))
    plain = fn.batch(2, stream, drop_remainder=True)
    assert plain.describe_stage() == "batch(2, drop_remainder=True)"
    saved = fn.state_to_dict(plain, plain.init())
    assert saved["pipeline"] == [
        "batch(2, drop_remainder=True)",
        "  from_dataset()",
        "    range(0, 4, 1)  [length 4]",
    ]
    sorting = fn.batch(2, stream, drop_remainder=True, sort_keys=True)
    assert sorting.describe_stage() == "batch(2, drop_remainder=True, sort_keys=True)"
    assert sorting != plain
    with pytest.raises(ValueError, match="State belongs to another pipeline"):
        fn.state_from_dict(sorting, saved)


def test_sort_keys_with_a_batch_fn_is_refused_naming_both() -> None:
    with pytest.raises(ValueError, match=r"sort_keys=True and batch_fn=list.*Drop sort_keys"):
        fn.batch(2, fn.range(4), batch_fn=list, sort_keys=True)


def test_an_ordered_dict_keeps_its_order_and_keys_that_do_not_compare_keep_theirs() -> None:
    ordered = collections.OrderedDict([("b", 1), ("a", {"d": 2, "c": 3})])
    batch = fn.batch(2, fn.source([ordered] * 2), sort_keys=True).get(0)
    assert list(batch) == ["b", "a"] and list(batch["a"]) == ["c", "d"]
    mixed = fn.batch(2, fn.source([{"b": 1, 2: 3, "a": 4}] * 2), sort_keys=True).get(0)
    assert list(mixed) == ["b", 2, "a"]


# batch_and_pad.

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


test_conforms = conformance.conforms(
    conformance.Example("batch(3)", lambda: fn.batch(3, fn.range(8))),
    conformance.Example("batch(2, batch_fn=sum)", lambda: fn.batch(2, fn.range(5), batch_fn=sum)),
    conformance.Example(
        "batch(3, drop_remainder=True)",
        lambda: fn.batch(3, conformance.numbers(8), drop_remainder=True),
    ),
)

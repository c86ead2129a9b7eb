"""put_on_device: the stream's elements on a device, the next `ahead` already on their way.

The elements and the states are the stream's own, for every `ahead`; what the
parent raises while being read ahead comes out at its place, after the
elements before it. Real jax on the CPU device, no mocks.
"""

from __future__ import annotations

import threading
from typing import Any

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn import fn, testing
from grainfn._src.device.put import Putter

DEVICE = jax.devices()[0]
AHEADS = [0, 1, 2, 5, 100]  # 100: more than any stream here holds


def host(element: Any) -> Any:
    """An element's values as Python lists and numbers, wherever its arrays live."""
    return jax.tree_util.tree_map(lambda x: np.asarray(x).tolist(), element)


def on_device(element: Any) -> Any:
    """A host element as `put_on_device` gives it: through `jax.device_put`."""
    return host(jax.device_put(element, DEVICE))


def assert_on_device(element: Any) -> None:
    for leaf in jax.tree_util.tree_leaves(element):
        assert isinstance(leaf, jax.Array) and leaf.devices() == {DEVICE}


def pipeline() -> fn.Stream:
    """Batches of 3 of a shuffle of 20, dict elements, and a filter last: its end state
    differs from the state after its last element."""
    ds = fn.map(lambda x: {"x": np.full(2, x), "y": x % 7}, fn.shuffle(fn.range(20), seed=4))
    stream = fn.filter(lambda e: e["y"] != 1, fn.from_dataset(ds))
    return fn.filter(lambda b: int(b["x"][0, 0]) % 5 != 0, fn.batch(3, stream))


def assert_same_run(stream: fn.Stream, put: fn.Stream, state: Any = None) -> int:
    """`put` from `state` gives `stream`'s elements (on the device) and states, and ends
    where it does. Returns how many elements there were."""
    plain, ahead = fn.iterate(stream, state), fn.iterate(put, state)
    count = 0
    for expected in plain:
        element = next(ahead)
        assert_on_device(element)
        assert host(element) == on_device(expected)
        assert ahead.state == plain.state
        count += 1
    for _ in range(2):  # the end stays the end
        with pytest.raises(StopIteration):
            next(ahead)
    assert ahead.state == plain.state
    ahead.close()
    return count


@pytest.mark.parametrize("ahead", AHEADS)
def test_the_elements_and_states_are_the_streams_own(ahead: int) -> None:
    stream = pipeline()
    assert assert_same_run(stream, fn.put_on_device(DEVICE, stream, ahead=ahead)) > 2


@settings(max_examples=20, deadline=None)
@given(testing.streams(), st.integers(0, 4))
def test_any_stream_gives_the_same_elements_and_states(stream: Any, ahead: int) -> None:
    put = fn.put_on_device(DEVICE, stream, ahead=ahead)
    plain, ahead_it = fn.iterate(stream), fn.iterate(put)
    for expected in plain:
        assert host(next(ahead_it)) == on_device(expected)
        assert ahead_it.state == plain.state
    with pytest.raises(StopIteration):
        next(ahead_it)
    assert ahead_it.state == plain.state
    assert fn.state_to_dict(put, ahead_it.state) == fn.state_to_dict(stream, plain.state)
    ahead_it.close()


@pytest.mark.parametrize("ahead", AHEADS)
@pytest.mark.parametrize("taken", [0, 1, 3, 4])
def test_a_state_restores_with_and_without_the_stage(ahead: int, taken: int) -> None:
    stream = pipeline()
    put = fn.put_on_device(DEVICE, stream, ahead=ahead)
    expected = [host(e) for e in fn.iterate(stream)]

    with_stage = fn.iterate(put)
    first = [host(next(with_stage)) for _ in range(taken)]
    saved = with_stage.state
    with_stage.close()  # the elements put ahead are dropped, and read again on restore
    assert fn.state_to_dict(put, saved) == fn.state_to_dict(stream, saved)
    assert first + [host(e) for e in fn.iterate(stream, saved)] == expected
    assert first + [host(e) for e in fn.iterate(put, saved)] == expected

    without = fn.iterate(stream)
    first = [host(next(without)) for _ in range(taken)]
    assert first + [host(e) for e in fn.iterate(put, without.state)] == expected
    assert_same_run(stream, put, without.state)


def test_elements_are_read_ahead_in_the_consumers_thread() -> None:
    reads: list[int] = []

    def read(x: int) -> int:
        reads.append(x)
        return x

    stream = fn.map(read, fn.from_dataset(fn.range(10)))
    it = fn.iterate(fn.put_on_device(DEVICE, stream, ahead=3))
    assert int(next(it)) == 0 and reads == [0, 1, 2, 3]  # 1, 2 and 3 are on their way
    assert it.state == fn.DatasetPosition(1)
    assert int(next(it)) == 1 and reads == [0, 1, 2, 3, 4]
    it.close()
    reads.clear()
    it = fn.iterate(fn.put_on_device(DEVICE, stream, ahead=0))
    assert int(next(it)) == 0 and reads == [0]


class FailsAt:
    """`x`, except at `at`, where it raises (only the first `times` times)."""

    def __init__(self, at: int, times: int = 10**9) -> None:
        self.at, self.times, self.calls = at, times, 0

    def __call__(self, x: int) -> int:
        if x == self.at and self.times > 0:
            self.times -= 1
            self.calls += 1
            raise OSError(f"cannot read {x}")
        return x


@pytest.mark.parametrize("ahead", AHEADS)
def test_an_error_comes_after_the_elements_before_it_at_its_place(ahead: int) -> None:
    fails = FailsAt(7)
    stream = fn.map(fails, fn.from_dataset(fn.range(12)))
    it = fn.iterate(fn.put_on_device(DEVICE, stream, ahead=ahead))
    assert [int(next(it)) for _ in range(7)] == list(range(7))  # read ahead, not yet raised
    assert fails.calls == (1 if ahead else 0)  # met while reading ahead, and kept
    assert it.state == fn.DatasetPosition(7)
    for _ in range(2):  # a deterministic error: again, at the same place
        with pytest.raises(OSError, match="cannot read 7"):
            next(it)
        assert it.state == fn.DatasetPosition(7)
    it.close()


@pytest.mark.parametrize("ahead", AHEADS)
def test_after_a_transient_error_reading_goes_on_with_nothing_lost(ahead: int) -> None:
    stream = fn.map(FailsAt(5, times=1), fn.from_dataset(fn.range(12)))
    it = fn.iterate(fn.put_on_device(DEVICE, stream, ahead=ahead))
    seen = [int(next(it)) for _ in range(5)]
    with pytest.raises(OSError, match="cannot read 5"):
        next(it)
    assert it.state == fn.DatasetPosition(5)
    seen += [int(x) for x in it]
    assert seen == list(range(12))
    assert it.state == fn.DatasetPosition(12)


def test_an_error_of_the_first_element_and_of_the_device() -> None:
    stream = fn.map(FailsAt(0), fn.from_dataset(fn.range(4)))
    for ahead in AHEADS:
        it = fn.iterate(fn.put_on_device(DEVICE, stream, ahead=ahead))
        with pytest.raises(OSError, match="cannot read 0"):
            next(it)
        assert it.state == fn.DatasetPosition(0)
    # What jax.device_put refuses (a string) comes at its place too.
    # Elements are put together in one call: the one that cannot go raises at its place,
    # for every read-ahead, and again when read again.
    words = fn.map(lambda x: "four" if x == 4 else x, fn.from_dataset(fn.range(7)))
    for ahead in AHEADS:
        it = fn.iterate(fn.put_on_device(DEVICE, words, ahead=ahead))
        assert [int(next(it)) for _ in range(4)] == [0, 1, 2, 3]
        for _ in range(2):
            with pytest.raises(TypeError, match="four"):
                next(it)
            assert it.state == fn.DatasetPosition(4)
    # At the cursor, the elements read after it come next, then the end, as with no read-ahead.
    for ahead in AHEADS:
        cursor = fn.put_on_device(DEVICE, words, ahead=ahead).open(words.init())
        assert [int(cursor.next()) for _ in range(4)] == [0, 1, 2, 3]
        with pytest.raises(TypeError, match="four"):
            cursor.next()
        assert [int(cursor.next()) for _ in range(2)] == [5, 6]
        with pytest.raises(StopIteration):
            cursor.next()
        assert cursor.state() == fn.DatasetPosition(7)


@pytest.mark.parametrize("ahead", [0, 1, 3, 100])
def test_the_end_comes_after_the_last_element(ahead: int) -> None:
    stream = fn.filter(lambda x: x < 3, fn.from_dataset(fn.range(6)))  # the end is at 6, not 3
    cursor = fn.put_on_device(DEVICE, stream, ahead=ahead).open(stream.init())
    assert [int(cursor.next()) for _ in range(3)] == [0, 1, 2]
    assert cursor.state() == fn.DatasetPosition(3)
    for _ in range(2):
        with pytest.raises(StopIteration):
            cursor.next()
        assert cursor.state() == fn.DatasetPosition(6)
    assert cursor.next_many(4) == []
    cursor.close()
    empty = fn.from_dataset(fn.range(0))
    assert list(fn.iterate(fn.put_on_device(DEVICE, empty, ahead=ahead))) == []


@pytest.mark.parametrize("ahead", AHEADS)
@pytest.mark.parametrize("counts", [[1, 1, 1], [3, 2, 100], [0, 5, 0, 5], [100]])
def test_next_many_gives_what_next_gives(ahead: int, counts: list[int]) -> None:
    stream = pipeline()
    plain = stream.open(stream.init())
    cursor = fn.put_on_device(DEVICE, stream, ahead=ahead).open(stream.init())
    for count in counts:
        expected = plain.next_many(count)
        got = cursor.next_many(count)
        assert len(got) == len(expected) and all(map(assert_on_device_ok, got))
        assert [host(e) for e in got] == [on_device(e) for e in expected]
        assert cursor.state() == plain.state()
    cursor.close()


@settings(max_examples=30, deadline=None)
@given(st.integers(0, 4), st.lists(st.integers(0, 5), max_size=12))
def test_any_mix_of_next_and_next_many_reads_the_stream(ahead: int, counts: list[int]) -> None:
    stream = pipeline()
    plain = stream.open(stream.init())
    cursor = fn.put_on_device(DEVICE, stream, ahead=ahead).open(stream.init())
    for count in counts:  # 0 stands for one next()
        if count == 0:
            try:
                expected = [plain.next()]
            except StopIteration:
                with pytest.raises(StopIteration):
                    cursor.next()
                expected = []
            got = [cursor.next()] if expected else []
        else:
            expected, got = plain.next_many(count), cursor.next_many(count)
        assert [host(e) for e in got] == [on_device(e) for e in expected]
        assert cursor.state() == plain.state()
    cursor.close()


def assert_on_device_ok(element: Any) -> bool:
    assert_on_device(element)
    return True


@pytest.mark.parametrize("ahead", [1, 3])
def test_next_many_keeps_an_error_for_its_place(ahead: int) -> None:
    stream = fn.map(FailsAt(7), fn.from_dataset(fn.range(12)))
    cursor = fn.put_on_device(DEVICE, stream, ahead=ahead).open(stream.init())
    # The error is read ahead by the first call, and comes after all it returns.
    assert [int(x) for x in cursor.next_many(7)] == list(range(7))
    assert cursor.state() == fn.DatasetPosition(7)
    with pytest.raises(OSError, match="cannot read 7"):
        cursor.next_many(3)
    assert cursor.state() == fn.DatasetPosition(7)
    cursor.close()

    # An error among the elements asked for: nothing is returned and nothing changes;
    # the elements before it come first, then the error, at its place.
    cursor = fn.put_on_device(DEVICE, stream, ahead=ahead).open(stream.init())
    assert [int(x) for x in cursor.next_many(4)] == [0, 1, 2, 3]
    with pytest.raises(OSError, match="cannot read 7"):
        cursor.next_many(5)
    assert cursor.state() == fn.DatasetPosition(4)
    assert [int(x) for x in cursor.next_many(3)] == [4, 5, 6]
    with pytest.raises(OSError, match="cannot read 7"):
        cursor.next()
    assert cursor.state() == fn.DatasetPosition(7)
    cursor.close()


@pytest.mark.parametrize(
    ("ahead", "error", "match"),
    [
        (-1, ValueError, r"put_on_device's ahead must be an integer >= 0, got -1\."),
        (1.5, TypeError, r"put_on_device's ahead must be an integer >= 0, got 1\.5\."),
        (True, TypeError, r"put_on_device's ahead must be an integer >= 0, got True\."),
        ("2", TypeError, r"put_on_device's ahead must be an integer >= 0, got '2'\."),
    ],
)
def test_a_bad_ahead_is_refused(ahead: Any, error: type[Exception], match: str) -> None:
    with pytest.raises(error, match=match):
        fn.put_on_device(DEVICE, fn.from_dataset(fn.range(3)), ahead=ahead)


def test_a_bad_device_or_stream_is_refused() -> None:
    with pytest.raises(TypeError, match=r"a jax Device, a Sharding .* got 'gpu' of type str"):
        fn.put_on_device("gpu", fn.from_dataset(fn.range(3)))
    with pytest.raises(TypeError, match="got 3 of type int in"):
        fn.put_on_device({"x": DEVICE, "y": 3}, fn.from_dataset(fn.range(3)))
    with pytest.raises(TypeError, match="put_on_device needs a grainfn Stream or Dataset"):
        fn.put_on_device(DEVICE, [1, 2, 3])


def test_shardings_pytrees_curried_and_datasets() -> None:
    ds = fn.map(lambda x: {"x": np.arange(3) * x, "y": x}, fn.range(4))
    expected = [on_device(e) for e in fn.elements(ds)]
    single = jax.sharding.SingleDeviceSharding(DEVICE)
    for where in (single, {"x": DEVICE, "y": single}):
        assert [host(e) for e in fn.iterate(fn.put_on_device(where, ds))] == expected
    put = fn.put_on_device(DEVICE, ahead=2)  # curried: the stream comes last
    assert [host(e) for e in fn.iterate(put(fn.from_dataset(ds)))] == expected


FACADE_SIZES = [
    {},  # Grain's defaults
    {"cpu_buffer_size": 0, "device_buffer_size": 0},
    {"cpu_buffer_size": 2, "device_buffer_size": 5},
    {"cpu_buffer_size": 0, "device_buffer_size": 1},
]


def facade_dataset() -> grain.IterDataset:
    ds = grain.MapDataset.range(23).seed(2).shuffle().map(lambda x: {"x": np.arange(2) * x})
    return ds.to_iter_dataset().filter(lambda e: int(e["x"][1]) % 4 != 1).batch(2)


@pytest.mark.parametrize("sizes", FACADE_SIZES)
def test_facade_device_put_gives_the_plain_iterators_elements_and_states(
    sizes: dict[str, int],
) -> None:
    ds = facade_dataset()
    plain, put = iter(ds), iter(grain.experimental.device_put(ds, DEVICE, **sizes))
    count = 0
    for expected in plain:
        element = next(put)
        assert_on_device(element)
        assert host(element) == on_device(expected)
        assert put.get_state() == plain.get_state()
        count += 1
    assert count > 3
    with pytest.raises(StopIteration):
        next(put)
    assert put.get_state() == plain.get_state()


@pytest.mark.parametrize("sizes", FACADE_SIZES)
def test_facade_device_put_checkpoints_restore_both_ways(sizes: dict[str, int]) -> None:
    ds = facade_dataset()
    expected = [host(e) for e in ds]
    put = iter(grain.experimental.device_put(ds, DEVICE, **sizes))
    first = [host(next(put)) for _ in range(3)]
    state = put.get_state()
    put.close()

    plain = iter(ds)
    plain.set_state(state)
    assert first + [host(e) for e in plain] == expected
    again = iter(grain.experimental.device_put(ds, DEVICE, **sizes))
    again.set_state(state)
    assert first + [host(e) for e in again] == expected

    plain = iter(ds)
    first = [host(next(plain)) for _ in range(2)]
    put = iter(grain.experimental.device_put(ds, DEVICE, **sizes))
    put.set_state(plain.get_state())
    assert first + [host(e) for e in put] == expected


def test_facade_device_put_reads_in_the_consumers_thread_for_a_cpu_device() -> None:
    before = set(threading.enumerate())
    put = iter(grain.experimental.device_put(facade_dataset(), DEVICE, cpu_buffer_size=8))
    next(put)
    started = set(threading.enumerate()) - before
    # The source is read in Grain's read threads (as Grain reads it); device_put adds none.
    assert not [t.name for t in started if not t.name.startswith("grain-prefetch_")]
    put.close()


def test_facade_device_put_refuses_bad_sizes() -> None:
    ds = facade_dataset()
    with pytest.raises(ValueError, match=r"device_buffer_size must be an integer >= 0, got -2\."):
        grain.experimental.device_put(ds, DEVICE, device_buffer_size=-2)
    with pytest.raises(ValueError, match=r"cpu_buffer_size must be an integer >= 0, got -1\."):
        grain.experimental.device_put(ds, DEVICE, cpu_buffer_size=-1)
    with pytest.raises(TypeError, match="got 'cpu' of type str"):
        grain.experimental.device_put(ds, "cpu")


# The Putter: what jax.device_put gives, without its Python where the elements allow.


def aligned(array: np.ndarray) -> np.ndarray:
    """A copy of `array` whose data starts at a multiple of 64 bytes."""
    raw = np.empty(array.nbytes + 64, np.uint8)
    start = -raw.ctypes.data % 64
    out = raw[start : start + array.nbytes].view(array.dtype).reshape(array.shape)
    out[...] = array
    return out


def assert_same_arrays(got: Any, expected: Any) -> None:
    """The same pytree of the same jax arrays: type, dtype, shape, placement, values."""
    got_leaves, got_tree = jax.tree_util.tree_flatten(got)
    expected_leaves, expected_tree = jax.tree_util.tree_flatten(expected)
    assert got_tree == expected_tree
    for a, b in zip(got_leaves, expected_leaves, strict=True):
        assert type(a) is type(b)
        assert (a.aval, a.dtype, a.shape, a.weak_type) == (b.aval, b.dtype, b.shape, b.weak_type)
        assert (a.sharding, a.committed) == (b.sharding, b.committed)
        assert np.array_equal(np.asarray(a), np.asarray(b), equal_nan=True)


LEAVES = [
    np.arange(6, dtype=np.int32).reshape(2, 3),
    np.ones((), np.float32),  # 0-d
    np.zeros((0, 4), np.float16),  # empty
    np.asfortranarray(np.arange(12, dtype=np.float32).reshape(3, 4)),
    np.arange(64, dtype=np.float32).reshape(8, 8)[::2, 1::3],  # a strided view
    np.array([True, False]),
    np.arange(5, dtype=np.uint8),
    np.array([1 + 2j, np.nan], np.complex64),
    np.arange(4, dtype=np.int64),  # 64-bit: jax.device_put's own path, int32 in 32-bit mode
    np.float32(2.5),  # a numpy scalar, not an array: jax.device_put's own path
    7,
]


@pytest.mark.parametrize("where", [DEVICE, jax.sharding.SingleDeviceSharding(DEVICE)])
def test_the_putter_gives_what_jax_device_put_gives(where: Any) -> None:
    put = Putter(where)
    assert put.direct is not None  # this jax's internals are the ones the direct call knows
    for leaf in LEAVES:
        element = {"x": leaf, "nothing": None, "pair": (leaf, [leaf])}
        assert_same_arrays(put.one(element), jax.device_put(element, where))
        assert_same_arrays(put.many([element, element]), jax.device_put([element] * 2, where))
    with pytest.raises(TypeError, match="not a valid JAX array type"):  # jax's own refusal
        put.one(np.arange(3, dtype=">f4"))
    assert put.direct is not None  # nothing above made it give up


def test_the_putter_aliases_and_guards_transfers_as_jax_device_put_does() -> None:
    put = Putter(DEVICE)
    array = aligned(np.arange(4096, dtype=np.float32))
    direct, plain = put.one(array), jax.device_put(array, DEVICE)
    # On a CPU device, jax takes a 64-byte-aligned numpy array without a copy; so does the putter.
    assert (direct.unsafe_buffer_pointer() == array.ctypes.data) == (
        plain.unsafe_buffer_pointer() == array.ctypes.data
    )
    with jax.transfer_guard("disallow"):  # an explicit transfer, as jax.device_put's is
        assert_same_arrays(put.one({"x": array}), {"x": plain})


def test_a_putter_falls_back_to_jax_device_put_when_the_direct_call_fails() -> None:
    put = Putter(DEVICE)
    assert put.direct is not None

    def changed(*args: Any) -> Any:  # as if another jax version took other arguments
        raise TypeError("batched_device_put() takes other arguments")

    put.direct = put.direct._replace(put=changed)
    element = {"x": np.arange(3, dtype=np.int32)}
    assert_same_arrays(put.one(element), jax.device_put(element, DEVICE))
    assert put.direct is None  # given up once, for good
    assert_same_arrays(put.many([element]), [jax.device_put(element, DEVICE)])


def test_another_memory_than_the_devices_own_goes_through_jax_device_put() -> None:
    for memory in DEVICE.addressable_memories():  # on a CPU: device, pinned_host, unpinned_host
        where = jax.sharding.SingleDeviceSharding(DEVICE, memory_kind=memory.kind)
        put = Putter(where)
        assert (put.direct is not None) == (memory.kind == DEVICE.default_memory().kind)
        element = {"x": np.arange(3, dtype=np.float32)}
        assert_same_arrays(put.one(element), jax.device_put(element, where))


def test_a_pytree_of_places_goes_through_jax_device_put() -> None:
    where = {"x": DEVICE, "y": jax.sharding.SingleDeviceSharding(DEVICE)}
    put = Putter(where)
    assert put.direct is None
    element = {"x": np.arange(3, dtype=np.int32), "y": np.ones(2, np.float32)}
    assert_same_arrays(put.many([element, element]), [jax.device_put(element, where)] * 2)

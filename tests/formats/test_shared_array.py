"""SharedMemoryArray: a numpy array in a shared-memory segment, attached to by other processes."""

from __future__ import annotations

import copy
import gc
import multiprocessing
import os
import pickle
import subprocess
import sys
import textwrap
import threading
import time
from collections.abc import Callable, Iterator
from multiprocessing import shared_memory
from typing import Any

import grain.multiprocessing
import grain.python
import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

import grainfn.multiprocessing
import grainfn.python
from grainfn._src.formats.shared_array import SharedMemoryArray, SharedMemoryArrayMetadata

GrainArray = grain.python.SharedMemoryArray
GrainMetadata = grain.multiprocessing.SharedMemoryArrayMetadata


def exists(name: str) -> bool:
    return os.path.exists(f"/dev/shm/{name}")


def freed_soon(name: str, seconds: float = 60.0) -> bool:
    """Whether segment `name` is gone within `seconds`: deletion may run in a background
    thread (`enable_async_del`, which another test may have turned on for the class)."""
    deadline = time.monotonic() + seconds
    while exists(name):
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def free(name: str) -> None:
    segment = shared_memory.SharedMemory(name)
    segment.close()
    segment.unlink()


@pytest.fixture
def segments() -> Iterator[list[str]]:
    """Names of the segments a test makes; each must be gone when the test ends.

    Waited for: Grain's arrays may unlink in a background thread (`enable_async_del`,
    which another test may have turned on for the class), so a segment freed by the
    test can still be there an instant after it.
    """
    names: list[str] = []
    yield names
    gc.collect()
    left = [name for name in names if not freed_soon(name)]
    for name in left:
        free(name)
    assert not left, f"segments left behind: {left}"


@pytest.fixture
def make(segments: list[str]) -> Callable[..., SharedMemoryArray]:
    """SharedMemoryArray(...), its segment tracked by `segments`."""

    def made(*args: Any) -> SharedMemoryArray:
        array = SharedMemoryArray(*args)
        assert array.shm is not None
        segments.append(array.shm.name)
        return array

    return made


def test_a_new_array_is_zeros_of_its_shape_and_dtype_in_a_segment(make, segments) -> None:
    a = make((2, 3), np.int32)
    assert isinstance(a, np.ndarray) and a.shape == (2, 3) and a.dtype == np.int32
    assert a.tolist() == [[0, 0, 0], [0, 0, 0]]
    assert exists(a.shm.name) and a.shm.size >= 24
    default, from_ndarray = make([4]), make(np.array([2, 2]), "uint8")
    assert default.dtype == np.float64  # dtype defaults to float, as Grain's
    assert from_ndarray.shape == (2, 2)
    scalar = make((), np.int16)
    scalar[()] = 5
    assert scalar.shape == () and int(scalar) == 5
    meta = a.metadata
    assert meta == SharedMemoryArrayMetadata(a.shm.name, (2, 3), np.dtype(np.int32))
    for array in (a, default, from_ndarray, scalar):
        array.unlink_on_del()


def test_values_written_through_one_attachment_are_read_through_another(make) -> None:
    a = make((3,), np.float32)
    b = SharedMemoryArray.from_metadata(a.metadata)
    a[:] = [0.5, 1.5, 2.5]
    assert b.tolist() == [0.5, 1.5, 2.5]
    b[0] = -1
    assert a[0] == -1
    assert b.shm is not a.shm and b.shm.name == a.shm.name
    b.unlink_on_del()


def test_from_array_copies_into_a_segment_of_its_own(segments) -> None:
    source = np.arange(6, dtype=np.int64).reshape(2, 3)
    a = SharedMemoryArray.from_array(source.T)  # not contiguous: copied all the same
    segments.append(a.shm.name)
    source[0, 0] = 99
    assert a.tolist() == [[0, 3], [1, 4], [2, 5]] and a.dtype == np.int64
    b = SharedMemoryArray.from_array(a)
    segments.append(b.shm.name)
    b[0, 0] = 7
    assert b.shm.name != a.shm.name and a[0, 0] == 0
    text = SharedMemoryArray.from_array(np.array([b"ab", b"c"]))
    segments.append(text.shm.name)
    assert text.tolist() == [b"ab", b"c"]
    for array in (a, b, text):
        array.unlink_on_del()
    del a, b, text, array


READ_AND_WRITE = """
import numpy as np
from grainfn.python import SharedMemoryArray

array = SharedMemoryArray.from_metadata(metadata)
if array.tolist() != expected:
    raise SystemExit(f"the child read {array.tolist()}")
array *= 10
"""

WRITE_RECEIVED = """
if type(array).__name__ != "SharedMemoryArray":
    raise SystemExit(f"the child received a {type(array)}")
array[-1] = -5
"""


@pytest.mark.parametrize("start", ["spawn", "forkserver"])
def test_another_process_attaches_by_metadata_and_writes_the_same_memory(make, start) -> None:
    a = make((2, 2), np.int64)
    a[:] = [[1, 2], [3, 4]]
    context = multiprocessing.get_context(start)
    child = context.Process(
        target=exec, args=(READ_AND_WRITE, {"metadata": a.metadata, "expected": a.tolist()})
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert a.tolist() == [[10, 20], [30, 40]]
    assert exists(a.shm.name)  # the child did not unlink it
    a.unlink_on_del()


def test_an_array_sent_to_another_process_arrives_attached_not_copied(make) -> None:
    a = make((3,), np.int8)
    child = multiprocessing.get_context("spawn").Process(
        target=exec, args=(WRITE_RECEIVED, {"array": a})
    )
    child.start()
    child.join(60)
    assert child.exitcode == 0
    assert a.tolist() == [0, 0, -5]
    a.unlink_on_del()


def test_pickling_attaches_to_the_segment_like_grains(make) -> None:
    a = make((2, 2), np.uint16)
    a.unlink_on_del()
    b = pickle.loads(pickle.dumps(a))
    assert type(b) is SharedMemoryArray and b.shm is not a.shm and b.shm.name == a.shm.name
    b[1, 1] = 9
    assert a[1, 1] == 9
    name = a.shm.name
    del b  # an unpickled array is not flagged: the segment stays
    gc.collect()
    assert exists(name)
    whole = pickle.loads(pickle.dumps(a.reshape(4)))  # a view of the whole segment attaches too
    assert whole.shape == (4,) and whole.shm.name == name


def test_a_pickled_copy_or_part_of_a_segment_keeps_its_values(make) -> None:
    a = make((4,), np.int32)
    a[:] = [1, 2, 3, 4]
    part = pickle.loads(pickle.dumps(a[2:]))
    assert type(part) is np.ndarray and part.tolist() == [3, 4]
    strided = pickle.loads(pickle.dumps(a[::2]))
    assert strided.tolist() == [1, 3]
    private = a.copy()
    assert type(private) is SharedMemoryArray and private.shm is None
    assert pickle.loads(pickle.dumps(private)).tolist() == [1, 2, 3, 4]
    a.unlink_on_del()


@pytest.mark.slow
def test_unlink_on_del_frees_the_segment_when_the_array_goes(make) -> None:
    a = make((16,), np.int64)
    name = a.shm.name
    a.unlink_on_del()
    del a
    gc.collect()
    assert not exists(name)
    with pytest.raises(FileNotFoundError, match=name):
        SharedMemoryArray.from_metadata(SharedMemoryArrayMetadata(name, (16,), np.int64))


@pytest.mark.slow
def test_without_unlink_on_del_the_segment_outlives_the_array(make) -> None:
    a = make((16,), np.int64)
    metadata = a.metadata
    del a
    gc.collect()
    assert exists(metadata.name)
    metadata.close_and_unlink_shm()
    assert not exists(metadata.name)


@pytest.mark.slow
def test_slices_and_results_never_free_their_parents_segment(make) -> None:
    a = make((2, 4), np.float64)
    name = a.shm.name
    a.unlink_on_del()
    row, flat, col = a[1], a.reshape(8), a[:, 1]
    assert all(type(v) is SharedMemoryArray and v.shm is a.shm for v in (row, flat, col))
    assert type(a + 1) is np.ndarray and type(np.sqrt(a)) is np.ndarray
    assert type(a == 0) is np.ndarray and type(a.sum()) is np.float64
    row.unlink_on_del()  # its duty goes to `a`, which outlives every view
    del row, flat, col
    gc.collect()
    assert exists(name)
    a[0, 0] = 3
    assert a[0, 0] == 3
    view = a[0, :2]
    del a  # the view keeps the mapping: still readable, the segment still there
    gc.collect()
    assert exists(name) and view.tolist() == [3.0, 0.0]
    del view
    gc.collect()
    assert not exists(name)


def test_ufunc_out_stays_in_the_segment(make) -> None:
    out = make((3,), np.int32)
    result = np.add(np.arange(3, dtype=np.int32), 1, out=out)
    assert result is out and out.tolist() == [1, 2, 3]
    stacked = np.stack([np.ones(2), np.zeros(2)], out=make((2, 2)))
    assert type(stacked) is SharedMemoryArray and stacked.tolist() == [[1, 1], [0, 0]]
    out.unlink_on_del()
    stacked.unlink_on_del()


@pytest.mark.slow
def test_unlink_frees_the_name_now_and_the_array_stays_readable(make) -> None:
    a = make((3,), np.int32)
    a.unlink_on_del()
    a[1:].unlink()
    assert not exists(a.shm.name)
    a[:] = 4
    assert a.tolist() == [4, 4, 4]
    with pytest.raises(FileNotFoundError):
        a.unlink()
    with pytest.raises(ValueError, match="not in shared memory"):
        a.copy().unlink()
    del a  # unlinked already: collecting it raises nothing
    gc.collect()


def test_metadata_describes_whole_segments_only(make) -> None:
    a = make((2, 3), np.int16)
    assert a.reshape(3, 2).metadata.shape == (3, 2)
    assert a.view(np.uint8).metadata.dtype == np.uint8
    with pytest.raises(ValueError, match=r"view of part of segment .*from_array\(view\)"):
        _ = a[1].metadata
    with pytest.raises(ValueError, match="C-contiguous"):
        _ = a.T.metadata
    with pytest.raises(ValueError, match=r"not in shared memory \(it is a copy\)"):
        _ = a.copy().metadata
    for private in (copy.copy(a), copy.deepcopy(a)):
        assert type(private) is SharedMemoryArray and private.shm is None
    a.unlink_on_del()


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (((0, 3),), ValueError, r"shape \(0, 3\) and dtype float64 holds no bytes"),
        (((2, -1),), ValueError, r"shape \(2, -1\) has a negative dimension"),
        ((3,), TypeError, "shape must be a sequence of ints, got 3"),
        ((("a",),), TypeError, r"shape must be a sequence of ints, got \('a',\)"),
        (((2,), "no such dtype"), TypeError, "data type 'no such dtype' not understood"),
        (((2,), object), ValueError, "cannot hold dtype object: it holds Python objects"),
        (((2,), "S0"), ValueError, "holds no bytes"),
    ],
)
def test_bad_shapes_and_dtypes_are_refused_by_name(args, error, message) -> None:
    with pytest.raises(error, match=message):
        SharedMemoryArray(*args)


def test_attaching_to_a_missing_or_small_segment_is_refused(make) -> None:
    with pytest.raises(FileNotFoundError, match="No shared-memory segment is named 'psm_none'"):
        SharedMemoryArray.from_metadata(SharedMemoryArrayMetadata("psm_none", (2,), np.int8))
    a = make((2,), np.int32)
    with pytest.raises(TypeError, match=r"holds 8 bytes, too few for shape \(3,\) of int32"):
        SharedMemoryArray.from_metadata(SharedMemoryArrayMetadata(a.shm.name, (3,), np.int32))
    a.unlink_on_del()


@pytest.mark.slow
def test_a_segment_backs_one_array_which_closes_it(segments) -> None:
    segment = shared_memory.SharedMemory(create=True, size=16)
    segments.append(segment.name)
    a = SharedMemoryArray.from_shared_memory(segment, (2,), np.int64)
    with pytest.raises(ValueError, match="already backs a SharedMemoryArray"):
        SharedMemoryArray.from_shared_memory(segment, (2,), np.int64)
    del a
    gc.collect()
    assert segment.buf is None  # closed by the array that took it over
    with pytest.raises(ValueError, match="is closed; attach to it again"):
        SharedMemoryArray.from_shared_memory(segment, (2,), np.int64)
    segment.unlink()


def test_async_deletion_closes_in_the_background_and_bounds_the_queue(make, monkeypatch) -> None:
    release, threads = threading.Event(), []
    original = SharedMemoryArray.close_shm_async

    def close(shm: shared_memory.SharedMemory, unlink: bool) -> None:
        threads.append(threading.current_thread().name)
        release.wait(30)
        original(shm, unlink)

    with pytest.raises(ValueError, match="num_threads >= 1"):
        SharedMemoryArray.enable_async_del(num_threads=0)
    monkeypatch.setattr(SharedMemoryArray, "close_shm_async", staticmethod(close))
    SharedMemoryArray.enable_async_del(num_threads=1, max_outstanding_requests=1)
    try:
        first, second = make((8,)), make((8,))
        names = [first.shm.name, second.shm.name]
        first.unlink_on_del()
        second.unlink_on_del()
        del first  # taken by the background thread, which waits for `release`
        del second  # no slot left: freed at once, in this thread
        gc.collect()
        assert exists(names[0]) and not exists(names[1])
        release.set()
    finally:
        release.set()
        SharedMemoryArray._disable_async_del()  # waits for the requests in flight
    assert not exists(names[0])
    assert len(threads) == 1 and threads[0].startswith("grainfn-shm-del")


def run_script(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True, timeout=120
    )


FORK_AND_DROP = """
import gc, os, sys
from {module} import SharedMemoryArray

if {background}:
    SharedMemoryArray.enable_async_del()
    warm = SharedMemoryArray((8,), "int64")  # starts the background thread
    warm.unlink_on_del()
    del warm
a = SharedMemoryArray((8,), "int64")
a.unlink_on_del()
name = a.shm.name
child = os.fork()
if child == 0:
    del a
    gc.collect()
    sys.exit(0)  # a normal exit: finalizers run
os.waitpid(child, 0)
print(os.path.exists("/dev/shm/" + name), flush=True)
if os.path.exists("/dev/shm/" + name):
    del a
    SharedMemoryArray._disable_async_del()
print(os.path.exists("/dev/shm/" + name), flush=True)
"""


@pytest.mark.parametrize("background", [False, True])
def test_a_forked_child_dropping_its_copy_leaves_the_parents_segment(background) -> None:
    result = run_script(FORK_AND_DROP.format(module="grainfn.python", background=background))
    assert result.stdout.split() == ["True", "False"], result.stderr
    assert result.stderr == ""


@pytest.mark.slow
@pytest.mark.grain
def test_where_grain_differs_a_forked_child_unlinks_its_parents_segment() -> None:
    result = run_script(FORK_AND_DROP.format(module="grain.python", background=False))
    assert result.stdout.split() == ["False", "False"], result.stderr


def test_arrays_alive_at_exit_are_freed_quietly() -> None:
    result = run_script(
        """
        from grainfn.python import SharedMemoryArray

        a = SharedMemoryArray((1000,), "int8")
        a.unlink_on_del()
        view = a[10:]
        other = SharedMemoryArray.from_metadata(a.metadata)
        print(a.shm.name)
        """
    )
    assert result.returncode == 0 and result.stderr == ""  # no error, no tracker warning
    assert not exists(result.stdout.strip())


@given(
    hnp.arrays(
        st.sampled_from([np.int8, np.int64, np.float32, np.bool_, np.complex64]),
        hnp.array_shapes(min_dims=0, max_dims=3, min_side=1, max_side=4),
    )
)
def test_from_array_and_pickling_keep_any_values(values: np.ndarray) -> None:
    a = SharedMemoryArray.from_array(values)
    a.unlink_on_del()
    again = pickle.loads(pickle.dumps(a))
    np.testing.assert_array_equal(a, values)
    np.testing.assert_array_equal(again, values)
    assert again.shape == values.shape and again.dtype == values.dtype
    name = a.shm.name
    del a, again
    assert not exists(name)


# Against Grain 0.2.18.


@pytest.mark.grain
def test_the_public_surface_is_grains() -> None:
    def public(cls: type) -> set[str]:
        return {n for n in set(dir(cls)) - set(dir(np.ndarray)) if not n.startswith("_")}

    assert public(GrainArray) <= public(SharedMemoryArray)
    assert public(SharedMemoryArray) - public(GrainArray) == {"from_array", "unlink"}
    fields = [f.name for f in GrainMetadata.__dataclass_fields__.values()]
    assert (
        fields == list(SharedMemoryArrayMetadata.__dataclass_fields__) == ["name", "shape", "dtype"]
    )
    assert callable(SharedMemoryArrayMetadata.close_and_unlink_shm)
    assert grainfn.python.SharedMemoryArray is SharedMemoryArray
    assert grainfn.multiprocessing.SharedMemoryArray is SharedMemoryArray
    assert grainfn.multiprocessing.SharedMemoryArrayMetadata is SharedMemoryArrayMetadata
    assert grainfn.multiprocessing.MultiprocessingOptions is grainfn.MultiprocessingOptions


def behaviour(cls: Any) -> list[Any]:
    """What the same calls give on Grain's class or grainfn's, with the segments freed."""
    a = cls((2, 3), np.int32)
    default = cls([2])
    default.unlink_on_del()
    seen: list[Any] = [a.shape, a.dtype, a.tolist(), default.dtype, repr(a), str(a)]
    del default
    a[1] = [4, 5, 6]
    b = pickle.loads(pickle.dumps(a))
    b[0, 0] = 1
    seen += [type(b) is cls, b.shm.name == a.shm.name, a.tolist()]
    seen += [type(a[1]) is cls, a[1].shm is a.shm, type(a.reshape(6)) is cls]
    seen += [type(a + 1).__name__, type(a.sum()).__name__, type(a.max(axis=0)).__name__]
    seen += [type(a.copy()) is cls, a.copy().shm, type(a[0, 0]).__name__]
    meta = a.metadata
    seen += [meta.name == a.shm.name, meta.shape, meta.dtype]
    other = cls.from_metadata(meta)
    seen += [other.tolist(), type(other) is cls]
    a.unlink_on_del()
    name = a.shm.name
    del a, b, other
    gc.collect()
    seen.append(freed_soon(name))
    return seen


@pytest.mark.grain
def test_the_same_calls_give_the_same_results_as_grains() -> None:
    assert behaviour(SharedMemoryArray) == behaviour(GrainArray)


@pytest.mark.grain
@pytest.mark.parametrize(
    "args",
    [((0,),), ((2, 0), np.int8), ((-1,),), (3,), (("a",),), ((2,), "no such dtype")],
)
def test_bad_input_raises_what_grains_raises(args) -> None:
    with pytest.raises(Exception) as theirs:
        GrainArray(*args)
    with pytest.raises(theirs.type):
        SharedMemoryArray(*args)


@pytest.mark.grain
def test_attaching_badly_raises_what_grains_raises(make) -> None:
    missing = SharedMemoryArrayMetadata("psm_none", (2,), np.int8)
    with pytest.raises(FileNotFoundError):
        GrainArray.from_metadata(missing)
    with pytest.raises(FileNotFoundError):
        SharedMemoryArray.from_metadata(missing)
    a = make((2,), np.int8)
    too_big = SharedMemoryArrayMetadata(a.shm.name, (64,), np.int64)
    with pytest.raises(TypeError):
        GrainArray.from_metadata(too_big)
    with pytest.raises(TypeError):
        SharedMemoryArray.from_metadata(too_big)
    a.unlink_on_del()


@pytest.mark.grain
def test_metadata_records_of_either_library_attach_in_the_other(make, segments) -> None:
    theirs = GrainArray((3,), np.int16)
    segments.append(theirs.shm.name)
    theirs[:] = [1, 2, 3]
    ours = SharedMemoryArray.from_metadata(theirs.metadata)
    assert ours.tolist() == [1, 2, 3]
    mine = make((2,), np.float32)
    mine[:] = [0.25, 0.5]
    grains_view = GrainArray.from_metadata(mine.metadata)
    assert grains_view.tolist() == [0.25, 0.5]
    ours.unlink_on_del()
    mine.unlink_on_del()
    del theirs, ours, mine, grains_view


@pytest.mark.grain
def test_where_grain_differs_object_dtypes_and_pickled_parts(segments) -> None:
    # Grain accepts object arrays, whose pointers are garbage in another process;
    # grainfn refuses them.
    theirs = GrainArray((2,), object)
    segments.append(theirs.shm.name)
    with pytest.raises(ValueError, match="cannot hold dtype object"):
        SharedMemoryArray((2,), object)
    theirs.unlink_on_del()
    del theirs
    # Grain pickles a slice as the start of its segment; grainfn pickles its values.
    values = np.array([1, 2, 3, 4], np.int32)
    for cls in (GrainArray, SharedMemoryArray):
        a = cls(values.shape, values.dtype)
        segments.append(a.shm.name)
        a[:] = values
        a.unlink_on_del()
        part = pickle.loads(pickle.dumps(a[2:]))
        assert part.tolist() == ([1, 2] if cls is GrainArray else [3, 4])
        del a, part

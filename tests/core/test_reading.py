"""Reading datasets in order: from_dataset, its cursors, stray Nones, elements and iterate."""

from __future__ import annotations

import threading
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src.core.filter_check import FilterCheck
from grainfn._src.core.reading import (
    CheckedDatasetCursor,
    DatasetCursor,
    FromDatasetStream,
    HostTwin,
    elements,
    from_dataset,
    iterate,
)
from grainfn._src.core.state import DatasetPosition, EpochPosition
from grainfn._src.core.validate import PositionOutOfRangeError


def odd(x: int) -> bool:
    return x % 2 == 1


def test_holes_are_skipped_unless_nones_are_allowed() -> None:
    holed = fn.filter(odd, fn.range(6))
    assert list(iterate(from_dataset(holed))) == [1, 3, 5]
    assert list(iterate(from_dataset(holed, allow_nones=True))) == [None, 1, None, 3, None, 5]
    stream = from_dataset(holed)
    assert stream.step(DatasetPosition(2)) == (3, DatasetPosition(4))
    assert stream.describe_stage() == "from_dataset()"
    assert (
        from_dataset(holed, allow_nones=True).describe_stage() == "from_dataset(allow_nones=True)"
    )


def test_reading_options_change_neither_elements_nor_the_pipeline() -> None:
    ds = fn.map(lambda x: x * 3, fn.range(50))
    plain = list(iterate(from_dataset(ds)))
    assert list(iterate(from_dataset(ds, threads=2, buffer=7))) == plain
    assert from_dataset(ds, threads=2, buffer=7).describe_stage() == "from_dataset()"


def test_named_threads_read_every_position() -> None:
    names = fn.map(lambda _: threading.current_thread().name, fn.range(5))
    got = list(iterate(from_dataset(names, threads=2, thread_name="r")))
    assert len(got) == 5 and set(got) <= {"r_0", "r_1"}


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"threads": -1}, ValueError, "threads must be an integer >= 0, got -1"),
        ({"buffer": 0}, ValueError, "buffer must be a positive integer, got 0"),
        ({"allow_nones": 1}, TypeError, "from_dataset allow_nones must be True or False"),
        ({"thread_name": "r"}, ValueError, "reads in threads named 'r'_<n> only with threads >= 1"),
    ],
)
def test_bad_reading_options_are_named(kwargs: dict[str, Any], error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        from_dataset(fn.range(3), **kwargs)


def test_a_stream_is_refused_where_a_dataset_is_read() -> None:
    with pytest.raises(TypeError, match="from_dataset needs random access"):
        from_dataset(from_dataset(fn.range(3)))


def test_a_state_past_the_end_or_of_a_step_is_refused() -> None:
    stream = from_dataset(fn.range(10))
    stream.check_state(DatasetPosition(10))  # the end is a state
    with pytest.raises(PositionOutOfRangeError, match="position is 11, past the end of a dat"):
        stream.check_state(DatasetPosition(11))
    with pytest.raises(TypeError, match="is the state of a to_jax step"):
        stream.check_state(EpochPosition(0, 1))
    endless = from_dataset(fn.repeat(None, fn.range(10)))
    endless.check_state(DatasetPosition(10**12))
    assert stream.most_delivered(DatasetPosition(7)) == 7


def test_a_cursor_reads_many_and_knows_the_position_after_each() -> None:
    stream = from_dataset(fn.filter(odd, fn.range(20)))
    cursor = stream.open(DatasetPosition(0))
    assert isinstance(cursor, DatasetCursor) and cursor.atomic
    assert cursor.next_many(3) == [1, 3, 5]
    assert cursor.state() == DatasetPosition(6)
    assert cursor.next_many_at(3) == ([7, 9, 11], [8, 10, 12])
    assert cursor.next_many(100) == [13, 15, 17, 19]
    assert cursor.next_many(1) == []
    with pytest.raises(StopIteration):
        cursor.next()
    cursor.close()


def test_a_maps_nones_in_a_row_are_a_forgotten_return() -> None:
    def forgets(x: int) -> None:
        x + 1

    with pytest.raises(ValueError, match=r"Positions 0 to 999 of map\(.*forgets\) were all None"):
        list(iterate(from_dataset(fn.map(forgets, fn.range(5000)))))
    with pytest.raises(ValueError, match=r"Positions 0 to 9 of .* were all None"):
        list(iterate(from_dataset(fn.map(forgets, fn.range(10)))))
    some = fn.map(lambda x: None if x % 3 else x, fn.range(3000))  # a map that drops some
    assert list(iterate(from_dataset(some)))[:3] == [0, 3, 6]
    assert len(list(iterate(from_dataset(fn.map(forgets, fn.range(10)), allow_nones=True)))) == 10


def test_a_checked_read_judges_the_holes_per_window() -> None:
    sparse = fn.filter(lambda x: x % 10 == 0, fn.range(3000))
    stream = FromDatasetStream(sparse, check=FilterCheck(None, 0.5))
    cursor = stream.open(DatasetPosition(0))
    assert isinstance(cursor, CheckedDatasetCursor)
    assert cursor.next_many(99) == list(range(0, 990, 10))  # 990 positions: no window yet
    with pytest.raises(ValueError, match=r"dropped 90\.00% of the last 1000 elements"):
        cursor.next_many(10)
    dense = FromDatasetStream(
        fn.filter(lambda x: x % 10, fn.range(3000)), check=FilterCheck(None, 0.5)
    )
    assert len(list(iterate(dense))) == 2700


def test_elements_yields_positions_in_order_into_later_epochs() -> None:
    ds = fn.filter(odd, fn.range(6))
    assert list(elements(ds)) == [1, 3, 5]
    assert list(elements(ds, 2, 9)) == [3, 5, 1]
    assert list(elements(ds, 4, 6, allow_nones=True)) == [None, 5]
    assert list(elements(ds, 5, 5)) == []
    with pytest.raises(ValueError, match="start must be >= 0, got -1"):
        list(elements(ds, -1))
    with pytest.raises(TypeError, match="elements reads a grainfn Dataset, got list"):
        list(elements([1, 2]))  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="stop must be an integer"):
        list(elements(ds, 0, 2.0))  # type: ignore[arg-type]


class Twin:
    """A compiled value whose states are the twin's positions, doubled."""

    stream = from_dataset(fn.range(10))

    def host_state(self, state: Any) -> Any:
        return DatasetPosition(state // 2)

    def device_state(self, state: Any) -> Any:
        return 2 * state.position


def test_iterate_reads_a_dataset_a_stream_or_a_twin_from_its_states() -> None:
    assert isinstance(Twin(), HostTwin)
    assert list(iterate(Twin(), 14)) == [7, 8, 9]
    assert list(iterate(fn.range(3), DatasetPosition(1))) == [1, 2]
    it = iterate(fn.batch(2, from_dataset(fn.range(4))))
    assert next(it).tolist() == [0, 1] and it.state == DatasetPosition(2)
    with pytest.raises(TypeError, match="iterate needs a grainfn Stream or Dataset, got"):
        iterate(np.arange(3))  # type: ignore[arg-type]

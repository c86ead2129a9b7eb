"""SharedMemoryDataSource (InMemoryDataSource): shared values, read the same in every process."""

from __future__ import annotations

import pickle
from collections.abc import Iterator

import grain
import pytest

import grainfn
import grainfn.python
from grainfn.sources import SharedMemoryDataSource

VALUES = [0, 17, -3, 2.5, "text", b"bytes", None, True]


@pytest.fixture
def source() -> Iterator[SharedMemoryDataSource]:
    made = SharedMemoryDataSource(VALUES)
    yield made
    made.close()
    made.unlink()


@pytest.mark.grain
def test_reads_and_names_itself_as_grains_does(source: SharedMemoryDataSource) -> None:
    theirs = grain.sources.SharedMemoryDataSource(VALUES)
    try:
        assert list(source) == list(theirs) == VALUES
        assert str(source).replace(source.shm.name, "N") == str(theirs).replace(
            theirs.shm.name, "N"
        )
        assert grainfn.python.InMemoryDataSource is SharedMemoryDataSource
    finally:
        theirs.close()
        theirs.unlink()


def test_it_pickles_as_its_name_and_workers_read_the_segment(
    source: SharedMemoryDataSource,
) -> None:
    copy = pickle.loads(pickle.dumps(source))
    assert copy.shm.name == source.shm.name and list(copy) == VALUES
    copy.close()
    ints = SharedMemoryDataSource(list(range(40)))
    try:
        ds = grainfn.MapDataset.source(ints).map(lambda x: x * 2).to_iter_dataset()
        workers = ds.mp_prefetch(grainfn.MultiprocessingOptions(num_workers=2))
        assert list(workers) == [x * 2 for x in range(40)]
    finally:
        ints.close()
        ints.unlink()


def test_without_elements_or_name_it_says_what_it_needs() -> None:
    with pytest.raises(ValueError, match="needs the elements to share, or the name"):
        SharedMemoryDataSource()

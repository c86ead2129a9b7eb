"""ParquetIterDataset's facade: get_state and set_state, and set_slice of its file list.

The rows, against Grain's, and the core Parquet stream are tested in
tests/formats/parquet/test_stream.py; TFRecord's in tests/formats/test_tfrecord.py
and test_tfrecord_dataset.py.
"""

from __future__ import annotations

import json

import pytest

from grainfn.experimental import ParquetIterDataset
from grainfn.testing import assert_elements_equal

from support.parquet_files import write_many_files, write_typed_file


@pytest.fixture(scope="module")
def typed_file(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A file of 53 rows of many column types, in 8 row groups."""
    return write_typed_file(tmp_path_factory.mktemp("typed"))


@pytest.fixture(scope="module")
def many_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """18 files (more than the 16 read at once) of 0 to 9 rows in 1 to 3 row groups."""
    return write_many_files(tmp_path_factory.mktemp("many"))


def test_facade_get_state_and_set_state(typed_file: str, many_files: list[str]) -> None:
    for path in (typed_file, many_files):
        ds = ParquetIterDataset(path).map(lambda row: str(row.get("id", row.get("name"))))
        it = iter(ds)
        head = [next(it) for _ in range(9)]
        saved = json.loads(json.dumps(it.get_state()))
        rest = list(it)
        again = iter(ds)
        again.set_state(saved)
        assert list(again) == rest
        assert head + rest == list(ds)


@pytest.mark.grain
@pytest.mark.parametrize("part", [slice(1, None, 2), slice(0, 2), slice(None, None, -1)])
def test_set_slice_reads_those_files_as_in_grain(many_files: list[str], part: slice) -> None:
    import grain

    theirs = grain.experimental.ParquetIterDataset(many_files)
    theirs.set_slice(part)
    ours = ParquetIterDataset(many_files)
    ours.set_slice(part)
    assert_elements_equal(list(ours), list(theirs))


def test_set_slice_to_no_file_is_refused(many_files: list[str]) -> None:
    ds = ParquetIterDataset(many_files)
    with pytest.raises(ValueError, match="leaves no file to read"):
        ds.set_slice(slice(len(many_files), None))

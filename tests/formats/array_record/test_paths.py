"""Which files an ArrayRecord source reads: paths, lists and glob patterns, checked."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from grainfn._src.formats.array_record.paths import array_record_repr, resolve


def touch(folder: Path, *names: str) -> list[str]:
    for name in names:
        (folder / name).write_bytes(b"")
    return [str(folder / name) for name in names]


def test_files_are_shown_as_written_and_opened_by_absolute_path(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    touch(tmp_path, "a.ar", "b.ar")
    monkeypatch.chdir(tmp_path)
    assert resolve("a.ar") == (("a.ar",), (str(tmp_path / "a.ar"),))
    assert resolve([Path("b.ar"), "a.ar"]) == (
        ("b.ar", "a.ar"),
        (str(tmp_path / "b.ar"), str(tmp_path / "a.ar")),
    )


def test_a_pattern_stands_for_its_matches_sorted_in_place(tmp_path: Path) -> None:
    first, second, other = touch(tmp_path, "x-1.ar", "x-0.ar", "y.ar")
    shown, _ = resolve([other, str(tmp_path / "x-*.ar"), other])
    assert shown == (other, second, first, other)


def test_a_file_whose_name_looks_like_a_pattern_is_that_file(tmp_path: Path) -> None:
    (odd,) = touch(tmp_path, "data[1].ar")
    touch(tmp_path, "data1.ar")  # what the pattern would match
    assert resolve(odd)[0] == (odd,)


@pytest.mark.parametrize(
    ("paths", "error", "message"),
    [
        (b"a.ar", TypeError, "paths must be a path .* got b'a.ar' of type bytes"),
        (3, TypeError, "paths must be a path .* of type int"),
        ([], ValueError, "paths is an empty sequence: there are no files to read"),
        (["a.ar", 3], TypeError, r"paths\[1\] must be a path .* got 3 of type int"),
        ("", ValueError, "A path is the empty string"),
    ],
)
def test_what_is_not_a_path_is_refused(paths: object, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        resolve(paths)  # type: ignore[arg-type]


def test_missing_files_patterns_and_directories_are_named(tmp_path: Path) -> None:
    missing = str(tmp_path / "none.ar")
    with pytest.raises(FileNotFoundError, match=f"ArrayRecord file '{missing}' does not exist"):
        resolve(missing)
    pattern = str(tmp_path / "none-*.ar")
    with pytest.raises(FileNotFoundError, match="matches no files"):
        resolve(pattern)
    with pytest.raises(ValueError, match="is a directory, not an ArrayRecord file"):
        resolve(str(tmp_path))


def test_a_fifo_is_refused_before_any_reader_opens_it(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(ValueError, match="pipe"):
        resolve(str(fifo))


def test_array_record_repr_spells_out_few_files_and_digests_many() -> None:
    assert array_record_repr(("a",), {}) == "ArrayRecordDataSource('a')"
    assert array_record_repr(("a", "b"), {}) == "ArrayRecordDataSource(['a', 'b'])"
    many = array_record_repr(tuple("abcde"), {"max_parallelism": "1"})
    assert many.startswith("ArrayRecordDataSource(['a', 'b', ..., 'e'] (5 files, sha256 ")
    assert many.endswith("), reader_options={'max_parallelism': '1'})")
    assert array_record_repr(tuple("abcde"), {}) != array_record_repr(
        tuple("abxde"), {}
    )  # the digest sees all

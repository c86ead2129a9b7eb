"""Grain-internal import paths that published code uses, served by grainfn (grainfn._src.python).

Each test takes one import a client makes from Grain's private modules
(`grain._src.python...`), imports the same path under grainfn, and does with it
what the client does, against Grain 0.2.18 doing the same. The last tests
run the clients' import statements verbatim in a fresh interpreter where
`grain` resolves to grainfn (an import hook maps `grain.X` to `grainfn.X`, the
setup of issue 32's report), and check that `import grainfn` loads none of
these modules.
"""

from __future__ import annotations

import io
import json
import re
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grainfn
import grainfn.experimental
from grainfn.fn import write_tfrecords

pytestmark = pytest.mark.grain

RECORDS = [b"first", b"", bytes(range(256)) * 12, b"x" * 70, b"last record"]
"""Records of every size class: empty, short, one longer than a read-ahead of 1 KiB."""


@pytest.fixture
def tfrecord_file(tmp_path: Path) -> str:
    return write_tfrecords(tmp_path / "data.tfrecord", RECORDS)


def read_to_end(reader: Any) -> tuple[list[bytes], list[int]]:
    """Every record `reader` returns and the `tell()` before each read, up to StopIteration."""
    records, offsets = [], [reader.tell()]
    while True:
        try:
            records.append(next(reader))
        except StopIteration:
            return records, offsets
        offsets.append(reader.tell())


# --- MaxText: grain._src.python.dataset.sources.tfrecord_dataset ----------------------


def test_tfrecord_reader_reads_a_file_as_grains_does(tfrecord_file: str) -> None:
    from grain._src.python.dataset.sources import tfrecord_dataset as theirs

    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    mine, grains = ours._TFRecordReader(tfrecord_file), theirs._TFRecordReader(tfrecord_file)
    assert read_to_end(mine) == read_to_end(grains)
    assert mine.tell() == grains.tell() == Path(tfrecord_file).stat().st_size
    offset = read_to_end(ours._TFRecordReader(tfrecord_file))[1][2]
    mine.seek(offset)
    grains.seek(offset)
    assert next(mine) == next(grains) == RECORDS[2]
    mine.close()
    with pytest.raises(ValueError, match="closed file"):
        next(mine)


def test_tfrecord_dataset_iterator_keeps_grains_state(tfrecord_file: str) -> None:
    from grain._src.python.dataset.sources import tfrecord_dataset as theirs

    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    def run(module: Any) -> tuple[Any, ...]:
        it = module._TFRecordDatasetIterator(tfrecord_file)
        head = [next(it), next(it)]
        state = it.get_state()
        rest = list(it)
        it.set_state(state)
        return head, state, rest, next(it)

    assert run(ours) == run(theirs)
    assert run(ours)[1] == {"reader_offset": len(b"first") + 16 + 16}
    assert issubclass(ours._TFRecordDatasetIterator, grainfn.DatasetIterator)
    assert ours.TFRecordIterDataset is grainfn.experimental.TFRecordIterDataset


def test_tfrecord_dataset_iterator_refuses_a_state_that_is_not_an_offset(
    tfrecord_file: str,
) -> None:
    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    it = ours._TFRecordDatasetIterator(tfrecord_file)
    with pytest.raises(ValueError, match=r"\{'reader_offset': n\}, n an integer >= 0, got"):
        it.set_state({"reader_offset": -3})
    with pytest.raises(ValueError, match=re.escape("got {'next_index': 2}")):
        it.set_state({"next_index": 2})
    assert next(it) == RECORDS[0]  # nothing moved
    it.close()


def test_a_damaged_record_names_the_file_and_offset_and_moves_nothing(tmp_path: Path) -> None:
    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    whole = Path(write_tfrecords(tmp_path / "whole.tfrecord", [b"ab", b"cde"])).read_bytes()
    cut = tmp_path / "cut.tfrecord"
    cut.write_bytes(whole[:-2])  # the second record (at byte 18) lacks 2 bytes
    reader = ours._TFRecordReader(cut)
    assert next(reader) == b"ab"
    message = f"TFRecord file '{cut}' is truncated at byte 18: a record of 3 data bytes"
    with pytest.raises(ValueError, match=message):
        next(reader)
    assert reader.tell() == 18
    bad = tmp_path / "bad.tfrecord"
    bad.write_bytes(b"\x05" + whole[1:])  # a length field that its checksum does not match
    with pytest.raises(ValueError, match="is corrupt at byte 0: the checksum of its length"):
        next(ours._TFRecordReader(bad))


def cloud_storage_classes(tfrecord_dataset: Any, base_iterator: type, store: dict) -> Any:
    """MaxText's way to read TFRecord files from Cloud Storage, with `store` as the bucket.

    As MaxText does: a reader subclass that skips its parent's constructor (which
    opens a local file) and puts a blob's file object in `_reader`; an iterator
    subclass that initialises Grain's `DatasetIterator` itself and takes that
    reader; a `TFRecordIterDataset` subclass whose `__iter__` returns that
    iterator for `self._path`; and a factory picking it for `gs://` paths.
    """

    class BlobReader(tfrecord_dataset._TFRecordReader):
        def __init__(self, path: str) -> None:
            self._reader = io.BytesIO(store[path])

    class BlobIterator(tfrecord_dataset._TFRecordDatasetIterator):
        def __init__(self, path: str) -> None:
            base_iterator.__init__(self)
            self._reader = BlobReader(path)

    class BlobDataset(tfrecord_dataset.TFRecordIterDataset):
        def __iter__(self) -> Any:
            return BlobIterator(self._path)

    def make(path: str) -> Any:
        if path.startswith("gs://"):
            return BlobDataset(path)
        return tfrecord_dataset.TFRecordIterDataset(path)

    return BlobDataset, make


def test_maxtext_reads_cloud_storage_through_subclasses_as_with_grain(tmp_path: Path) -> None:
    import grain
    from grain._src.python.dataset.sources import tfrecord_dataset as theirs

    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    local = write_tfrecords(tmp_path / "local.tfrecord", [b"l0", b"l1", b"l2"])
    store = {
        "gs://bucket/a": Path(write_tfrecords(tmp_path / "a", [b"a0", b"a1"])).read_bytes(),
        "gs://bucket/b": Path(write_tfrecords(tmp_path / "b", RECORDS)).read_bytes(),
    }
    paths = ["gs://bucket/a", local, "gs://bucket/b"]

    def run(library: Any, module: Any) -> tuple[Any, ...]:
        blob_dataset, make = cloud_storage_classes(module, library.DatasetIterator, store)
        it = iter(blob_dataset("gs://bucket/b"))
        first = next(it)
        state = it.get_state()
        rest = list(it)
        it.set_state(state)
        files = library.MapDataset.source(paths).map(make)
        mixed = library.experimental.InterleaveIterDataset(files, cycle_length=2)
        return first, state, rest, next(it), list(mixed.map(len))

    mine = run(grainfn, ours)
    assert mine == run(grain, theirs)
    assert mine[3] == RECORDS[1]


def test_maxtext_cloud_storage_pipeline_resumes_from_its_state(tmp_path: Path) -> None:
    from grainfn._src.python.dataset.sources import tfrecord_dataset as ours

    store = {"gs://bucket/b": Path(write_tfrecords(tmp_path / "b", RECORDS)).read_bytes()}
    blob_dataset, _ = cloud_storage_classes(ours, grainfn.DatasetIterator, store)
    ds = blob_dataset("gs://bucket/b").map(len)
    it = iter(ds)
    assert [next(it), next(it)] == [5, 0]
    state = it.get_state()
    rest = list(it)
    again = iter(ds)
    again.set_state(state)
    assert list(again) == rest == [3072, 70, 11]


# --- axlearn: grain._src.python.data_loader, grain._src.python.dataset.dataset ----------


def test_determine_worker_count_is_the_data_loaders_rule() -> None:
    from grain._src.python import data_loader as theirs

    from grainfn._src.facade.options import available_cores
    from grainfn._src.python import data_loader as ours

    assert ours._determine_worker_count(input_worker_count=3) == 3
    assert theirs._determine_worker_count(input_worker_count=3) == 3
    assert ours._determine_worker_count(input_worker_count=None) == available_cores()
    with pytest.raises(ValueError, match="worker_count must be an integer >= 0, got -1"):
        ours._determine_worker_count(-1)
    assert (ours.DataLoader, ours.DataLoaderIterator) == (
        grainfn.DataLoader,
        grainfn.DataLoaderIterator,
    )


class Proportional:
    """axlearn's proportional slice: positions [start, end) of every `period`, as a subclass."""

    @staticmethod
    def of(base: type) -> Any:
        class ProportionalSlice(base):  # type: ignore[misc, valid-type]
            def __init__(self, parent: Any, *, start: int, end: int, period: int) -> None:
                super().__init__(parent)
                self._start, self._end, self._period = start, end, period
                full, rest = divmod(len(parent), period)
                self._length = full * (end - start) + min(rest, end) - min(rest, start)

            def __len__(self) -> int:
                return self._length

            def __getitem__(self, index: Any) -> Any:
                index %= len(self)
                width = self._end - self._start
                return self._parent[self._start + index // width * self._period + index % width]

        return ProportionalSlice


def test_dataset_module_subclasses_as_axlearn_does() -> None:
    from grain._src.python.dataset import dataset as theirs

    from grainfn._src.python.dataset import dataset as ours

    assert (ours.MapDataset, ours.IterDataset, ours.DatasetIterator) == (
        grainfn.MapDataset,
        grainfn.IterDataset,
        grainfn.DatasetIterator,
    )
    assert ours.MapDataset[int] is not None  # axlearn subclasses dataset.MapDataset[_T]

    def run(module: Any) -> list[int]:
        sliced = Proportional.of(module.MapDataset)(
            module.MapDataset.range(23), start=1, end=3, period=5
        )
        return [int(x) for x in sliced.shuffle(seed=4).to_iter_dataset()]

    assert run(ours) == run(theirs)


def fake_source(module: Any, examples: list[Any], *, repeat: int, seed: int | None) -> Any:
    """axlearn's `fake_grain_source` (input_fake.py): examples as a seeded, shuffled source."""
    ds = module.SourceMapDataset(examples)
    if seed is not None:
        ds = ds.seed(seed)
        ds = ds.shuffle()
    return ds.repeat(num_epochs=repeat)


def test_source_module_builds_axlearns_fake_sources() -> None:
    from grain._src.python.dataset.transformations import source as theirs

    from grainfn._src.python.dataset.transformations import source as ours

    examples = [{"text": i, "ids": [i, i + 1]} for i in range(7)]
    for repeat, seed in [(1, None), (2, None), (3, 123), (1, 5)]:
        mine = list(fake_source(ours, examples, repeat=repeat, seed=seed))
        assert mine == list(fake_source(theirs, examples, repeat=repeat, seed=seed))
        assert len(mine) == 7 * repeat
    mine = fake_source(ours, examples, repeat=2, seed=123)
    assert isinstance(mine, grainfn.MapDataset) and mine[3] == examples[mine[3]["text"]]
    assert issubclass(ours.SourceMapDataset, grainfn.MapDataset)


def test_source_module_ranges_are_grains() -> None:
    from grain._src.python.dataset.transformations import source as theirs

    from grainfn._src.python.dataset.transformations import source as ours

    for args in [(12,), (2, 12), (2, 12, 3), (10, 0, -4)]:
        assert list(ours.RangeMapDataset(*args)) == list(theirs.RangeMapDataset(*args))
        assert len(ours.RangeMapDataset(*args)) == len(theirs.RangeMapDataset(*args))

    def observations(module: Any) -> list[Any]:  # as Grain's own packing tests build them
        ds = module.RangeMapDataset(1, 7).repeat()
        ds = ds.map_with_index(lambda index, value: (index + 1, [value] * value))
        return list(ds[:9].to_iter_dataset())

    assert observations(ours) == observations(theirs)


def test_a_source_subclass_reads_its_source_as_in_grain() -> None:
    import grain
    from grain._src.python.dataset.transformations import source as theirs

    from grainfn._src.python.dataset.transformations import source as ours

    def episodes(library: Any, module: Any) -> list[Any]:
        """A subclass that reads runs of steps of its source (`self._source`) per episode."""

        class Episodes(module.SourceMapDataset):
            def __init__(self, steps: Any, lengths: list[int]) -> None:
                super().__init__(steps)
                self._starts = [sum(lengths[:i]) for i in range(len(lengths))]
                self._lengths = lengths

            def __len__(self) -> int:
                return len(self._lengths)

            def __getitem__(self, index: Any) -> Any:
                if isinstance(index, slice):
                    return self.slice(index)
                start = self._starts[index % len(self)]
                return [self._source[start + j] for j in range(self._lengths[index % len(self)])]

        steps = library.MapDataset.range(10).map(lambda x: x * 10)
        return list(Episodes(steps, [3, 1, 4, 2]).shuffle(seed=2).to_iter_dataset())

    mine = episodes(grainfn, ours)
    assert mine == episodes(grain, theirs)
    assert sorted(mine) == [[0, 10, 20], [30], [40, 50, 60, 70], [80, 90]]


# --- grain._src.python.options, samplers, and transformations --------------------------


def test_options_module_builds_the_options_grainfn_reads() -> None:
    from grainfn._src.python import options as grain_options

    options = grain_options.MultiprocessingOptions(num_workers=2, per_worker_buffer_size=128)
    assert options == grainfn.MultiprocessingOptions(2, 128)
    assert grain_options.ReadOptions is grainfn.ReadOptions


def test_samplers_module_gives_grains_order() -> None:
    from grain._src.python.samplers import IndexSampler as Theirs

    from grainfn._src.python.samplers import IndexSampler

    mine = IndexSampler(num_records=11, shuffle=True, seed=7, num_epochs=2)
    grains = Theirs(num_records=11, shuffle=True, seed=7, num_epochs=2)
    assert [mine[i].record_key for i in range(22)] == [grains[i].record_key for i in range(22)]
    assert IndexSampler is grainfn.samplers.IndexSampler


class Split:
    """A FlatMapTransform that splits a number into its decimal digits (axlearn's fan-out use)."""

    @staticmethod
    def of(base: type) -> Any:
        class Digits(base):  # type: ignore[misc, valid-type]
            max_fan_out = 3

            def flat_map(self, element: Any) -> list[int]:
                return [int(d) for d in str(element)]

        return Digits()


def test_flatmap_module_builds_axlearns_flat_map() -> None:
    import grain
    from grain._src.python.dataset.transformations import flatmap as theirs

    from grainfn._src.python.dataset.transformations import flatmap as ours

    def run(library: Any, module: Any) -> list[int]:
        ds = library.MapDataset.range(95, 105)
        digits = Split.of(library.experimental.FlatMapTransform)
        flat = module.FlatMapMapDataset(parent=ds, transform=digits)
        return [int(x) for x in flat.to_iter_dataset()]

    digits = [int(d) for n in range(95, 105) for d in str(n)]
    assert run(grainfn, ours) == run(grain, theirs) == digits
    assert ours.FlatMapIterDataset is grainfn.experimental.FlatMapIterDataset


def test_prefetch_module_prefetches_in_threads() -> None:
    import grain
    from grain._src.python.dataset.transformations.prefetch import (
        ThreadPrefetchIterDataset as Theirs,
    )

    from grainfn._src.python.dataset.transformations.prefetch import ThreadPrefetchIterDataset

    mine = ThreadPrefetchIterDataset(
        grainfn.MapDataset.range(30).to_iter_dataset().map(lambda x: x * 3),
        prefetch_buffer_size=4,
    )
    grains = Theirs(
        grain.MapDataset.range(30).to_iter_dataset().map(lambda x: x * 3),
        prefetch_buffer_size=4,
    )
    assert list(mine) == list(grains)
    assert ThreadPrefetchIterDataset is grainfn.experimental.ThreadPrefetchIterDataset


def test_zip_module_zips_as_grain() -> None:
    import grain
    from grain._src.python.dataset.transformations.zip import ZipIterDataset as Theirs

    from grainfn._src.python.dataset.transformations.zip import ZipIterDataset

    def parents(library: Any) -> list[Any]:
        return [
            library.MapDataset.range(5).to_iter_dataset(),
            library.MapDataset.range(10, 15).map(str).to_iter_dataset(),
        ]

    assert list(ZipIterDataset(parents(grainfn))) == list(Theirs(parents(grain)))
    assert ZipIterDataset is grainfn.experimental.ZipIterDataset


def test_index_shuffle_module_gives_grains_permutation() -> None:
    from grain._src.python.experimental.index_shuffle.python import (
        index_shuffle_module as theirs,
    )

    from grainfn._src.python.experimental.index_shuffle.python import (
        index_shuffle_module as ours,
    )

    for seed, max_index in [(0, 0), (5, 9), (2**31, 1000)]:
        indices = range(min(max_index + 1, 40))
        mine = [ours.index_shuffle(i, max_index=max_index, seed=seed, rounds=4) for i in indices]
        grains = [
            theirs.index_shuffle(i, max_index=max_index, seed=seed, rounds=4) for i in indices
        ]
        assert mine == grains
    whole = [ours.index_shuffle(i, max_index=99, seed=3, rounds=4) for i in range(100)]
    assert sorted(whole) == list(range(100))


def test_checkpoint_handler_path_holds_grainfns_handler() -> None:
    import grain.checkpoint

    import grainfn.checkpoint
    from grainfn._src.python.checkpoint import handler

    # The path Orbax records for Grain's handler in a checkpoint's metadata.
    recorded = f"{grain.checkpoint.CheckpointHandler.__module__}.CheckpointHandler"
    assert recorded == "grain._src.python.checkpoint.handler.CheckpointHandler"
    assert (handler.CheckpointHandler, handler.CheckpointSave, handler.CheckpointRestore) == (
        grainfn.checkpoint.CheckpointHandler,
        grainfn.checkpoint.CheckpointSave,
        grainfn.checkpoint.CheckpointRestore,
    )


# --- The clients' import statements, with `grain` resolving to grainfn ------------------

ALIAS = textwrap.dedent(
    '''
    import importlib, importlib.abc, importlib.util, json, sys

    class GrainIsGrainfn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        """Serves the module `grain.X` as the module `grainfn.X`."""

        def __init__(self):
            self.specs = {}

        def find_spec(self, name, path=None, target=None):
            if name == "grain" or name.startswith("grain."):
                return importlib.util.spec_from_loader(name, self)
            return None

        def create_module(self, spec):
            module = importlib.import_module("grainfn" + spec.name[len("grain"):])
            self.specs[spec.name] = module.__spec__
            return module

        def exec_module(self, module):
            for name, spec in self.specs.items():
                if spec.name == module.__name__:
                    module.__spec__ = spec  # the import system put the alias's spec there

    sys.meta_path.insert(0, GrainIsGrainfn())
    '''
)

CLIENT_IMPORTS = {
    # MaxText, src/maxtext/input_pipeline/input_pipeline_utils.py (issue 32).
    "maxtext": (
        "import grain.python as grain\n"
        "from grain._src.python.dataset.sources.tfrecord_dataset import _TFRecordReader, "
        "_TFRecordDatasetIterator\n"
        "from grain.experimental import FlatMapTransform, TFRecordIterDataset",
        {
            "_TFRecordReader": "grainfn._src.formats.tfrecord_reader.TFRecordReader",
            "_TFRecordDatasetIterator": "grainfn._src.facade.tfrecord_dataset.TFRecordFileIterator",
            "TFRecordIterDataset": "grainfn.experimental.TFRecordIterDataset",
            "grain.DatasetIterator": "grainfn.DatasetIterator",
        },
    ),
    # A MaxText fork's _grain_data_processing.py.
    "options": (
        "from grain._src.python import options as grain_options",
        {"grain_options.MultiprocessingOptions": "grainfn.MultiprocessingOptions"},
    ),
    # axlearn, axlearn/common/input_grain.py.
    "axlearn": (
        "from grain._src.python.data_loader import _determine_worker_count\n"
        "from grain._src.python.dataset import dataset as dataset_base",
        {
            "_determine_worker_count": "grainfn._src.facade.options.determine_worker_count",
            "dataset_base.MapDataset": "grainfn.MapDataset",
        },
    ),
    # axlearn's earlier input_grain_lm.py.
    "flatmap": (
        "from grain._src.python.dataset.transformations import flatmap",
        {"flatmap.FlatMapMapDataset": "grainfn.experimental.FlatMapMapDataset"},
    ),
    "dataset": (
        "from grain._src.python.dataset.dataset import DatasetIterator",
        {"DatasetIterator": "grainfn.DatasetIterator"},
    ),
    "samplers": (
        "from grain._src.python.samplers import IndexSampler",
        {"IndexSampler": "grainfn.IndexSampler"},
    ),
    "prefetch": (
        "from grain._src.python.dataset.transformations.prefetch import ThreadPrefetchIterDataset",
        {"ThreadPrefetchIterDataset": "grainfn.experimental.ThreadPrefetchIterDataset"},
    ),
    "zip": (
        "from grain._src.python.dataset.transformations.zip import ZipIterDataset",
        {"ZipIterDataset": "grainfn.experimental.ZipIterDataset"},
    ),
    # axlearn, axlearn/common/input_fake.py (fake_grain_source, for its tests).
    "source": (
        "from grain._src.python.dataset.transformations import source",
        {
            "source.SourceMapDataset": "grainfn._src.facade.dataset.SourceMapDataset",
            "source.RangeMapDataset": "grainfn._src.facade.dataset.RangeMapDataset",
        },
    ),
    "index_shuffle": (
        "from grain._src.python.experimental.index_shuffle.python import "
        "index_shuffle_module as index_shuffle",
        {"index_shuffle.index_shuffle": "grainfn.experimental.index_shuffle"},
    ),
    # Orbax imports the handler by the path it recorded in the checkpoint's metadata.
    "checkpoint": (
        "import importlib\n"
        "handler = importlib.import_module('grain._src.python.checkpoint.handler')",
        {"handler.CheckpointHandler": "grainfn.checkpoint.CheckpointHandler"},
    ),
}

CHECK = textwrap.dedent(
    """
    import grainfn, grainfn.experimental, grainfn.checkpoint
    import grainfn._src.formats.tfrecord_reader, grainfn._src.facade.tfrecord_dataset
    import grainfn._src.facade.options

    def value(expression, names):
        head, *rest = expression.split(".")
        found = names[head] if head in names else importlib.import_module(head)
        for part in rest:
            found = getattr(found, part)
        return found

    results = {}
    for client, (statement, expected) in json.loads(sys.argv[1]).items():
        names = {}
        try:
            exec(statement, names)
        except Exception as error:
            results[client] = f"{type(error).__name__}: {error}"
            continue
        results[client] = [e for e, want in expected.items()
                           if value(e, names) is not value(want, {})]
    results["grain is grainfn"] = sys.modules["grain"] is grainfn
    print(json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def aliased_imports() -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", ALIAS + CHECK, json.dumps(CLIENT_IMPORTS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    results: dict[str, Any] = json.loads(result.stdout)
    assert results.pop("grain is grainfn") is True
    return results


@pytest.mark.parametrize("client", sorted(CLIENT_IMPORTS))
def test_client_imports_run_with_grain_resolving_to_grainfn(
    client: str, aliased_imports: dict[str, Any]
) -> None:
    assert aliased_imports[client] == []  # every imported name is the grainfn object


def test_import_grainfn_loads_no_grain_internal_path() -> None:
    code = (
        "import sys, grainfn, grainfn.python, grainfn.experimental\n"
        "ds = grainfn.MapDataset.range(3).to_iter_dataset()\n"
        "print(list(ds), sorted(m for m in sys.modules if m.startswith('grainfn._src.python')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["[0,", "1,", "2]", "[]"], result.stderr


def test_numpy_records_survive_the_reader(tmp_path: Path) -> None:
    """MaxText parses tf.train.Example bytes from the reader: bytes come back bit for bit."""
    from grainfn._src.python.dataset.sources.tfrecord_dataset import _TFRecordReader

    arrays = [np.arange(n, dtype=np.float32) for n in (0, 1, 1000)]
    path = write_tfrecords(tmp_path / "arrays.tfrecord", [a.tobytes() for a in arrays])
    read = [np.frombuffer(r, np.float32) for r in _TFRecordReader(path)]
    assert all(np.array_equal(a, b) for a, b in zip(arrays, read, strict=True))

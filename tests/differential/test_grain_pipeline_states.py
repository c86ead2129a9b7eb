"""States Grain 0.2.18 writes for common pipelines, restored into the same grainfn pipeline.

Three pipelines of published code whose Grain states grainfn reads: a
DataLoader over an `ArrayRecordDataSource` (MaxDiffusion's loader; Grain names
the source by a SHA-1 of its paths), `ParquetIterDataset` alone, over several
files, and MaxText's interleave of Parquet files under a window shuffle, and
concat-then-split packing (MaxText, torchtitan). Grain runs the pipeline and
takes its state at several points (mid epoch, mid row group, mid sequence);
grainfn's iterator of the same pipeline, set to that state, yields Grain's
continuation, leaf by leaf.
"""

from __future__ import annotations

import itertools
import json
import os
from pathlib import Path
from typing import Any

import grain
import numpy as np
import orbax.checkpoint as ocp
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
from array_record.python.array_record_module import ArrayRecordWriter

import grainfn
import grainfn.checkpoint
from grainfn._src.grain_states.loaders import hash_of_paths

pytestmark = pytest.mark.grain


def assert_same_leaves(ours: list[Any], theirs: list[Any]) -> None:
    """Equal element by element and leaf by leaf: structure, type, dtype, shape and values."""
    assert len(ours) == len(theirs)
    for index, (a, b) in enumerate(zip(ours, theirs)):
        assert_same_leaf(a, b, f"element {index}")


def assert_same_leaf(a: Any, b: Any, where: str) -> None:
    if isinstance(b, dict):
        assert isinstance(a, dict) and sorted(a) == sorted(b), where
        for key in b:
            assert_same_leaf(a[key], b[key], f"{where}[{key!r}]")
    elif isinstance(b, (list, tuple)):
        assert type(a) is type(b) and len(a) == len(b), where
        for i, (x, y) in enumerate(zip(a, b)):
            assert_same_leaf(x, y, f"{where}[{i}]")
    elif isinstance(b, (np.ndarray, np.generic)):
        assert type(a) is type(b) and a.dtype == b.dtype and a.shape == b.shape, where
        np.testing.assert_array_equal(a, b, err_msg=where)
    else:
        assert type(a) is type(b) and a == b, where


def continues_grain(build: Any, taken: int, limit: int | None = None) -> None:
    """Grain's state after `taken` elements, set on grainfn's iterator, gives Grain's rest."""
    theirs = iter(build(grain))
    list(itertools.islice(theirs, taken))
    state = theirs.get_state()  # a dataset's dict as a checkpoint file holds it; a loader's bytes
    state = state if isinstance(state, bytes) else json.loads(json.dumps(state))
    ours = iter(build(grainfn))
    ours.set_state(state)
    assert_same_leaves(list(itertools.islice(ours, limit)), list(itertools.islice(theirs, limit)))


# -- ParquetIterDataset: {"row_group": g, "index_within_row_group": r}.


@pytest.fixture(scope="module")
def parquet_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Three files of 10, 13 and 16 rows in row groups of 4, with ints, text and lists."""
    folder = tmp_path_factory.mktemp("parquet")
    paths = []
    for f in range(3):
        rows = 10 + 3 * f
        table = pa.table(
            {
                "id": np.arange(rows) + 100 * f,
                "text": [f"file {f} row {i}" for i in range(rows)],
                "tokens": [list(range(i % 5 + 1)) for i in range(rows)],
            }
        )
        path = str(folder / f"part-{f}.parquet")
        pq.write_table(table, path, row_group_size=4)
        paths.append(path)
    return paths


@pytest.mark.parametrize("taken", [0, 1, 3, 4, 5, 8, 9, 10])  # mid and at row-group ends, the end
def test_a_parquet_file_state_continues_in_grainfn(parquet_files: list[str], taken: int) -> None:
    continues_grain(lambda m: m.experimental.ParquetIterDataset(parquet_files[0]), taken)


@pytest.mark.parametrize("taken", [0, 2, 7, 20, 30, 36, 39])
def test_a_state_of_several_parquet_files_continues_in_grainfn(
    parquet_files: list[str], taken: int
) -> None:
    continues_grain(lambda m: m.experimental.ParquetIterDataset(parquet_files), taken)


def maxtext_parquet(module: Any, paths: list[str]) -> Any:
    """MaxText's Parquet pipeline: shuffled files, an interleave of them, a window shuffle."""
    files = module.MapDataset.source(paths).shuffle(seed=3).repeat(2)
    files = files[0::1]  # each host's share of the files (one host here)
    datasets = files.map(module.experimental.ParquetIterDataset)
    rows = module.experimental.InterleaveIterDataset(datasets, cycle_length=len(datasets))
    rows = module.experimental.WindowShuffleIterDataset(rows, window_size=7, seed=3)
    return rows.map(lambda row: {**row, "tokens": np.resize(row["tokens"], 4)}).batch(3)


@pytest.mark.parametrize("taken", [0, 1, 5, 7, 13, 26])  # 7 batches: 3 windows; then epoch 2
def test_maxtexts_parquet_interleave_under_a_window_shuffle_continues_in_grainfn(
    parquet_files: list[str], taken: int
) -> None:
    continues_grain(lambda m: maxtext_parquet(m, parquet_files), taken)


@pytest.mark.parametrize("length", [20, 18])  # full windows only; a short last window
@pytest.mark.parametrize("taken", [3, 5, 10, 18, 20])
def test_a_window_shuffle_state_at_the_end_of_a_window_continues_in_grainfn(
    length: int, taken: int
) -> None:
    # Grain's state there names the window just done (its start, and all its elements
    # out) with the next window's number; grainfn reads where the next window starts.
    def windows(module: Any) -> Any:
        rows = module.MapDataset.range(length).to_iter_dataset().filter(lambda x: x % 7)
        return module.experimental.WindowShuffleIterDataset(rows, window_size=5, seed=7)

    continues_grain(windows, taken)


# -- ConcatThenSplitIterDataset: {"parent_state", "remainder_slices", "elements_from_...}.


def document(i: int) -> dict[str, np.ndarray]:
    n = (i * 7) % 11 + 1
    return {
        "inputs": np.arange(n, dtype=np.int32) + 100 * i,
        "targets": np.arange(n, dtype=np.int32) - 100 * i,
        "doc": np.array([i], np.int32),
    }


def full_length_every_third(element: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every third document stretched to the row length: rows queued whole, mid-round states."""
    if int(element["targets"][0]) % 3:
        return element
    return {key: np.resize(value, 8) for key, value in element.items()}


PACKINGS: dict[str, dict[str, Any]] = {
    "two features": {"length_struct": {"inputs": 8, "targets": 8}},
    "full-length rows kept whole": {
        "length_struct": {"inputs": 8, "targets": 8},
        "split_full_length_features": False,
    },
    "a meta feature": {
        "length_struct": {"inputs": 8, "targets": 8, "doc": 8},
        "meta_features": {"doc"},
    },
    "BOS": {"length_struct": {"inputs": 8, "targets": 8}, "bos_features": {"inputs"}},
}


def concat_then_split(module: Any, name: str) -> Any:
    options = dict(PACKINGS[name])
    features = set(options["length_struct"])
    docs = module.MapDataset.range(24).seed(2).shuffle().map(document)
    docs = docs.map(lambda d: {key: value for key, value in d.items() if key in features})
    if name == "full-length rows kept whole":
        docs = docs.map(full_length_every_third)
    if "bos_features" in options:
        options["bos_handling"] = module.experimental.BOSHandling.REPLACE_FIRST_TOKEN_WITH_BOS
        options["bos_token_id"] = 0
    return module.experimental.ConcatThenSplitIterDataset(docs.to_iter_dataset(), **options)


@pytest.mark.parametrize("name", PACKINGS)
def test_a_concat_then_split_state_continues_in_grainfn_after_every_row(name: str) -> None:
    rows = list(concat_then_split(grain, name))
    assert_same_leaves(list(concat_then_split(grainfn, name)), rows)
    cut = 0
    for taken in range(len(rows) + 1):  # mid sequence, mid round, at the end
        theirs = iter(concat_then_split(grain, name))
        list(itertools.islice(theirs, taken))
        state = json.loads(json.dumps(theirs.get_state()))
        cut += any(start > 0 for start, _ in state["remainder_slices"].values())
        ours = iter(concat_then_split(grainfn, name))
        ours.set_state(state)
        assert_same_leaves(list(ours), rows[taken:])
    assert cut  # some states were taken with a document cut between rows


def test_a_concat_then_split_state_taken_mid_round_names_the_rows_returned() -> None:
    theirs = iter(concat_then_split(grain, "full-length rows kept whole"))
    counts = []
    for _ in theirs:
        counts.append(theirs.get_state()["elements_from_buffer_after_checkpoint"])
    assert max(counts) > 1  # rows of one round: the state counts them from its start


def maxtext_packed(module: Any, paths: list[str]) -> Any:
    """MaxText's pretraining input: Parquet rows under a window shuffle, packed, batched."""
    files = module.MapDataset.source(paths).map(module.experimental.ParquetIterDataset)
    rows = module.experimental.InterleaveIterDataset(files, cycle_length=2)
    rows = module.experimental.WindowShuffleIterDataset(rows, window_size=5, seed=1)
    docs = rows.map(lambda row: {"inputs": row["tokens"], "targets": row["tokens"] + 1})
    packed = module.experimental.ConcatThenSplitIterDataset(
        docs, length_struct={"inputs": 6, "targets": 6}
    )
    return packed.batch(2, drop_remainder=True)


@pytest.mark.parametrize("taken", [0, 1, 3, 7])
def test_maxtexts_packed_parquet_pipeline_continues_in_grainfn(
    parquet_files: list[str], taken: int
) -> None:
    continues_grain(lambda m: maxtext_packed(m, parquet_files), taken)


def test_a_malformed_grain_concat_then_split_state_is_refused_naming_the_field() -> None:
    ours = iter(concat_then_split(grainfn, "two features"))
    state = {
        "parent_state": {"next_index": 2},
        "remainder_slices": {"inputs": [3, 1], "targets": [-1, -1]},
        "elements_from_buffer_after_checkpoint": 0,
    }
    with pytest.raises(ValueError, match=r"remainder_slices\['inputs'\] must be a slice"):
        ours.set_state(state)
    state["remainder_slices"] = {"inputs": [-1, -1]}
    with pytest.raises(ValueError, match=r"must map the token features \['inputs', 'targets'\]"):
        ours.set_state(state)


# -- A DataLoader over an ArrayRecordDataSource: "ArrayRecordDataSource(hash_of_paths=<sha1>)".


@pytest.fixture(scope="module")
def array_record_files(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """Three ArrayRecord files of 7, 8 and 9 JSON records, written by array_record itself."""
    folder = tmp_path_factory.mktemp("array_record")
    paths = []
    for f in range(3):
        path = str(folder / f"images-{f:05d}-of-00003.array_record")
        writer = ArrayRecordWriter(path, "group_size:1")
        for i in range(7 + f):
            writer.write(json.dumps({"id": 100 * f + i, "pixels": [i, f, i * f]}).encode())
        writer.close()
        paths.append(path)
    return paths


def parse(record: bytes) -> dict[str, np.ndarray]:
    features = json.loads(record)
    return {"id": np.int32(features["id"]), "pixels": np.asarray(features["pixels"], np.float32)}


class GrainParse(grain.transforms.Map):
    def map(self, record: bytes) -> dict[str, np.ndarray]:
        return parse(record)


class OurParse(grainfn.transforms.Map):
    def map(self, record: bytes) -> dict[str, np.ndarray]:
        return parse(record)


def maxdiffusion_loader(module: Any, paths: list[str], shard: int = 1) -> Any:
    """MaxDiffusion's loader: an ArrayRecord source, a shuffled sampler per host, parse, batch."""
    source = module.sources.ArrayRecordDataSource(paths)
    sampler = module.samplers.IndexSampler(
        num_records=len(source),
        shard_options=module.sharding.ShardOptions(shard, 2, drop_remainder=True),
        shuffle=True,
        num_epochs=2,
        seed=7,
    )
    parse_op = GrainParse() if module is grain else OurParse()
    return module.DataLoader(
        data_source=source,
        sampler=sampler,
        operations=[parse_op, module.transforms.Batch(2, drop_remainder=True)],
        worker_count=0,
    )


def test_grain_names_an_array_record_source_by_the_sha1_of_its_paths(
    array_record_files: list[str],
) -> None:
    written = repr(grain.sources.ArrayRecordDataSource(array_record_files))
    assert written == f"ArrayRecordDataSource(hash_of_paths={hash_of_paths(array_record_files)})"


@pytest.mark.parametrize("taken", [0, 1, 3, 6, 8, 11])  # mid epoch, at its end (6), the next
def test_a_grain_dataloader_state_over_array_records_continues_in_grainfn(
    array_record_files: list[str], taken: int
) -> None:
    continues_grain(lambda m: maxdiffusion_loader(m, array_record_files), taken)


def test_paths_grain_was_given_absolute_name_the_same_files_given_relative(
    array_record_files: list[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    theirs = iter(maxdiffusion_loader(grain, array_record_files))
    list(itertools.islice(theirs, 4))
    state = theirs.get_state()
    monkeypatch.chdir(os.path.dirname(array_record_files[0]))
    relative = [os.path.basename(path) for path in array_record_files]
    ours = iter(maxdiffusion_loader(grainfn, relative))
    ours.set_state(state)
    assert_same_leaves(list(ours), list(theirs))


def test_an_orbax_checkpoint_of_grains_array_record_loader_restores_into_grainfn(
    array_record_files: list[str], tmp_path: Path
) -> None:
    theirs = iter(maxdiffusion_loader(grain, array_record_files))
    list(itertools.islice(theirs, 5))
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(5, args=grain.checkpoint.CheckpointSave(theirs))
        manager.wait_until_finished()
    expected = list(theirs)
    ours = iter(maxdiffusion_loader(grainfn, array_record_files))
    with ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(5, args=grainfn.checkpoint.CheckpointRestore(ours))
    assert_same_leaves(list(restored), expected)


def test_a_grain_state_over_other_array_record_files_is_refused_naming_both_hashes(
    array_record_files: list[str],
) -> None:
    theirs = iter(maxdiffusion_loader(grain, array_record_files[::-1]))
    next(theirs)
    ours = iter(maxdiffusion_loader(grainfn, array_record_files))
    reordered, ordered = hash_of_paths(array_record_files[::-1]), hash_of_paths(array_record_files)
    with pytest.raises(ValueError, match=rf"SHA-1 of its paths, {reordered}.*hash to {ordered}"):
        ours.set_state(theirs.get_state())


def test_an_interleave_state_holding_future_states_is_refused(parquet_files: list[str]) -> None:
    # Grain's elastic set_shard_states keeps states of files not opened yet: grainfn opens
    # every file at its start, so such a state does not determine grainfn's.
    theirs = iter(grain.experimental.ParquetIterDataset(parquet_files))
    next(theirs)
    state = theirs.get_state()
    state["future_states"] = {3: {"row_group": 1, "index_within_row_group": 2}}
    ours = iter(grainfn.experimental.ParquetIterDataset(parquet_files))
    with pytest.raises(ValueError, match=r"future_states holds the states of datasets"):
        ours.set_state(state)

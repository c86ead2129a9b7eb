"""grain.experimental.ElasticIterator: its two modes, its states, and Orbax checkpoints.

The multi-process scenario (real `jax.distributed` processes, 4 -> 2 -> 1) is
in tests/elastic/test_multihost.py; here one process plays every host, which the state files
allow, since a restore reads the files of all the processes that saved.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import orbax.checkpoint as ocp
import pytest

import grainfn as grain
import grainfn.checkpoint
from grainfn._src.checkpoint import files

ElasticIterator = grain.experimental.ElasticIterator


def pipeline() -> grain.IterDataset[Any]:
    """Filter, a named mix and an iter-level map: what Grain's ElasticIterator cannot take."""
    kept = grain.MapDataset.range(3000).seed(4).shuffle().to_iter_dataset().filter(lambda x: x % 3)
    other = grain.MapDataset.range(10000, 12000).to_iter_dataset().map(lambda x: x * 2)
    return grain.IterDataset.mix({"kept": kept, "other": other}, {"kept": 2, "other": 1})


def take(iterators: list[Any], steps: int) -> list[np.ndarray]:
    return [np.concatenate([next(it) for it in iterators]) for _ in range(steps)]


def hosts(count: int, **kwargs: Any) -> list[Any]:
    return [
        ElasticIterator(pipeline(), 24, grain.ShardOptions(h, count), **kwargs)
        for h in range(count)
    ]


def test_every_host_count_yields_its_slice_of_the_same_global_batches() -> None:
    reference = take(hosts(1, num_logical_shards=12), 15)
    for count in (2, 3, 4, 6, 12):
        iterators = hosts(count, num_logical_shards=12)
        assert {len(next(iter(it))) for it in iterators} == {24 // count}
        got = take(iterators, 14)
        np.testing.assert_array_equal(np.stack(got), np.stack(reference[1:]))


def test_a_run_moves_from_four_hosts_to_three_to_one(tmp_path: Path) -> None:
    reference = take(hosts(1, num_logical_shards=12), 30)
    four = hosts(4, num_logical_shards=12)
    got = take(four, 10)
    (tmp_path / "a").mkdir()
    for h, it in enumerate(four):
        files.write_state(tmp_path / "a", it.get_state(), (h, 4))
    three = hosts(3)  # num_logical_shards=None: taken from the checkpoint
    for it in three:
        files.restore(it, tmp_path / "a")
    got += take(three, 10)
    (tmp_path / "b").mkdir()
    for h, it in enumerate(three):
        files.write_state(tmp_path / "b", it.get_state(), (h, 3))
    [one] = hosts(1)
    files.restore(one, tmp_path / "b")
    got += take([one], 10)
    np.testing.assert_array_equal(np.stack(got), np.stack(reference))


def test_an_orbax_checkpoint_of_one_host_restores_on_two(tmp_path: Path) -> None:
    reference = take(hosts(1, num_logical_shards=4), 8)
    [one] = hosts(1, num_logical_shards=4)
    got = take([one], 3)
    with ocp.CheckpointManager(tmp_path) as manager:
        manager.save(3, args=grainfn.checkpoint.CheckpointSave(one))
        manager.wait_until_finished()
        two = hosts(2)
        for it in two:
            restored = manager.restore(3, args=grainfn.checkpoint.CheckpointRestore(it))
            assert restored is it
    got += take(two, 5)
    np.testing.assert_array_equal(np.stack(got), np.stack(reference))


def test_a_missing_process_file_is_an_error_naming_it(tmp_path: Path) -> None:
    two = hosts(2, num_logical_shards=4)
    take(two, 2)
    for h, it in enumerate(two):
        files.write_state(tmp_path, it.get_state(), (h, 2))
    (tmp_path / "process_1-of-2.json").unlink()
    [one] = hosts(1)
    with pytest.raises(ValueError, match=r"Logical shard 2 of 4 .* process_1-of-2.json"):
        files.restore(one, tmp_path)


def test_restoring_needs_a_host_count_that_divides_the_logical_shards(tmp_path: Path) -> None:
    [one] = hosts(1, num_logical_shards=4)
    files.write_state(tmp_path, one.get_state(), (0, 1))
    three = ElasticIterator(pipeline(), 24, grain.ShardOptions(0, 3))
    with pytest.raises(ValueError, match="4 logical shards allow 1, 2 or 4 hosts"):
        files.restore(three, tmp_path)
    fixed = ElasticIterator(pipeline(), 24, grain.ShardOptions(0, 2), num_logical_shards=6)
    with pytest.raises(
        ValueError, match="saved with num_logical_shards=4, this iterator has num_logical_shards=6"
    ):
        fixed.set_state(one.get_state())


def test_workers_per_host_change_nothing() -> None:
    reference = take(hosts(2, num_logical_shards=4), 6)
    options = grain.MultiprocessingOptions(num_workers=2)
    with_workers = hosts(2, num_logical_shards=4, multiprocessing_options=options)
    try:
        np.testing.assert_array_equal(np.stack(take(with_workers, 6)), np.stack(reference))
    finally:
        for it in with_workers:
            it.close()


def test_a_map_dataset_with_logical_shards_reads_it_in_order() -> None:
    ds = grain.MapDataset.range(40).seed(1).shuffle()
    it = ElasticIterator(ds, 8, grain.ShardOptions(0, 1), num_logical_shards=4)
    batches = [b.tolist() for b in it]
    assert len(batches) == 5
    assert sorted(x for b in batches for x in b) == list(range(40))
    assert batches[0][:2] == [ds[0], ds[4]]


def test_bad_arguments_name_the_value() -> None:
    with pytest.raises(ValueError, match="Global batch size 5 is not divisible by shard count 2"):
        ElasticIterator(grain.MapDataset.range(10), 5, grain.ShardOptions(0, 2))
    with pytest.raises(TypeError, match=r"shard_options must be a grainfn\.ShardOptions"):
        ElasticIterator(grain.MapDataset.range(10), 4, (0, 1))  # type: ignore[arg-type]
    with pytest.raises(ValueError, match="global_batch_size 6 is not a multiple of"):
        ElasticIterator(pipeline(), 6, grain.ShardOptions(0, 1), num_logical_shards=4)
    with pytest.raises(TypeError, match="takes a MapDataset or an IterDataset, got list"):
        ElasticIterator([1, 2], 4, grain.ShardOptions(0, 1))  # type: ignore[arg-type]


def test_the_iterator_is_its_own_iterator_in_either_mode() -> None:
    logical = ElasticIterator(pipeline(), 4, grain.ShardOptions(1, 2), num_logical_shards=4)
    assert iter(logical) is logical
    assert logical.layout.num_logical_shards == 4 and logical.layout.rows == range(2, 4)
    logical.start_prefetch()
    with logical as same:
        assert len(next(same)) == 2
    with pytest.raises(ValueError):
        next(logical)  # closed by the with block
    grain_mode = ElasticIterator(grain.MapDataset.range(8), 4, grain.ShardOptions(0, 1))
    assert iter(grain_mode) is grain_mode
    assert next(grain_mode).tolist() == [0, 1, 2, 3]
    assert grain_mode.get_state() == {"global_next_index": 4}
    with pytest.raises(AttributeError, match=r"ElasticIterator\.layout is for logical shards"):
        grain_mode.layout  # noqa: B018
    assert repr(grain_mode).startswith("ElasticIterator(global_next_index=4, host 0 of 1")


def test_bad_options_name_the_value_in_either_mode() -> None:
    for ds in (grain.MapDataset.range(8), pipeline()):
        with pytest.raises(TypeError, match="multiprocessing_options must be a grainfn"):
            ElasticIterator(ds, 4, grain.ShardOptions(0, 1), multiprocessing_options=2)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match=r"read_options must be a grainfn\.ReadOptions, got 3"):
        ElasticIterator(grain.MapDataset.range(8), 4, grain.ShardOptions(0, 1), read_options=3)  # type: ignore[arg-type]


def test_grain_mode_hosts_agree_on_one_state(tmp_path: Path) -> None:
    ds = grain.MapDataset.range(64).seed(2).shuffle()
    two = [ElasticIterator(ds, 8, grain.ShardOptions(h, 2)) for h in range(2)]
    take(two, 3)
    assert two[0].get_state() == two[1].get_state() == {"global_next_index": 24}
    for h, it in enumerate(two):
        files.write_state(tmp_path, it.get_state(), (h, 2))
    one = ElasticIterator(ds, 8, grain.ShardOptions(0, 1))
    files.restore(one, tmp_path)
    assert next(one).tolist() == [ds[i] for i in range(24, 32)]
    files.write_state(tmp_path, {"global_next_index": 8}, (1, 2))
    with pytest.raises(ValueError, match=r"State files .*process_0-of-2\.json and .*differ"):
        files.restore(one, tmp_path)


def test_the_filter_check_of_grain_iterators_applies_to_every_logical_shard() -> None:
    rare = grain.MapDataset.range(20000).to_iter_dataset().filter(lambda x: x % 100 == 0)
    options = grain.experimental.DatasetOptions(filter_raise_threshold_ratio=0.5)
    checked = grain.experimental.WithOptionsIterDataset(rare, options)
    it = ElasticIterator(checked, 4, grain.ShardOptions(0, 1), num_logical_shards=2)
    with pytest.raises(ValueError, match="filter"):
        list(it)

"""The DataLoader-side code examples of Grain's documentation, run with grainfn.

Companion of the Dataset API modules of this folder (test_grain_*.py), with
the same rules (see shared.py): each test runs an example of
/work/shared/reference/ as written, with `import grainfn as grain`; names an
example leaves undefined (`my_source`, `decode_proto`, `train_step`, ...) are
small stand-ins defined next to it; where the output is not shown, the test
asserts a property of it and, marked `grain`, that Grain 0.2.18 gives the same
for the same code (with `worker_count=0` on Grain's side where the example
starts workers: grainfn's output does not depend on the worker count, and
equals Grain's without workers).

Examples covered here: overview "ShardOptions / ShardByJaxProcess /
NoSharding", "IndexSampler", the DataLoader of "Transformation base classes";
quick reference "Basic Structure", the `IndexSampler` and sharding examples,
the custom transforms passed to a DataLoader, and the training loop (with a
plain-JAX step in place of Flax NNX and optax, which are not dependencies).
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import grainfn as grain

from reference.shared import quick_reference_ops


def assert_same_batches(ours: list[Any], theirs: list[Any]) -> None:
    assert len(ours) == len(theirs)
    for a, b in zip(ours, theirs):
        if isinstance(b, dict):
            assert list(a) == list(b)
            for key in b:
                assert a[key].dtype == b[key].dtype
                np.testing.assert_array_equal(a[key], b[key])
        else:
            assert a.dtype == b.dtype
            np.testing.assert_array_equal(a, b)


# ---------------------------------------------------------------------------
# grain-api-overview.md


@pytest.mark.grain
def test_overview_shard_options() -> None:
    import grain as real_grain

    source = list(range(100, 110))

    def example(grain: Any) -> tuple[Any, ...]:
        # No sharding (single process)
        shard = grain.sharding.NoSharding()
        # Shard by JAX process (multi-host training)
        shard = grain.sharding.ShardByJaxProcess(drop_remainder=True)
        # Manual sharding
        shard = grain.sharding.ShardOptions(shard_index=1, shard_count=4, drop_remainder=False)
        # Use in Dataset pipeline
        ds = grain.MapDataset.source(source).shuffle(seed=0)[
            shard.shard_index :: shard.shard_count
        ]  # slice-based sharding
        # Or delegate to IndexSampler / DataLoader
        sampler = grain.samplers.IndexSampler(
            num_records=len(source),
            shard_options=grain.sharding.ShardByJaxProcess(),
            shuffle=True,
            seed=0,
        )
        return list(ds), repr(sampler), [sampler[g].record_key for g in range(20)]

    ours = example(grain)
    assert sorted(ours[0]) == sorted(set(ours[0])) and len(ours[0]) == 3
    assert ours[1].startswith("IndexSampler(num_records=10, shard_options=ShardByJaxProcess(")
    assert sorted(ours[2][:10]) == source[:0] + list(range(10))
    assert ours == example(real_grain)
    # The overview writes the names at the top level (grain.NoSharding, ...); so does grainfn.
    assert grain.ShardOptions is grain.sharding.ShardOptions
    assert grain.NoSharding() == grain.sharding.NoSharding()
    assert grain.ShardByJaxProcess(drop_remainder=True).drop_remainder


@pytest.mark.grain
def test_overview_index_sampler() -> None:
    import grain as real_grain

    def example(grain: Any) -> tuple[str, str]:
        # Single-epoch sequential
        sampler = grain.samplers.IndexSampler(
            num_records=60000,
            shard_options=grain.sharding.NoSharding(),
            shuffle=False,
            num_epochs=1,
        )
        first = repr(sampler)
        # Infinite shuffled training across 8 JAX hosts
        sampler = grain.samplers.IndexSampler(
            num_records=1_000_000,
            shard_options=grain.sharding.ShardByJaxProcess(),
            shuffle=True,
            num_epochs=None,
            seed=42,
        )
        return first, repr(sampler)

    first, second = example(grain)
    assert second.startswith("IndexSampler(num_records=1000000, shard_options=ShardByJaxProcess(")
    assert (first, second) == example(real_grain)
    sampler = grain.IndexSampler(num_records=60000, shard_options=grain.NoSharding(), num_epochs=1)
    assert len(sampler) == 60000 and sampler[59999].record_key == 59999


class ImageSource:
    """Stand-in `image_source`: 10 images of 240x256x3 uint8, a different one per index."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> np.ndarray:
        return np.random.default_rng(index).integers(0, 256, (240, 256, 3), dtype=np.uint8)

    def __repr__(self) -> str:
        return "ImageSource()"


def transformation_classes_loader(grain: Any, worker_count: int) -> list[Any]:
    @dataclasses.dataclass
    class RandomCrop(grain.transforms.RandomMap):
        crop_size: int = 224

        def random_map(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            h, w = image.shape[:2]
            top = rng.integers(0, h - self.crop_size + 1)
            left = rng.integers(0, w - self.crop_size + 1)
            return image[top : top + self.crop_size, left : left + self.crop_size]

    image_source = ImageSource()
    sampler = grain.samplers.IndexSampler(
        len(image_source),
        shuffle=True,
        num_epochs=1,
        seed=3,
        shard_options=grain.sharding.NoSharding(),
    )
    loader = grain.DataLoader(
        data_source=image_source,
        sampler=sampler,
        operations=[RandomCrop(crop_size=224), grain.transforms.Batch(4)],
        worker_count=worker_count,
    )
    return list(loader)


@pytest.mark.grain
def test_overview_transformation_base_classes_data_loader() -> None:
    import grain as real_grain

    # The overview's batch size is 32 and worker count 4; 4-image batches keep it small.
    batches = transformation_classes_loader(grain, worker_count=4)
    assert [b.shape for b in batches] == [(4, 224, 224, 3)] * 2 + [(2, 224, 224, 3)]
    assert_same_batches(batches, transformation_classes_loader(real_grain, worker_count=0))


# ---------------------------------------------------------------------------
# grain-quick-reference-jax.md


class Records:
    """Stand-in source of dict records with an image and a label."""

    def __init__(self, count: int) -> None:
        self.count = count

    def __len__(self) -> int:
        return self.count

    def __getitem__(self, idx: int) -> dict[str, Any]:
        image = ((np.arange(12).reshape(3, 4) + 7 * idx) % 256).astype(np.uint8)
        return {"image": image, "label": idx % 10}

    def __repr__(self) -> str:
        return f"Records({self.count})"


def quick_reference_loader(grain: Any, my_source: Any, worker_count: int = 0) -> Any:
    ops = quick_reference_ops(grain)
    # In your distributed setup
    try:
        # Auto-detects from JAX environment
        shard_options = grain.ShardByJaxProcess(drop_remainder=True)
    except ImportError:  # Fallback for single process
        shard_options = grain.ShardOptions(shard_index=0, shard_count=1, drop_remainder=True)
    sampler = grain.IndexSampler(
        num_records=len(my_source),
        shard_options=shard_options,  # See Sharding section
        shuffle=True,
        num_epochs=None,
        seed=42,
    )
    # Basic Structure (the DataLoader inherits the sharding from the sampler)
    return grain.DataLoader(
        data_source=my_source,
        operations=ops,
        sampler=sampler,
        worker_count=worker_count,  # 0 for sequential, >0 for parallel
        # Disables thread prefetching when dataset in memory already
        read_options=grain.ReadOptions(num_threads=0),
    )


@pytest.mark.grain
def test_quick_reference_data_loader() -> None:
    import grain.python as real_grain

    source = Records(300)
    ours = quick_reference_loader(grain, source)
    it = iter(ours)
    batches = [next(it) for _ in range(5)]  # num_epochs=None: endless
    assert [b["image"].shape for b in batches] == [(128, 3, 4)] * 5
    assert batches[0]["image"].dtype == np.float32
    labels = np.concatenate([b["label"] for b in batches[:2]])
    sampler = grain.IndexSampler(300, shuffle=True, seed=42, shard_options=grain.NoSharding())
    assert labels[:10].tolist() == [sampler[g].record_key % 10 for g in range(10)]
    theirs_it = iter(quick_reference_loader(real_grain, source))
    assert_same_batches(batches, [next(theirs_it) for _ in range(5)])
    with iter(quick_reference_loader(grain, source, worker_count=2)) as parallel:
        assert_same_batches([next(parallel) for _ in range(5)], batches)


def test_quick_reference_training_loop() -> None:
    import jax
    import jax.numpy as jnp

    # The quick reference's loop, with a linear model and a plain-JAX step in place
    # of Flax NNX and optax.
    @jax.jit
    def train_step(weights: jax.Array, batch: dict[str, jax.Array]) -> jax.Array:
        def loss_fn(weights: jax.Array) -> jax.Array:
            logits = batch["image"].reshape(batch["image"].shape[0], -1) @ weights
            labels = jax.nn.one_hot(batch["label"], 10)
            return -jnp.mean(jnp.sum(labels * jax.nn.log_softmax(logits), axis=-1))

        return weights - 1e-3 * jax.grad(loss_fn)(weights)

    def run(num_steps: int) -> tuple[jax.Array, int]:
        model = jnp.zeros((12, 10))
        data_loader = grain.load(
            Records(600), num_epochs=1, shuffle=True, seed=0, batch_size=128, drop_remainder=True
        )
        data_iterator = iter(data_loader)
        steps = 0
        for _step in range(num_steps):
            try:
                batch = next(data_iterator)
            except StopIteration:
                break
            model = train_step(model, batch)
            steps += 1
        return model, steps

    model, steps = run(num_steps=10)
    assert steps == 4  # 600 records give 4 full batches of 128
    again, _ = run(num_steps=10)
    assert bool(jnp.any(model != 0)) and bool(jnp.array_equal(model, again))


# ---------------------------------------------------------------------------
# ArrayRecord files and Orbax checkpoints (overview, API reference). The
# examples' `/data/...` and `/tmp/...` paths are rewritten into a temporary
# directory, where the ArrayRecord files are written first.


def write_train_files(directory: Any, shards: int = 2, per_shard: int = 40) -> list[str]:
    """Writes `train-0000k.arrayrecord` files whose records are `b"record <n>"`."""
    paths = []
    for shard in range(shards):
        records = [f"record {shard * per_shard + i}".encode() for i in range(per_shard)]
        (written,) = grain.sources.write_array_records(records, directory / f"part{shard}")
        target = directory / f"train-{shard:05d}.arrayrecord"
        Path(written).rename(target)
        paths.append(str(target))
    return paths


@pytest.mark.grain
def test_overview_array_record_data_source(tmp_path: Path) -> None:
    import grain as real_grain

    shards = write_train_files(tmp_path)
    (single,) = grain.sources.write_array_records([b"a", b"b"], tmp_path / "train")
    data = str(tmp_path)
    # Single file
    source = grain.ArrayRecordDataSource(single)
    assert len(source) == 2
    # Multiple shards
    source = grain.ArrayRecordDataSource(
        [
            f"{data}/train-00000.arrayrecord",
            f"{data}/train-00001.arrayrecord",
        ]
    )
    assert len(source) == 80
    # With index stored in memory for fast random access
    source = grain.ArrayRecordDataSource(
        [f"{data}/train-*.arrayrecord"],
        reader_options={"index_storage_option": "in_memory"},
    )
    assert f"Total records: {len(source)}" == "Total records: 80"
    record_bytes = source[42]  # raw bytes; decode in a Map transform
    assert record_bytes == b"record 42"
    theirs = real_grain.sources.ArrayRecordDataSource(shards)
    assert [source[i] for i in range(80)] == [theirs[i] for i in range(80)]


@pytest.mark.grain
def test_api_reference_map_dataset_source_array_record(tmp_path: Path) -> None:
    import grain as real_grain

    paths = write_train_files(tmp_path)
    ds = grain.MapDataset.source(grain.sources.ArrayRecordDataSource(paths))
    theirs = real_grain.MapDataset.source(real_grain.sources.ArrayRecordDataSource(paths))
    assert len(ds) == 80 and list(ds) == list(theirs)
    shuffled = list(ds.seed(1).shuffle().batch(16))
    assert_same_batches(shuffled, list(theirs.seed(1).shuffle().batch(16)))


def decode_example(record: bytes) -> dict[str, Any]:
    """Stand-in `decode_proto` / `parse_example`: the record number and its length."""
    number = int(record.split()[1])
    return {"id": np.int64(number), "length": np.int32(len(record))}


def grain_oracle() -> Any:
    """Grain 0.2.18 with the overview's names: its top level and `grain.python` together."""
    import types

    import grain as real_grain
    import grain.python as legacy

    return types.SimpleNamespace(**{**vars(legacy), **vars(real_grain)})


def overview_data_loader(grain: Any, max_steps: int, paths: list[str], worker_count: int) -> Any:
    source = grain.ArrayRecordDataSource(paths)
    sampler = grain.IndexSampler(
        num_records=len(source),
        shard_options=grain.ShardByJaxProcess(),
        shuffle=True,
        num_epochs=None,  # infinite
        seed=42,
    )

    @dataclasses.dataclass
    class DecodeAndAugment(grain.transforms.Map):
        def map(self, record: bytes):
            example = decode_example(record)
            return example

    loader = grain.DataLoader(
        data_source=source,
        sampler=sampler,
        operations=[
            DecodeAndAugment(),
            grain.transforms.Batch(batch_size=16, drop_remainder=True),
        ],
        worker_count=worker_count,
        worker_buffer_size=2,
    )
    iterator = iter(loader)
    state = iterator.get_state()  # bytes; save to disk for preemption recovery
    batches = []
    for _step in range(max_steps):
        batch = next(iterator)
        batches.append(batch)  # train_step(batch)
    if hasattr(iterator, "close"):
        iterator.close()
    return state, batches


@pytest.mark.grain
def test_overview_data_loader(tmp_path: Path) -> None:
    paths = write_train_files(tmp_path)
    # The overview's batch size is 128 and worker count 8; 16 and 2 here (Grain runs with 0).
    state, batches = overview_data_loader(grain, 12, paths, worker_count=2)
    assert isinstance(state, bytes)
    ids = np.concatenate([b["id"] for b in batches])
    assert len(ids) == 192 and sorted(ids[:80].tolist()) == list(range(80))  # epoch 1
    _, theirs = overview_data_loader(grain_oracle(), 12, paths, worker_count=0)
    assert_same_batches(batches, theirs)


@pytest.mark.grain
def test_overview_load(tmp_path: Path) -> None:
    paths = write_train_files(tmp_path)

    def example(grain: Any, worker_count: int) -> list[Any]:
        source = grain.ArrayRecordDataSource(paths)

        @dataclasses.dataclass
        class Decode(grain.transforms.Map):
            def map(self, record: bytes):
                return decode_example(record)

        loader = grain.load(
            source=source,
            num_epochs=10,
            shuffle=True,
            seed=0,
            shard_options=grain.ShardByJaxProcess(),
            transformations=[Decode()],
            batch_size=64,
            drop_remainder=True,
            worker_count=worker_count,
        )
        return list(loader)  # for batch in loader: train_step(batch)

    batches = example(grain, worker_count=4)
    assert len(batches) == 800 // 64
    assert_same_batches(batches, example(grain_oracle(), worker_count=0))


@pytest.mark.grain
def test_overview_dataset_iterator_orbax(tmp_path: Path) -> None:
    import grain as real_grain
    import orbax.checkpoint as ocp

    def example(grain: Any, directory: Path) -> tuple[Any, Any]:
        ds = grain.MapDataset.range(1000).seed(42).shuffle().to_iter_dataset()
        ds_iter = iter(ds)
        # Advance iterator
        for _ in range(100):
            x = next(ds_iter)
        # Save via Orbax CheckpointManager
        mngr = ocp.CheckpointManager(directory)
        mngr.save(step=100, args=grain.checkpoint.CheckpointSave(ds_iter), force=True)
        mngr.wait_until_finished()
        after_save = next(ds_iter)
        # Restore to step 100 and continue from exactly that position
        mngr.restore(100, args=grain.checkpoint.CheckpointRestore(ds_iter))
        x = next(ds_iter)  # element 101, identical to original run
        mngr.close()
        return after_save, x

    after_save, x = example(grain, tmp_path / "grainfn")
    assert x == after_save == list(grain.MapDataset.range(1000).seed(42).shuffle())[100]
    assert (after_save, x) == example(real_grain, tmp_path / "grain")

"""The code examples of grain-api-overview.md ("overview"), run with grainfn.

The overview's code blocks were flattened onto one line and are read here as
the Python they were. The rules the tests follow are in reference/shared.py.

The DataLoader, IndexSampler, `grain.load`, sharding, ArrayRecord and Orbax
examples (overview "DataLoader", "grain.load", "ArrayRecordDataSource",
"ShardOptions / ShardByJaxProcess / NoSharding", "IndexSampler", the
DataLoader of "Transformation base classes" and "DatasetIterator.get_state /
set_state" through Orbax) are run in test_loader_examples.py.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest

import grainfn as grain

from reference.shared import as_lists, assert_same


def test_overview_map_dataset_source() -> None:
    # From a plain Python list
    ds = grain.MapDataset.source([0, 1, 2, 3, 4, 5, 6, 7, 8, 9])
    assert ds[3] == 3  # print(ds[3])  # 3
    assert len(ds) == 10  # print(len(ds))  # 10

    # From a custom RandomAccessDataSource
    class MySource(grain.sources.RandomAccessDataSource):
        def __init__(self, data):
            self._data = data

        def __len__(self):
            return len(self._data)

        def __getitem__(self, idx):
            return self._data[idx]

    source = MySource(["a", "b", "c", "d", "e"])
    ds = grain.MapDataset.source(source)
    assert ds[1] == "b"  # print(ds[1])  # "b"
    assert list(ds) == ["a", "b", "c", "d", "e"]


def test_overview_map_dataset_range() -> None:
    ds = grain.MapDataset.range(10)
    assert list(ds) == [0, 1, 2, 3, 4, 5, 6, 7, 8, 9]
    ds = grain.MapDataset.range(2, 8, 2)
    assert list(ds) == [2, 4, 6]


def overview_shuffle_example(grain: Any) -> tuple[list[int], list[int]]:
    ds = grain.MapDataset.range(10).shuffle(seed=42)
    shuffled = list(ds)  # e.g. [3, 7, 0, 5, 9, 1, 6, 2, 8, 4] (deterministic)
    # Pipeline-level seed: each downstream random op derives its own unique seed
    ds = (
        grain.MapDataset.range(10).seed(42).shuffle()  # derives seed from pipeline seed
    )
    return shuffled, list(ds)


@pytest.mark.grain
def test_overview_map_dataset_shuffle() -> None:
    import grain as real_grain

    shuffled, pipeline_seeded = overview_shuffle_example(grain)
    assert sorted(shuffled) == list(range(10))
    assert set(pipeline_seeded) == set(range(10))  # print(set(ds) == set(range(10)))  # True
    # The docs' "e.g." order is not Grain's: Grain 0.2.18 gives [8, 6, 7, 9, 0, 5, 1, 2, 4, 3].
    assert_same((shuffled, pipeline_seeded), overview_shuffle_example(real_grain))


def test_overview_map_dataset_map() -> None:
    # Lambda shorthand
    ds = grain.MapDataset.range(5).map(lambda x: x**2)
    assert list(ds) == [0, 1, 4, 9, 16]

    # Class-based transform (recommended for serialization / DataLoader use)
    @dataclasses.dataclass
    class Normalize(grain.transforms.Map):
        mean: float
        std: float

        def map(self, element):
            return (element - self.mean) / self.std

    ds = grain.MapDataset.source([0.0, 1.0, 2.0, 3.0]).map(Normalize(mean=1.5, std=1.0))
    assert list(ds) == [-1.5, -0.5, 0.5, 1.5]


# Stand-in for the example's undefined `images`: six small distinct images.
IMAGES = [np.arange(12, dtype=np.uint8).reshape(3, 4) + 20 * i for i in range(6)]


def overview_random_map_example(grain: Any) -> tuple[list[Any], list[np.ndarray]]:
    images = IMAGES
    # Adds a random integer in [0, 5) to each element
    ds = grain.MapDataset.range(5).random_map(
        lambda x, rng: x + rng.integers(0, 5),
        seed=0,
    )
    added = list(ds)  # deterministic, e.g. [2, 4, 4, 6, 5]

    # Class-based with numpy image augmentation
    @dataclasses.dataclass
    class RandomFlip(grain.transforms.RandomMap):
        def random_map(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            if rng.random() > 0.5:
                return np.flip(image, axis=1)
            return image

    ds = grain.MapDataset.source(images).seed(123).random_map(RandomFlip())
    return added, list(ds)


@pytest.mark.grain
def test_overview_map_dataset_random_map() -> None:
    import grain as real_grain

    added, flipped = overview_random_map_example(grain)
    assert all(x <= value < x + 5 for x, value in enumerate(added))
    assert len(flipped) == len(IMAGES)
    for image, out in zip(IMAGES, flipped):
        assert np.array_equal(out, image) or np.array_equal(out, np.flip(image, axis=1))
    # The docs' "e.g." values are not Grain's: Grain 0.2.18 gives [0, 5, 3, 6, 7].
    assert_same((added, flipped), overview_random_map_example(real_grain))


def test_overview_map_dataset_map_with_index() -> None:
    ds = grain.MapDataset.source(["a", "b", "c", "d"])
    ds = ds.map_with_index(lambda i, x: f"{x}_{i}")
    assert list(ds) == ["a_0", "b_1", "c_2", "d_3"]


def test_overview_map_dataset_filter() -> None:
    ds = grain.MapDataset.range(10).filter(lambda x: x % 2 == 0)
    assert ds[0] == 0  # print(ds[0])  # 0
    assert ds[1] is None  # print(ds[1])  # None (1 is filtered out)
    assert list(ds) == [0, 2, 4, 6, 8]  # (Nones skipped during iteration)

    # When filter and batch are both needed, filter first then convert to IterDataset
    ds = (
        grain.MapDataset.range(20)
        .filter(lambda x: x % 3 == 0)
        .to_iter_dataset()
        .batch(batch_size=3)
    )
    printed = []
    for batch in ds:
        printed.append(batch)  # print(batch)  # e.g. array([0, 3, 6])
    assert all(isinstance(batch, np.ndarray) for batch in printed)
    assert as_lists(printed) == [[0, 3, 6], [9, 12, 15], [18]]


def test_overview_map_dataset_batch() -> None:
    ds = grain.MapDataset.range(10).batch(batch_size=3)
    batches = list(ds)  # [array([0, 1, 2]), array([3, 4, 5]), array([6, 7, 8]), array([9])]
    assert all(isinstance(batch, np.ndarray) for batch in batches)
    assert as_lists(batches) == [[0, 1, 2], [3, 4, 5], [6, 7, 8], [9]]

    # Drop the final partial batch
    ds = grain.MapDataset.range(10).batch(batch_size=3, drop_remainder=True)
    assert as_lists(list(ds)) == [[0, 1, 2], [3, 4, 5], [6, 7, 8]]

    # Custom batch function (e.g., build a dict-of-arrays batch)
    def dict_batch(elements):
        import numpy as np

        return {"values": np.stack([e["values"] for e in elements])}

    ds = grain.MapDataset.source([{"values": np.array([i])} for i in range(6)])
    ds = ds.batch(batch_size=2, batch_fn=dict_batch)
    batches = list(ds)
    assert [list(batch) for batch in batches] == [["values"]] * 3
    assert [batch["values"].tolist() for batch in batches] == [[[0], [1]], [[2], [3]], [[4], [5]]]


def overview_repeat_training_loop(grain: Any) -> list[np.ndarray]:
    # Stand-ins for the example's undefined names.
    def preprocess_fn(x):
        return x * 3

    max_steps = 40
    trained = []

    def train_step(batch):
        trained.append(batch)

    # Practical infinite training loop
    ds = (
        grain.MapDataset.range(1000)
        .shuffle(seed=42)
        .map(preprocess_fn)
        .batch(batch_size=32)
        .repeat()
    )
    for step, batch in enumerate(ds):
        if step >= max_steps:
            break
        train_step(batch)
    return trained


@pytest.mark.grain
def test_overview_map_dataset_repeat() -> None:
    import grain as real_grain

    # Finite repeat
    ds = grain.MapDataset.range(3).repeat(2)
    assert list(ds) == [0, 1, 2, 0, 1, 2]

    # Infinite repeat for training loops
    ds = grain.MapDataset.range(5).shuffle(seed=0).repeat()
    # The docs call an undefined `import_sys_maxsize()`; they mean sys.maxsize.
    assert len(ds) == sys.maxsize  # True (sys.maxsize)

    trained = overview_repeat_training_loop(grain)
    # 1000 elements make 31 batches of 32 and one of 8 per epoch; 40 steps reach the second epoch.
    assert [len(batch) for batch in trained] == [32] * 31 + [8] + [32] * 8
    first_epoch = np.concatenate(trained[:32])
    assert sorted(first_epoch.tolist()) == [3 * x for x in range(1000)]
    assert_same(trained, overview_repeat_training_loop(real_grain))


def test_overview_map_dataset_slice() -> None:
    ds = grain.MapDataset.range(10)
    # Manual sharding across 4 hosts
    shard_index = 0  # jax.process_index()
    shard_count = 4  # jax.process_count()
    sharded = ds[shard_index::shard_count]
    assert list(sharded) == [0, 4, 8]
    # Or equivalently
    sharded = ds.slice(slice(shard_index, None, shard_count))
    assert list(sharded) == [0, 4, 8]


def overview_mix_weighted_example(grain: Any) -> list[int]:
    # Weighted mixing (70% from ds1, 30% from ds2)
    ds1_large = grain.MapDataset.range(100)
    ds2_large = grain.MapDataset.range(100, 200)
    ds = grain.MapDataset.mix([ds1_large, ds2_large], weights=[0.7, 0.3])
    return list(ds)


@pytest.mark.grain
def test_overview_map_dataset_mix() -> None:
    import grain as real_grain

    ds1 = grain.MapDataset.range(5)  # [0, 1, 2, 3, 4]
    ds2 = grain.MapDataset.range(5, 8)  # [5, 6, 7]
    # Uniform interleaving
    ds = grain.MapDataset.mix([ds1, ds2])
    assert list(ds) == [0, 5, 1, 6, 2, 7]
    # The section says the mixed length "equals the shortest input dataset length"; the
    # output it shows, and Grain 0.2.18, have 6 elements: every dataset contributes in
    # proportion until the first one runs out.
    assert len(ds) == 6

    mixed = overview_mix_weighted_example(grain)
    from_first = [x for x in mixed if x < 100]
    from_second = [x for x in mixed if x >= 100]
    assert from_first == list(range(len(from_first)))
    assert from_second == list(range(100, 100 + len(from_second)))
    assert abs(len(from_first) / len(mixed) - 0.7) < 0.01
    assert_same(mixed, overview_mix_weighted_example(real_grain))


def test_overview_map_dataset_concatenate() -> None:
    ds1 = grain.MapDataset.range(3)  # [0, 1, 2]
    ds2 = grain.MapDataset.range(3, 7)  # [3, 4, 5, 6]
    ds = grain.MapDataset.concatenate([ds1, ds2])
    assert list(ds) == [0, 1, 2, 3, 4, 5, 6]


def overview_to_iter_dataset_example(grain: Any) -> list[int]:
    processed = []

    def process(batch):  # stand-in
        processed.append(batch)

    ds = (
        grain.MapDataset.range(1000)
        .shuffle(seed=0)
        .map(lambda x: x * 2)
        .to_iter_dataset(grain.ReadOptions(num_threads=16, prefetch_buffer_size=500))
    )
    for batch in ds:
        process(batch)
    return processed


@pytest.mark.grain
def test_overview_map_dataset_to_iter_dataset() -> None:
    import grain as real_grain

    processed = overview_to_iter_dataset_example(grain)
    assert sorted(processed) == list(range(0, 2000, 2))
    assert_same(processed, overview_to_iter_dataset_example(real_grain))


class InMemorySource:
    """Stand-in for the examples' `my_source` and `source`: records in a list."""

    def __init__(self, records: Sequence[Any]) -> None:
        self._records = list(records)

    def __len__(self) -> int:
        return len(self._records)

    def __getitem__(self, idx: int) -> Any:
        return self._records[idx]


def heavy_preprocess_fn(x: int) -> np.ndarray:
    return np.array([x, x * x], dtype=np.int64)


def overview_mp_prefetch_example(grain: Any, *, mp_prefetch: bool = True) -> list[Any]:
    # Stand-ins for the example's undefined names.
    my_source = InMemorySource(range(300))
    total_steps = 4
    trained = []

    def train_step(batch):
        trained.append(batch)

    ds = (
        grain.MapDataset.source(my_source)
        .shuffle(seed=42)
        .map(heavy_preprocess_fn)
        .batch(batch_size=64)
        .to_iter_dataset()
    )
    if mp_prefetch:
        ds = ds.mp_prefetch(grain.MultiprocessingOptions(num_workers=8, per_worker_buffer_size=2))
    it = iter(ds)
    try:
        for step in range(total_steps):  # noqa: B007
            batch = next(it)
            train_step(batch)
    finally:
        it.close()  # Explicitly release worker processes
    return trained


@pytest.mark.grain
def test_overview_iter_dataset_mp_prefetch() -> None:
    import grain as real_grain

    trained = overview_mp_prefetch_example(grain)
    assert [batch.shape for batch in trained] == [(64, 2)] * 4
    seen = np.concatenate(trained)[:, 0].tolist()
    assert len(set(seen)) == 256 and set(seen) <= set(range(300))
    assert all(row[1] == row[0] ** 2 for batch in trained for row in batch.tolist())
    # mp_prefetch must not change the elements.
    assert_same(trained, overview_mp_prefetch_example(grain, mp_prefetch=False))
    # Grain's mp_prefetch starts worker processes (and needs absl flags parsed), so
    # the oracle is Grain's same pipeline without it, which yields the same elements.
    assert_same(trained, overview_mp_prefetch_example(real_grain, mp_prefetch=False))


# Stand-ins for the example's undefined `source_a` and `source_b`.
SOURCE_A = [{"label": i % 2, "id": i} for i in range(10)]
SOURCE_B = [{"label": i % 3 % 2, "id": 100 + i} for i in range(12)]


def overview_iter_mix_example(grain: Any) -> tuple[list[Any], list[Any]]:
    source_a, source_b = SOURCE_A, SOURCE_B
    ds1 = grain.MapDataset.source(source_a).filter(lambda x: x["label"] == 0).to_iter_dataset()
    ds2 = grain.MapDataset.source(source_b).filter(lambda x: x["label"] == 1).to_iter_dataset()
    # Mix with equal weights (stops when either is exhausted)
    mixed = grain.IterDataset.mix([ds1, ds2], weights=[0.5, 0.5])
    from_list = list(mixed)
    # Named components for checkpoint recovery across topology changes
    mixed = grain.IterDataset.mix(
        {"class_0": ds1, "class_1": ds2},
        weights={"class_0": 0.5, "class_1": 0.5},
    )
    return from_list, list(mixed)


@pytest.mark.grain
def test_overview_iter_dataset_mix() -> None:
    import grain as real_grain

    from_list, from_dict = overview_iter_mix_example(grain)
    assert from_dict == from_list
    # Equal weights alternate, starting with the first component. The first has 5
    # elements with label 0, the second 4 with label 1: the mix stops when the second
    # is due and has none left.
    assert [x["label"] for x in from_list] == [0, 1] * 4 + [0]
    assert [x["id"] for x in from_list] == [0, 101, 2, 104, 4, 107, 6, 110, 8]
    assert_same((from_list, from_dict), overview_iter_mix_example(real_grain))


def test_overview_dataset_iterator_close() -> None:
    # Stand-ins for the example's undefined names.
    my_source = InMemorySource(range(20))

    def preprocess(x):
        return x + 100

    trained = []

    def train_step(batch):
        trained.append(batch)

    ds = (
        grain.MapDataset.source(my_source)
        .map(preprocess)
        .to_iter_dataset()
        .mp_prefetch(grain.MultiprocessingOptions(num_workers=4))
    )
    it = iter(ds)
    for batch in it:
        train_step(batch)
    it.close()  # or use as a context (via try/finally)
    assert trained == list(range(100, 120))


def overview_pipe_example(grain: Any) -> list[np.ndarray]:
    def add_noise_dataset(ds, noise_std, seed):
        return ds.random_map(
            lambda x, rng: x + rng.normal(scale=noise_std),
            seed=seed,
        )

    ds = (
        grain.MapDataset.range(10)
        .pipe(add_noise_dataset, noise_std=0.1, seed=7)
        .batch(batch_size=5)
    )
    return list(ds)  # print(list(ds))


@pytest.mark.grain
def test_overview_map_dataset_pipe() -> None:
    import grain as real_grain

    batches = overview_pipe_example(grain)
    assert [batch.shape for batch in batches] == [(5,), (5,)]
    noise = np.concatenate(batches) - np.arange(10)
    assert np.all(np.abs(noise) < 1.0) and np.any(noise != 0)
    assert_same(batches, overview_pipe_example(real_grain))


def test_overview_map_dataset_apply() -> None:
    @dataclasses.dataclass
    class AddOne(grain.transforms.Map):
        def map(self, x):
            return x + 1

    pipeline = [
        AddOne(),
        grain.transforms.Batch(batch_size=3),
    ]
    ds = grain.MapDataset.range(9).apply(pipeline)
    batches = list(ds)  # [array([1, 2, 3]), array([4, 5, 6]), array([7, 8, 9])]
    assert all(isinstance(batch, np.ndarray) for batch in batches)
    assert as_lists(batches) == [[1, 2, 3], [4, 5, 6], [7, 8, 9]]


def overview_options_example(grain: Any, *, mp_prefetch: bool = True) -> list[np.ndarray]:
    source = InMemorySource(range(200))  # stand-in

    def preprocess(x):  # stand-in
        return np.float32(x) / 2

    # ReadOptions: controls per-process I/O threading
    read_opts = grain.ReadOptions(
        num_threads=16,  # threads reading from DataSource in parallel
        prefetch_buffer_size=500,  # elements buffered per process
    )
    # MultiprocessingOptions: controls worker processes
    mp_opts = grain.MultiprocessingOptions(
        num_workers=8,  # number of worker processes
        per_worker_buffer_size=2,  # batches pre-computed per worker
        enable_profiling=False,
    )
    assert (read_opts.num_threads, read_opts.prefetch_buffer_size) == (16, 500)
    assert (mp_opts.num_workers, mp_opts.per_worker_buffer_size) == (8, 2)
    assert mp_opts.enable_profiling is False
    ds = (
        grain.MapDataset.source(source)
        .shuffle(seed=0)
        .map(preprocess)
        .batch(batch_size=64)
        .to_iter_dataset(read_opts)
    )
    if mp_prefetch:
        ds = ds.mp_prefetch(mp_opts)
    return list(ds)


@pytest.mark.grain
def test_overview_read_options_multiprocessing_options() -> None:
    import grain as real_grain

    batches = overview_options_example(grain)
    assert [batch.shape for batch in batches] == [(64,), (64,), (64,), (8,)]
    assert all(batch.dtype == np.float32 for batch in batches)
    assert sorted(np.concatenate(batches).tolist()) == [x / 2 for x in range(200)]
    assert_same(batches, overview_options_example(grain, mp_prefetch=False))
    # The oracle runs Grain's pipeline without mp_prefetch (see the mp_prefetch test).
    assert_same(batches, overview_options_example(real_grain, mp_prefetch=False))


class CharTokenizer:
    """Stand-in for the example's undefined `tokenizer`: one token per character."""

    def encode(self, text: str) -> np.ndarray:
        return np.frombuffer(text.encode(), dtype=np.uint8).astype(np.int32)


# Stand-ins for `text_source` (two documents are too long for LengthFilter) and for
# the images RandomCrop is written for.
TEXT_SOURCE = ["a" * 100, "b" * 600, "c" * 300, "d" * 513, "e" * 512]
IMAGE_SOURCE = [
    np.random.default_rng(i).integers(0, 255, size=(240, 236, 3), dtype=np.uint8) for i in range(3)
]


def overview_transformation_classes_example(grain: Any, flat_map_base: type) -> dict[str, Any]:
    tokenizer = CharTokenizer()
    text_source = TEXT_SOURCE

    @dataclasses.dataclass
    class Tokenize(grain.transforms.Map):
        vocab_size: int = 32000

        def map(self, text: str) -> np.ndarray:
            return tokenizer.encode(text)

    @dataclasses.dataclass
    class LengthFilter(grain.transforms.Filter):
        max_length: int = 512

        def filter(self, tokens: np.ndarray) -> bool:
            return len(tokens) <= self.max_length

    @dataclasses.dataclass
    class SplitDocument(flat_map_base):  # grain.transforms.FlatMap in the docs
        max_fan_out: int = 10
        chunk_size: int = 128

        def flat_map(self, tokens: np.ndarray) -> Sequence[np.ndarray]:
            return [tokens[i : i + self.chunk_size] for i in range(0, len(tokens), self.chunk_size)]

    @dataclasses.dataclass
    class RandomCrop(grain.transforms.RandomMap):
        crop_size: int = 224

        def random_map(self, image: np.ndarray, rng: np.random.Generator) -> np.ndarray:
            h, w = image.shape[:2]
            top = rng.integers(0, h - self.crop_size + 1)
            left = rng.integers(0, w - self.crop_size + 1)
            return image[top : top + self.crop_size, left : left + self.crop_size]

    # Use in a Dataset pipeline
    ds = (
        grain.MapDataset.source(text_source)
        .map(Tokenize())
        .filter(LengthFilter(max_length=512))
        .to_iter_dataset()
        .map(lambda x: x)  # further per-element ops
    )
    # The DataLoader part runs in test_loader_examples.py; here they run in Datasets.
    chunks = grain.experimental.FlatMapIterDataset(ds, SplitDocument())
    crops = grain.MapDataset.source(IMAGE_SOURCE).seed(5).random_map(RandomCrop(crop_size=224))
    return {"tokens": list(ds), "chunks": list(chunks), "crops": list(crops)}


@pytest.mark.grain
def test_overview_transformation_base_classes() -> None:
    import grain as real_grain

    out = overview_transformation_classes_example(grain, grain.transforms.FlatMap)
    tokenizer = CharTokenizer()
    kept = [tokenizer.encode(text) for text in TEXT_SOURCE if len(text) <= 512]
    assert_same(out["tokens"], kept)
    assert [len(chunk) for chunk in out["chunks"]] == [100, 128, 128, 44, 128, 128, 128, 128]
    assert_same(np.concatenate(out["chunks"]), np.concatenate(kept))
    for image, crop in zip(IMAGE_SOURCE, out["crops"]):
        assert crop.shape == (224, 224, 3)
        assert any(
            np.array_equal(crop, image[top : top + 224, left : left + 224])
            for top in range(17)
            for left in range(13)
        )
    # Grain 0.2.18 has no grain.transforms.FlatMap (the docs' base class for
    # SplitDocument); its FlatMap base is grain.experimental.FlatMapTransform.
    expected = overview_transformation_classes_example(
        real_grain, real_grain.experimental.FlatMapTransform
    )
    assert_same(out, expected)

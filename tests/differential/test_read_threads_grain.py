"""Where a data source is read, as far as it can see: Grain's read threads, against Grain 0.2.18.

Grain reads a MapDataset (its source included) in `ReadOptions.num_threads`
threads named `grain-prefetch_<n>`, in worker processes too, and in the
calling thread when either option is 0. MaxText's Hugging Face source picks
its shard from that number: `int(threading.current_thread().name.split("_")[1])`.
The same code runs on both libraries here: with one read thread the records
are Grain's, one by one; with several, which thread reads which position is
up to the threads' timing in Grain, so the set of records is compared.
"""

from __future__ import annotations

import itertools
import threading
from typing import Any

import grain
import grain.python
import numpy as np
import pytest

import grainfn
import grainfn.python

from support.loader_specs import assert_same_elements
from support.reading import read_to_end

pytestmark = [pytest.mark.grain, pytest.mark.usefixtures("absl_flags_parsed")]

RECORDS = 10
"""Records per shard."""


def shard(number: int) -> list[dict[str, Any]]:
    """The records of one shard of a streamed dataset: token arrays, unique to (shard, record)."""
    return [{"text": np.arange(3, dtype=np.int32) + 100 * number + 10 * k} for k in range(RECORDS)]


class ShardPerReadThread:
    """MaxText's `HFDataSource` in small: a read takes the next record of its thread's shard.

    A streamed Hugging Face dataset has no random access, so MaxText's source
    ignores the index: a read in thread `grain-prefetch_<n>` takes the next
    record of shard `n` (MaxText splits the stream into one shard per read
    thread). Its length is a bound past the data; past a shard's end a read
    gives a padding record.
    """

    def __init__(self, num_threads: int, length: int) -> None:
        self.shards = [shard(n) for n in range(num_threads)]
        self.length = length
        self.iterators: list[Any] = []

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not self.iterators:
            self.iterators = [iter(records) for records in self.shards]
        idx = int(threading.current_thread().name.split("_")[1])
        return next(self.iterators[idx], {"text": np.zeros(3, dtype=np.int32)})


def to_inputs(module: Any) -> Any:
    """MaxText's `HFNormalizeFeatures` and friends: a record as inputs and targets."""

    class ToInputs(module.MapTransform):
        def map(self, record: dict[str, Any]) -> dict[str, Any]:
            return {"inputs": record["text"], "targets": record["text"] + 1}

    return ToInputs()


def loader(module: Any, source: Any, workers: int, num_threads: int, **options: Any) -> Any:
    """MaxText's `preprocessing_pipeline`: an index sampler the source ignores, a DataLoader."""
    sampler = module.IndexSampler(
        num_records=len(source),
        num_epochs=1,
        shard_options=module.ShardOptions(shard_index=0, shard_count=1, drop_remainder=False),
        shuffle=False,
        seed=0,
    )
    return module.DataLoader(
        data_source=source,
        operations=[to_inputs(module), module.Batch(batch_size=4, drop_remainder=True)],
        sampler=sampler,
        worker_count=workers,
        worker_buffer_size=1,
        read_options=module.ReadOptions(num_threads=num_threads, prefetch_buffer_size=128),
        **options,
    )


def test_one_read_thread_gives_maxtexts_records_as_grain() -> None:
    def batches(module: Any) -> list[Any]:
        source = ShardPerReadThread(1, length=RECORDS + 3)
        options = module.ReadOptions(num_threads=1, prefetch_buffer_size=128)
        ds = module.MapDataset.source(source).map(to_inputs(module)).to_iter_dataset(options)
        return read_to_end(ds.batch(4))

    ours, theirs = batches(grainfn.python), batches(grain.python)
    assert_same_elements(ours, theirs)
    assert [b["inputs"][0, 0] for b in ours] == [0, 40, 80, 0]  # records 0, 4, 8; padding


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 1])
def test_maxtexts_dataloader_reads_its_records_as_grain(workers: int) -> None:
    def batches(module: Any, **options: Any) -> list[Any]:
        source = ShardPerReadThread(1, length=2 * RECORDS)
        return read_to_end(loader(module, source, workers, num_threads=1, **options))

    # Every read in the worker, as Grain's: the source's state is in one process.
    ours = batches(grainfn.python, **({"adaptive": False} if workers else {}))
    theirs = batches(grain.python)
    assert_same_elements(ours, theirs)
    inputs = np.concatenate([b["inputs"] for b in ours])
    assert inputs[:RECORDS, 0].tolist() == [10 * k for k in range(RECORDS)]
    assert not inputs[RECORDS:].any()  # the shard ran out: padding


class ThreadChecked:
    """Record `index`, where MaxText's source can read it: in thread `<name>_<n>`, `n < threads`."""

    def __init__(self, length: int, num_threads: int) -> None:
        self.length, self.num_threads = length, num_threads

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[int, int]:
        idx = int(threading.current_thread().name.split("_")[1])
        if not 0 <= idx < self.num_threads:
            raise IndexError(f"no shard {idx} for {self.num_threads} read threads")
        return index, idx


@pytest.mark.slow
@pytest.mark.parametrize(
    ("kind", "num_threads"),
    [("to_iter_dataset", 16), ("to_iter_dataset", 4), ("DataLoader", 3), ("workers", 2)],
)
def test_several_read_threads_read_the_same_records_as_grain(kind: str, num_threads: int) -> None:
    def records(module: Any) -> list[tuple[int, int]]:
        source = ThreadChecked(300, num_threads)
        if kind == "to_iter_dataset":
            options = module.ReadOptions(num_threads=num_threads)
            if num_threads == 16:  # Grain's default
                return read_to_end(module.MapDataset.source(source))
            return read_to_end(module.MapDataset.source(source).to_iter_dataset(options))
        python = module.python
        sampler = python.IndexSampler(300, python.NoSharding(), shuffle=True, num_epochs=1, seed=3)
        return read_to_end(
            python.DataLoader(
                data_source=source,
                sampler=sampler,
                worker_count=1 if kind == "workers" else 0,
                read_options=python.ReadOptions(num_threads=num_threads),
            )
        )

    ours, theirs = records(grainfn), records(grain)
    assert sorted(index for index, _ in ours) == sorted(index for index, _ in theirs)
    assert len(ours) == len({index for index, _ in ours}) == 300
    assert {idx for _, idx in ours} <= set(range(num_threads))


class Names:
    """Each read's thread name."""

    def __len__(self) -> int:
        return 50

    def __getitem__(self, index: int) -> str:
        return threading.current_thread().name


@pytest.mark.parametrize(
    "options", [{"num_threads": 0}, {"prefetch_buffer_size": 0}, {"num_threads": 1}]
)
def test_the_reading_threads_are_named_as_grains(options: dict[str, int]) -> None:
    def names(module: Any) -> set[str]:
        ds = module.MapDataset.source(Names()).to_iter_dataset(module.ReadOptions(**options))
        return set(read_to_end(ds))

    expected = {"grain-prefetch_0"} if options.get("num_threads") else {"MainThread"}
    assert names(grainfn) == names(grain) == expected


def test_an_elastic_iterator_reads_in_grains_threads() -> None:
    def names(module: Any) -> set[str]:
        ds = module.MapDataset.source(Names())
        options = module.ReadOptions(num_threads=1)
        shard = module.sharding.NoSharding()
        iterator = module.experimental.ElasticIterator(ds, 5, shard, read_options=options)
        return {str(name) for batch in itertools.islice(iterator, 10) for name in batch}

    assert names(grainfn) == names(grain) == {"grain-prefetch_0"}

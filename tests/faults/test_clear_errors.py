"""Bad input gets a clear error; a user's own error keeps its type and says where it was raised.

Each case is one a fuzz of the public API found unclear: Python's own
OverflowError for an integer past 64 bits, RecursionError for a deep or
self-referential value, a KeyError from inside grainfn, or a data source's
IndexError with nothing naming the source or the position read. Now bad
values are refused with a ValueError or TypeError that names the value and
what is allowed, and an error of the user's code gains a note naming the
stage (or source) and the position.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn

from faults.test_errors import ParseError, parse

TEN = grain.MapDataset.range(10)
RANGE = fn.range(10)
STREAM = fn.from_dataset(RANGE)
NO_SHARDING = grain.sharding.NoSharding()
PACKABLE = [{"x": np.arange(2)}] * 4
DEPTH = sys.getrecursionlimit() + 100


def nested(depth: int) -> list[Any]:
    """A list nested `depth` deep, built without recursion."""
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def nested_dict(depth: int) -> dict[str, Any]:
    """A dict nested `depth` deep under key "a"."""
    value: dict[str, Any] = {}
    for _ in range(depth):
        value = {"a": value}
    return value


def self_holding() -> list[Any]:
    """A list that holds itself."""
    loop: list[Any] = []
    loop.append(loop)
    return loop


class Sized:
    """A data source of 4 records whose `len()` is whatever it was given."""

    def __init__(self, length: Any) -> None:
        self.length = length

    def __len__(self) -> Any:
        return self.length

    def __getitem__(self, index: int) -> int:
        return index


class LongSampler:
    """A sampler of Grain's protocol whose `len()` is whatever it was given."""

    def __init__(self, length: Any) -> None:
        self.length = length

    def __len__(self) -> Any:
        return self.length

    def __getitem__(self, index: int) -> grain.RecordMetadata:
        return grain.RecordMetadata(index=index, record_key=index)


class Records:
    """A data source of 10 records whose record 3 raises `error`."""

    def __init__(self, error: type[Exception] = IndexError) -> None:
        self.error = error

    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> int:
        if index == 3:
            raise self.error(f"record {index} is missing")
        return index


class BatchedRecords(Records):
    """`Records` that also reads blocks with `__getitems__`, as Grain's sources do."""

    def __getitems__(self, indices: list[int]) -> list[int]:
        return [self[i] for i in indices]


class NoLength(Records):
    """A data source whose `len()` fails."""

    def __len__(self) -> int:
        raise OSError("the index file is gone")


class Broken(grain.MapDataset):
    """A user's MapDataset whose position 3 raises."""

    def __len__(self) -> int:
        return 10

    def __getitem__(self, index: int) -> int:
        if index == 3:
            raise KeyError("no such id")
        return index


class BrokenIterable:
    """A re-iterable object whose iterator raises at its element 3."""

    def __iter__(self) -> Any:
        for value in range(10):
            if value == 3:
                raise ConnectionError("the stream dropped")
            yield value


def pack(length_struct: Any, num_packing_bins: Any = 2) -> Any:
    parent = grain.MapDataset.source(PACKABLE).to_iter_dataset()
    return grain.experimental.FirstFitPackIterDataset(
        parent, length_struct=length_struct, num_packing_bins=num_packing_bins
    )


def rebatch(element: Any) -> Any:
    return fn.rebatch(2, fn.from_dataset(fn.source([element] * 4)))


def elastic_state(state: Any) -> None:
    grain.experimental.ElasticIterator(TEN, 2, grain.ShardOptions(0, 1)).set_state(state)


def read(data: Any) -> list[Any]:
    """Every element of a dataset, stream or loader."""
    if isinstance(data, fn.Stream):
        return list(fn.iterate(data))
    if isinstance(data, fn.Dataset):
        return list(fn.elements(data))
    return list(data)


TOO_DEEP = r"nests lists, tuples or dicts deeper than Python's recursion limit"
SHORT_DEEP = re.escape("[[[[...]]]]")
FOUR = r"2\*\*63 - 1"
REFUSED: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    # Integers past 64 bits: OverflowError, or numpy's "Maximum allowed dimension exceeded".
    "fn.range of 2**63 elements": (
        lambda: fn.range(2**63),
        ValueError,
        rf"range\(0, 9223372036854775808, 1\) has 9223372036854775808 elements; .* at most {FOUR}",
    ),
    "MapDataset.range of 2**64 elements": (
        lambda: grain.MapDataset.range(-(2**63), 2**63),
        ValueError,
        rf"has 18446744073709551616 elements; a dataset has at most {FOUR} positions",
    ),
    "window_size of 2**63": (
        lambda: fn.window_shuffle(2**63, RANGE, seed=1),
        ValueError,
        rf"window_size must be a positive integer up to {FOUR}, got 9223372036854775808",
    ),
    "WindowShuffleMapDataset window_size of 2**64": (
        lambda: grain.experimental.WindowShuffleMapDataset(TEN, window_size=2**64, seed=1),
        ValueError,
        rf"window_size must be a positive integer up to {FOUR}, got 18446744073709551616",
    ),
    "max_fan_out of 10**30": (
        lambda: TEN.flat_map(lambda x: [x], max_fan_out=10**30),
        ValueError,
        rf"max_fan_out must be a positive integer up to {FOUR}, got 1{'0' * 30}\.",
    ),
    "stream max_fan_out of 2**63": (
        lambda: fn.flat_map(lambda x: [x], STREAM, max_fan_out=2**63),
        ValueError,
        rf"max_fan_out must be a positive integer up to {FOUR}",
    ),
    "num_packing_bins of 2**63": (
        lambda: read(pack({"x": 4}, num_packing_bins=2**63)),
        ValueError,
        rf"num_packing_bins must be a positive integer up to {FOUR}, got 9223372036854775808",
    ),
    "packed length of 2**64": (
        lambda: read(pack({"x": 2**64})),
        ValueError,
        r"length_struct\['x'\] must be a positive integer up to 2\*\*31 - 1, got 1844674407",
    ),
    "best_fit packed length of 2**63": (
        lambda: fn.best_fit_pack({"x": 2**63}, fn.source(PACKABLE), num_packing_bins=2),
        ValueError,
        r"length_struct\['x'\] must be a positive integer up to 2\*\*31 - 1",
    ),
    "concat_then_split length of 2**64": (
        lambda: fn.concat_then_split({"x": 2**64}, fn.source(PACKABLE)),
        ValueError,
        r"length_struct\['x'\] must be a positive integer up to 2\*\*31 - 1, got 1844674407",
    ),
    "concat_then_split bos_token_id of 2**63": (
        lambda: fn.concat_then_split(
            {"x": 4}, fn.source(PACKABLE), bos_features=["x"], bos_token_id=2**63
        ),
        ValueError,
        r"bos_token_id must be an integer in \[-2\*\*63, 2\*\*63 - 1\] .* got 9223372036854775808",
    ),
    "pack_and_batch batch_size of 2**63": (
        lambda: fn.pack_and_batch({"x": 4}, 2**63, fn.source(PACKABLE)),
        ValueError,
        rf"batch_size must be a positive integer up to {FOUR}, got 9223372036854775808",
    ),
    "pack_and_batch length of 2**63": (
        lambda: fn.pack_and_batch({"x": 2**63}, 2, fn.source(PACKABLE)),
        ValueError,
        r"length_struct\['x'\] must be a positive integer up to 2\*\*31 - 1",
    ),
    "PackAndBatchOperation batch_size of 2**64": (
        lambda: read(
            grain.DataLoader(
                data_source=PACKABLE,
                sampler=grain.SequentialSampler(4),
                operations=[grain.experimental.PackAndBatchOperation({"x": 4}, 2**64)],
            )
        ),
        ValueError,
        rf"batch_size must be a positive integer up to {FOUR}, got 18446744073709551616",
    ),
    "selection of an index past 2**63 - 1": (
        lambda: fn.select_from_datasets([RANGE, RANGE], [(0, 2**64)]).get(0),
        IndexError,
        re.escape(
            "selection_map[0] returned (0, 18446744073709551616); it must return (dataset "
            "index in [0, 2), index in [0, 2**63 - 1])."
        ),
    ),
    "selection of an infinite index": (
        lambda: fn.select_from_datasets([RANGE, RANGE], [(0, float("inf"))]).get(0),
        TypeError,
        r"selection_map\[0\] returned \(0, inf\); it must return a pair of integers",
    ),
    "selection of a NaN index": (
        lambda: grain.MapDataset.select_from_datasets([TEN], [(0, float("nan"))])[0],
        TypeError,
        r"returned \(0, nan\); it must return a pair of integers \(dataset index in \[0, 1\)",
    ),
    "selection of None": (
        lambda: read(fn.select_from_datasets([RANGE], [(0, None)])),
        TypeError,
        r"returned \(0, None\); it must return a pair of integers",
    ),
    "selection of one value": (
        lambda: read(fn.select_from_datasets([RANGE], [(0,)])),
        TypeError,
        r"selection_map\[0\] returned \(0,\); it must return a pair of integers",
    ),
    "selection map of 2**64 entries": (
        lambda: fn.select_from_datasets([RANGE], Sized(2**64)),
        ValueError,
        rf"len\(\) of the selection_map must be an integer in \[0, {FOUR}\], got 1844674407",
    ),
    # A source's len(): Python's own messages name neither the source nor what is allowed.
    "a source of 2**64 records": (
        lambda: grain.MapDataset.source(Sized(2**64)),
        ValueError,
        rf"len\(\) of the data source Sized must be an integer in \[0, {FOUR}\], got 18446744",
    ),
    "a source of 10**30 records in a DataLoader": (
        lambda: grain.DataLoader(data_source=Sized(10**30), sampler=grain.SequentialSampler(4)),
        ValueError,
        rf"len\(\) of the data source Sized must be an integer in \[0, {FOUR}\], got 1000000",
    ),
    "a source of -1 records": (
        lambda: fn.source(Sized(-1)),
        ValueError,
        rf"len\(\) of the data source Sized must be an integer in \[0, {FOUR}\], got -1\.",
    ),
    "a source of 1.5 records": (
        lambda: grain.load(Sized(1.5), num_epochs=1),
        TypeError,
        r"len\(\) of the data source Sized must be an integer .* got 1\.5 of type float",
    ),
    "a source of None records": (
        lambda: grain.MapDataset.source(Sized(None)),
        TypeError,
        r"len\(\) of the data source Sized must be an integer .* got None of type NoneType",
    ),
    "a sampler of 2**64 indices": (
        lambda: read(
            grain.DataLoader(
                data_source=Sized(4), sampler=LongSampler(2**64), shard_options=NO_SHARDING
            )
        ),
        ValueError,
        rf"len\(\) of the sampler LongSampler must be an integer in \[0, {FOUR}\], got 1844",
    ),
    # Arguments compared or converted before they were checked.
    "logical_shard of None shards": (
        lambda: fn.logical_shard(STREAM, 0, None),
        TypeError,
        r"num_shards must be a positive integer, got None",
    ),
    "logical_shard of -1 shards": (
        lambda: fn.logical_shard(STREAM, 0, -1),
        ValueError,
        r"num_shards must be a positive integer, got -1",
    ),
    "logical_shard of shard '1'": (
        lambda: fn.logical_shard(STREAM, "1", 2),
        TypeError,
        r"shard must be an integer, got '1' of type str",
    ),
    "pick_performance_config of max_workers '3'": (
        lambda: grain.experimental.pick_performance_config(
            TEN.to_iter_dataset(), ram_budget_mb=100, max_workers="3", max_buffer_size=2
        ),
        TypeError,
        r"max_workers must be an integer >= 0, got '3'",
    ),
    "pick_performance_config of max_buffer_size -1": (
        lambda: grain.experimental.pick_performance_config(
            TEN.to_iter_dataset(), ram_budget_mb=100, max_workers=1, max_buffer_size=-1
        ),
        ValueError,
        r"max_buffer_size must be an integer >= 0, got -1",
    ),
    # Deep and self-referential values: RecursionError.
    "batch of deeply nested elements": (
        lambda: read(grain.MapDataset.source([nested(DEPTH)] * 4).batch(2)),
        ValueError,
        rf"An element to batch {TOO_DEEP} \(sys.getrecursionlimit\(\) = \d+ levels\)",
    ),
    "iter batch of self-holding elements": (
        lambda: read(grain.MapDataset.source([self_holding()] * 4).to_iter_dataset().batch(2)),
        ValueError,
        rf"An element to batch {TOO_DEEP} \(.*\), or contains itself",
    ),
    "batch_and_pad of a deeply nested element": (
        lambda: fn.batch_and_pad([nested(DEPTH)], batch_size=3),
        ValueError,
        rf"The element to pad {TOO_DEEP}",
    ),
    "rebatch of self-holding batches": (
        lambda: read(rebatch(self_holding())),
        ValueError,
        rf"A batch to rebatch {TOO_DEEP}",
    ),
    "a source of deeply nested arrays": (
        lambda: fn.source(nested_dict(DEPTH)),
        ValueError,
        rf"A tree of arrays {TOO_DEEP}",
    ),
    "a deeply nested length_struct": (
        lambda: pack({"x": nested_dict(DEPTH)}),
        ValueError,
        rf"length_struct\['x'\] {TOO_DEEP}",
    ),
    "a deeply nested length_struct as a whole": (
        lambda: pack(nested(DEPTH)),
        TypeError,
        rf"length_struct must be a dict .* got {SHORT_DEEP} of type list",
    ),
    "packing deeply nested elements": (
        lambda: read(
            grain.experimental.FirstFitPackIterDataset(
                grain.MapDataset.source([nested(DEPTH)] * 2).to_iter_dataset(),
                length_struct={"x": 4},
                num_packing_bins=2,
            )
        ),
        TypeError,
        rf"Packing takes dict elements .* got {SHORT_DEEP} of type list",
    ),
    "mix of a deeply nested list": (
        lambda: grain.MapDataset.mix(nested(DEPTH)),
        TypeError,
        rf"MapDataset.mix takes MapDatasets, got {SHORT_DEEP}\.",
    ),
    "zip of a self-holding list": (
        lambda: fn.zip([self_holding()]),
        TypeError,
        rf"zip takes grainfn datasets or streams, but item 0 is {SHORT_DEEP} of type list",
    ),
    "concatenate of a deeply nested value": (
        lambda: fn.concatenate(nested_dict(DEPTH)),
        TypeError,
        r"concatenate takes a list of datasets, got \{'a': \{'a': \{'a': \{",
    ),
    "shard_options of a deeply nested list": (
        lambda: grain.IndexSampler(10, nested(DEPTH)),
        TypeError,
        rf"shard_options must be a grainfn ShardOptions .* got {SHORT_DEEP} of type list",
    ),
    "a filter ratio of a self-holding list": (
        lambda: grain.experimental.DatasetOptions(filter_warn_threshold_ratio=self_holding()),
        ValueError,
        rf"filter_warn_threshold_ratio must be a ratio in \[0, 1\] or None, got {SHORT_DEEP}",
    ),
    "an elastic state of a deeply nested list": (
        lambda: elastic_state(nested(DEPTH)),
        ValueError,
        rf"takes a state \{{'global_next_index': n\}}, got {SHORT_DEEP}\.",
    ),
    "an elastic position of a deeply nested list": (
        lambda: elastic_state({"global_next_index": nested(DEPTH)}),
        ValueError,
        rf"global_next_index must be an integer >= 0, got {SHORT_DEEP}\.",
    ),
}


@pytest.mark.parametrize("case", REFUSED)
def test_bad_input_is_refused_naming_the_value_and_what_is_allowed(case: str) -> None:
    call, error, message = REFUSED[case]
    with pytest.raises(error, match=message) as caught:
        call()
    assert type(caught.value) is error  # not a subclass raised from deep inside


def test_values_past_64_bits_that_select_one_element_read_exactly() -> None:
    """A range of big numbers, and a slice step past 64 bits, read as Python reads them."""
    big = fn.range(2**70, 2**70 + 5, 2)
    assert list(fn.elements(big)) == list(range(2**70, 2**70 + 5, 2))
    assert big.get_many([0, 4]) == [2**70, 2**70 + 2]
    assert [b.tolist() for b in fn.elements(fn.batch(2, big))] == [[2**70, 2**70 + 2], [2**70 + 4]]
    assert list(fn.elements(fn.slice(slice(None, None, 2**64), RANGE))) == [0]
    assert list(TEN[3 :: -(2**70)]) == [3]


USER_ERRORS: dict[str, tuple[Callable[[], Any], type[Exception], str]] = {
    "a source's IndexError": (
        lambda: read(grain.MapDataset.source(Records())),
        IndexError,
        r"Raised by the data source source\(Records, length 10\), reading source\[3\] "
        r"\(position 3\)\.",
    ),
    "a source's KeyError in a later epoch": (
        lambda: grain.MapDataset.source(Records(KeyError)).repeat(2)[13],
        KeyError,
        r"source\(Records, length 10\), reading source\[3\] \(position 13\)",
    ),
    "a source's ValueError in a batch": (
        lambda: read(grain.MapDataset.source(Records(ValueError)).batch(4)),
        ValueError,
        r"source\(Records, length 10\), reading source\[3\] \(position 3\)",
    ),
    "a batched source's error read by threads": (
        lambda: read(
            grain.MapDataset.source(BatchedRecords()).to_iter_dataset(
                grain.ReadOptions(num_threads=2)
            )
        ),
        IndexError,
        r"source\(BatchedRecords, length 10\), reading source\[3\] \(position 3\)",
    ),
    "a source's error through fn.elements": (
        lambda: read(fn.shuffle(fn.source(BatchedRecords()), seed=1)),
        IndexError,
        r"source\(BatchedRecords, length 10\), reading source\[3\]",
    ),
    "a source's error in a DataLoader": (
        lambda: read(
            grain.DataLoader(
                data_source=Records(), sampler=grain.SequentialSampler(10), operations=[]
            )
        ),
        IndexError,
        r"source\(Records, length 10\), reading source\[3\] \(position 3\)",
    ),
    "a source's error in elastic batches": (
        lambda: read(fn.elastic_batches(2, fn.source(Records()), num_logical_shards=2)),
        IndexError,
        r"source\(Records, length 10\), reading source\[3\]",
    ),
    "a source's error in a worker": (
        lambda: read(
            grain.MapDataset.source(Records())
            .to_iter_dataset()
            .mp_prefetch(grain.MultiprocessingOptions(num_workers=1))
        ),
        IndexError,
        r"source\(Records, length 10\), reading source\[3\] \(position 3\)",
    ),
    "a source's len() error": (
        lambda: grain.MapDataset.source(NoLength()),
        OSError,
        r"Raised by len\(\) of the data source NoLength\.",
    ),
    "a map's error read by fn.elements": (
        lambda: read(fn.map(parse, RANGE)),
        ParseError,
        r"Raised by the function of map\(parse\), reading position 6\.",
    ),
    "a map's error under a map-level batch": (
        lambda: read(TEN.map(parse).batch(3)),
        ParseError,
        r"map\(parse\), reading position 6",
    ),
    "a map's error under a batch read by index": (
        lambda: TEN.map(parse).batch(3)[2],
        ParseError,
        r"map\(parse\), reading position 6",
    ),
    "a map's error under zip": (
        lambda: grain.experimental.ZipMapDataset([TEN, TEN.map(parse)])[6],
        ParseError,
        r"map\(parse\), reading position 6",
    ),
    "a map's error under flat_map": (
        lambda: fn.flat_map(lambda x: [x, x], fn.map(parse, RANGE), max_fan_out=2).get(13),
        ParseError,
        r"map\(parse\), reading position 6",
    ),
    "a selection map's KeyError": (
        lambda: grain.MapDataset.select_from_datasets([TEN], {1: (0, 1)})[0],
        KeyError,
        r"Raised by the function of select_from_datasets\(dict\), reading position 0\.",
    ),
    "a user MapDataset's error": (
        lambda: read(Broken().map(lambda x: x)),
        KeyError,
        r"Raised by the function of Broken, reading position 3\.",
    ),
    "a user iterator's error": (
        lambda: read(fn.from_iterable(BrokenIterable())),
        ConnectionError,
        r"Raised by the iterator of from_iterable\(BrokenIterable\), reading its element 3",
    ),
}


@pytest.mark.parametrize("case", USER_ERRORS)
def test_a_user_error_keeps_its_type_and_names_where_it_was_raised(case: str) -> None:
    call, error, note = USER_ERRORS[case]
    with pytest.raises(error) as caught:
        call()
    assert type(caught.value) is error
    notes = "\n".join(getattr(caught.value, "__notes__", []))
    assert re.search(note, notes), notes


def test_a_source_error_names_its_position_once_per_read() -> None:
    """The note is added where the source raised, not again by every stage above it."""
    ds = grain.MapDataset.source(Records()).map(lambda x: x).shuffle(seed=1).batch(2)
    with pytest.raises(IndexError) as caught:
        read(ds)
    notes = caught.value.__notes__
    assert len([n for n in notes if "Raised by the data source" in n]) == 1, notes

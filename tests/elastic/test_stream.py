"""elastic_batches: the global batches depend on the logical shards alone, never on the hosts.

The reference is the definition itself: global batch `b` stacks elements
`[b * r, (b + 1) * r)` of logical shard 0, then of shard 1, ..., each shard
being `logical_shard(stream, s, L)` read on its own. Every host count that
divides L must give those batches (the hosts' rows stacked in host order),
and a state saved by one host count must continue under another.
"""

from __future__ import annotations

import functools
import itertools
import zlib
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest
from hypothesis import Phase, assume, event, find, given, note, reject, settings
from hypothesis import strategies as st

import grainfn.testing
from grainfn import fn
from grainfn._src.core.dataset import INFINITE, upstream_holes
from grainfn._src.elastic import states
from grainfn._src.elastic.layout import Layout, valid_host_counts
from grainfn._src.elastic.rows import whole_dataset
from grainfn._src.elastic.stream import (
    READ_AHEAD,
    ElasticStream,
    _ElasticCursor,
    elastic_batches,
    host_stream,
)
from grainfn._src.parallel.mp_prefetch import PrefetchedStream
from grainfn._src.shards.logical import logical_shard
from grainfn._src.testing.specs import (
    INTEGERS,
    apply_op,
    declared_kinds,
    declared_stages,
    sample_op,
)

from support.registry import names, undeclared

MAX_BATCHES = 40


def digest(one: list[Any]) -> int:
    """A fixed-size stand-in for any element (None, arrays of any shape), so batches stack."""
    return zlib.crc32(repr(one[0]).encode())


def digested(stream: fn.Stream) -> fn.Stream:
    """`stream` with each element (None too, which `map` passes over) as its digest."""
    return fn.batch(1, stream, batch_fn=digest)


def reference_batches(stream: fn.Stream, layout: Layout) -> list[np.ndarray]:
    """The global batches by definition: `r` elements of each logical shard in turn."""
    r = layout.rows_per_shard
    try:
        shards = [  # up to what MAX_BATCHES need: a shard of an infinite dataset never ends
            list(
                itertools.islice(
                    fn.iterate(logical_shard(stream, s, layout.num_logical_shards)), r * MAX_BATCHES
                )
            )
            for s in range(layout.num_logical_shards)
        ]
    except (ValueError, TypeError):
        reject()  # the pipeline itself fails (a ragged batch inside it), with or without shards
    count = min(len(elements) // r for elements in shards)
    try:
        return [
            np.stack([e for shard in shards for e in shard[b * r : (b + 1) * r]])
            for b in range(min(count, MAX_BATCHES))
        ]
    except ValueError:
        reject()  # elements of different shapes (batches of a short last batch) do not stack


def host_streams(stream: fn.Stream, layout: Layout, hosts: int) -> list[fn.Stream]:
    return [host_stream(stream, layout.for_host(h, hosts)) for h in range(hosts)]


def global_batches(streams: list[fn.Stream], states: list[Any] | None = None) -> list[np.ndarray]:
    """The hosts' rows stacked in host order, step by step, until one host ends."""
    iterators = [fn.iterate(s, state) for s, state in zip(streams, states or [None] * len(streams))]
    batches = []
    for _ in range(MAX_BATCHES):
        parts = [next(it, None) for it in iterators]
        if any(part is None for part in parts):
            return batches
        batches.append(np.concatenate(parts))
    return batches


def assert_same_batches(got: list[np.ndarray], expected: list[np.ndarray]) -> None:
    assert len(got) == len(expected)
    for step, (a, b) in enumerate(zip(got, expected)):
        np.testing.assert_array_equal(a, b, err_msg=f"global batch {step}")


def run_and_save(hosts: list[fn.Stream], steps: int) -> tuple[list[np.ndarray], dict[str, Any]]:
    """`steps` global batches of the hosts, and their saved states merged (as on a restore)."""
    iterators = [fn.iterate(s) for s in hosts]
    taken = [np.concatenate([next(it) for it in iterators]) for _ in range(steps)]
    saved = [
        (f"process_{h}-of-{len(hosts)}.json", states.ElasticCodec(s).encode(it.state))
        for h, (s, it) in enumerate(zip(hosts, iterators))
    ]
    return taken, states.merge(saved)


layouts = st.sampled_from([1, 2, 3, 4, 6]).flatmap(
    lambda shards: st.tuples(
        st.integers(1, 3).map(lambda rows: rows * shards),
        st.just(shards),
        st.sampled_from(valid_host_counts(shards)),
    )
)


@given(grainfn.testing.streams(), layouts)
def test_every_host_count_gives_the_global_batches_of_the_logical_shards(
    stream: fn.Stream, layout_args: tuple[int, int, int]
) -> None:
    size, shards, hosts = layout_args
    stream = digested(stream)
    layout = Layout(size, shards)
    note(f"{layout}, {hosts} hosts\n{stream!r}")
    expected = reference_batches(stream, layout)
    assert_same_batches(global_batches(host_streams(stream, layout, hosts)), expected)


@given(grainfn.testing.streams(), layouts, layouts, st.integers(0, 6))
def test_a_state_saved_by_some_hosts_continues_on_any_other_count(
    stream: fn.Stream, before: tuple[int, int, int], after: tuple[int, int, int], steps: int
) -> None:
    size, shards, hosts = before
    resumed_hosts = after[2] if shards % after[2] == 0 else 1
    stream = digested(stream)
    layout = Layout(size, shards)
    note(f"{layout}: {hosts} hosts, then {resumed_hosts}\n{stream!r}")
    expected = reference_batches(stream, layout)
    first = host_streams(stream, layout, hosts)
    taken, merged = run_and_save(first, min(steps, len(expected)))
    second = host_streams(stream, layout, resumed_hosts)
    restored = [states.ElasticCodec(s).decode(merged) for s in second]
    assert_same_batches((taken + global_batches(second, restored))[:MAX_BATCHES], expected)


@given(grainfn.testing.datasets(), layouts, st.integers(0, 4))
def test_a_map_level_pipeline_read_as_one_dataset_gives_the_same_batches_and_states(
    ds: fn.Dataset, layout_args: tuple[int, int, int], steps: int
) -> None:
    size, shards, hosts = layout_args
    # A shard of an endless dataset whose filter drops all its positions never yields.
    assume(ds.length < INFINITE or upstream_holes(ds) is None)
    stream = fn.from_dataset(ds)
    layout = Layout(size, shards)
    note(f"{layout}, {hosts} hosts\n{stream!r}")
    expected = reference_batches(stream, layout)
    first = host_streams(stream, layout, hosts)
    event(f"read as one dataset: {whole_dataset(first[0].components, first[0].layout) is not None}")
    taken, merged = run_and_save(first, min(steps, len(expected)))
    if upstream_holes(ds) is None:  # read as one dataset: the shards' own positions follow
        for shard, state in merged["shards"].items():
            rows = len(taken) * layout.rows_per_shard
            assert state["state"] == {"kind": "DatasetPosition", "position": rows}, shard
    one = host_stream(stream, layout)
    resumed = global_batches([one], [states.ElasticCodec(one).decode(merged)])
    assert_same_batches((taken + resumed)[:MAX_BATCHES], expected)


def test_workers_run_once_per_host_and_change_nothing() -> None:
    base = fn.filter(lambda x: x % 5 != 0, fn.from_dataset(fn.shuffle(fn.range(600), seed=2)))
    layout = Layout(12, 6, host=1, num_hosts=2)
    with_workers = host_stream(fn.mp_prefetch(2, base), layout)
    assert isinstance(with_workers, PrefetchedStream)
    assert isinstance(with_workers.parent, ElasticStream)
    assert not any(isinstance(s, PrefetchedStream) for s in with_workers.parent.components)
    got = [b.tolist() for b in fn.iterate(with_workers)]
    assert got == [b.tolist() for b in fn.iterate(host_stream(base, layout))]
    shard_sizes = [len(list(fn.iterate(logical_shard(base, s, 6)))) for s in layout.shards]
    assert len(got) == min(shard_sizes) // 2  # until the first of its shards is short


class Logged:
    """`x -> x`, appending `x` to a file at each call: what worker processes read, counted."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __call__(self, x: int) -> int:
        with open(self.path, "a") as log:
            log.write(f"{x}\n")
        return x


@pytest.mark.parametrize("holes", [False, True])
def test_with_workers_each_position_is_read_once_with_states_after_every_batch(
    tmp_path: Any, holes: bool
) -> None:
    def base(log: str) -> Any:
        data = fn.map(Logged(log), fn.shuffle(fn.range(1_200), seed=3))
        return fn.from_dataset(fn.filter(lambda x: x % 7 != 0, data) if holes else data)

    log = tmp_path / "read"
    pinned = fn.mp_prefetch(2, base(str(log)), adaptive=False)
    iterator = fn.iterate(elastic_batches(8, pinned, num_logical_shards=4))
    got, states = [], []
    for batch in iterator:  # the iterator takes the state after every batch: it reads in workers
        got.append(batch.tolist())
        states.append(iterator.state)
    iterator.close()
    here = fn.iterate(elastic_batches(8, base(str(tmp_path / "here")), num_logical_shards=4))
    want = [(batch.tolist(), here.state) for batch in here]
    assert list(zip(got, states)) == want
    read = [int(line) for line in log.read_text().split()]
    assert sorted(read) == list(range(1_200)), "a position read twice (or never) by the workers"


def test_the_host_stream_ends_before_a_global_batch_it_cannot_fill() -> None:
    stream = elastic_batches(4, fn.range(10), num_logical_shards=2)
    iterator = fn.iterate(stream)
    assert [b.tolist() for b in iterator] == [[0, 2, 1, 3], [4, 6, 5, 7]]
    assert iterator.state.stopped
    assert next(fn.iterate(stream, iterator.state), None) is None


def fails_past_23(x: int) -> int:
    if x > 23:
        raise ValueError(f"{x} is past the batches asked for")
    return x


def test_asking_for_batches_reads_no_block_past_them() -> None:
    # The iterator finds its state after an error by stepping over the batches it handed
    # out; a block read past them, as a block grown to READ_AHEAD would be, meets the error.
    host = host_stream(fn.map(fails_past_23, fn.from_dataset(fn.range(64))), Layout(8, 4))
    cursor = host.open(host.init())
    assert isinstance(cursor, _ElasticCursor)
    cursor.sizer.size = READ_AHEAD  # as after many cheap reads
    got = [batch.tolist() for batch in cursor.next_many(3)]
    assert [sorted(batch) for batch in got] == [list(range(b * 8, b * 8 + 8)) for b in range(3)]
    with pytest.raises(ValueError, match="24 is past the batches asked for"):
        cursor.next()


def test_the_state_after_a_failed_batch_is_after_the_batches_handed_out() -> None:
    host = host_stream(fn.map(fails_past_23, fn.from_dataset(fn.range(64))), Layout(8, 4))
    it, taken = fn.iterate(host), []
    with pytest.raises(ValueError, match="past the batches asked for"):
        while True:
            taken.append(next(it))
    twin = fn.iterate(host_stream(fn.from_dataset(fn.range(64)), Layout(8, 4)))
    assert [b.tolist() for b in taken] == [next(twin).tolist() for _ in taken]
    assert it.state == twin.state


def tokens(x: int) -> dict[str, np.ndarray]:
    return {"tokens": np.arange(x % 5 + 1, dtype=np.int32) + x}


def pieces(x: int) -> list[int]:
    return [x] * (x % 3)


def kept_integers(seed: int) -> fn.Stream:
    """The filtered source every stage reads: a shuffled range with holes."""
    return fn.filter(lambda x: x % 7 != 3, fn.from_dataset(fn.shuffle(fn.range(240), seed=seed)))


def packing(pack: Callable[..., fn.Stream]) -> Callable[[fn.Stream, int], fn.Stream]:
    """A packing stage over the kept integers as token arrays."""
    return lambda kept, seed: pack(
        {"tokens": 8}, fn.map(tokens, kept), num_packing_bins=3, seed=seed
    )


def named_mix(kept: fn.Stream, seed: int) -> fn.Stream:
    return fn.mix({"a": kept, "b": fn.from_dataset(fn.range(1000, 1120))}, {"a": 2, "b": 1})


NO_DECLARATION = "it declares no random_stage: random pipelines do not draw it"
PACKING = "packing reads lengths of token arrays, not the random pipelines' integers"
UNDRAWN: dict[str, tuple[str, Callable[[fn.Stream, int], fn.Stream], str]] = {
    # name: (its stage kind's class name, its pipeline over the kept integers and a seed,
    # why it is here)
    "flat_map": ("FlatMappedStream", lambda kept, seed: fn.flat_map(pieces, kept), NO_DECLARATION),
    "named mix": ("MixedStream", named_mix, "a declared head, over streams (named ones here)"),
    "rebatch": (
        "RebatchedStream",
        lambda kept, seed: fn.rebatch(2, fn.batch(3, kept)),
        NO_DECLARATION,
    ),
    "window_shuffle": (
        "WindowShuffledStream",
        lambda kept, seed: fn.window_shuffle(5, kept, seed=seed),
        "declared at map level only: random stream pipelines do not draw it",
    ),
    "cache": ("CachedStream", lambda kept, seed: fn.cache(kept), NO_DECLARATION),
    "zip": (
        "ZippedStream",
        lambda kept, seed: fn.zip([kept, fn.map(str, kept)]),
        "a declared head the random pipelines do not draw (its tuples)",
    ),
    "timed": ("TimedStream", lambda kept, seed: fn.timed(kept), NO_DECLARATION),
    "first_fit": ("PackedStream", packing(fn.first_fit_pack), PACKING),
    "best_fit": ("PackedStream", packing(fn.best_fit_pack), PACKING),
    "concat_then_split": (
        "ConcatThenSplitStream",
        lambda kept, seed: fn.concat_then_split({"tokens": 8}, fn.map(tokens, kept)),
        PACKING,
    ),
}
"""The stream stages the elastic iterator must carry that random pipelines do not
draw from a `random_stage` declaration, and the declared heads (which combine
streams): each one's kind, pipeline and reason."""

NOT_CARRIED: dict[str, str] = {
    "FromDatasetStream": "the head of every pipeline here (the kept integers)",
    "IterableStream": "an iterable has no positions: a logical shard cannot be cut from it",
    "InterleavedDatasetsStream": "refused (test_a_stage_without_positions_to_slice_is_refused)",
    "ElasticStream": "the elastic iterator itself",
    "GrainWorkerOrderStream": "Grain's worker order, read by the facade's loaders",
    "PackAndBatchStream": "the loaders' packing batch, not a function of fn",
    "PooledLeaf": "a worker pool's leaf, made by mp_prefetch in a worker",
    "PrefetchedStream": "mp_prefetch: test_workers_run_once_per_host_and_change_nothing",
    "RayPrefetchedStream": "ray's prefetch, an executor whose workers are ray's",
    "WithOptionsStream": "reading options, an executor: it reads its parent's positions",
    "ThreadPrefetchedStream": "an executor whose threads outlive the iterators this test drops",
    "PutOnDeviceStream": "device_put, an executor: it reads its parent's positions",
    "ParquetFileStream": "a file format's reader, read by rows of files, not by positions here",
    "TFRecordStream": "a file format's reader, read by records of files, not by positions here",
}
"""The stream stage kinds without a declaration that this test does not build, and why."""


def long_enough(op: tuple[Any, ...]) -> bool:
    """Whether a stage's spec builds over the kept integers, with 4 global batches to resume."""
    try:
        stream = apply_op(op, kept_integers(7))
        return len(list(itertools.islice(fn.iterate(stream), 32))) == 32
    except ValueError:  # a stage that needs a seed its pipeline lacks, drawn with none
        return False


TOO_SHORT: dict[str, str] = {
    "limit": "its count is at most 30: fewer elements than 4 global batches of 8",
    "take_while": "its predicates (keep_even, keep_mostly) end the shuffled integers early",
}
"""The declared stream stages whose samples cannot fill the batches this test resumes."""


@functools.cache
def declared_ops() -> dict[str, tuple[Any, ...]]:
    """The simplest spec of each declared stream stage whose pipeline is long enough."""
    quiet = settings(database=None, phases=[Phase.generate], max_examples=200)
    ops = {}
    for name, stage in declared_kinds(INTEGERS, "stream").items():
        if name not in TOO_SHORT:
            drawn = st.composite(lambda draw, s=stage: sample_op(draw, {s.name: s}, INTEGERS))()
            ops[name] = find(drawn, long_enough, settings=quiet)
    return ops


def every_stage(seed: int) -> dict[str, fn.Stream]:
    """A pipeline for each stream stage the elastic iterator must carry, over filtered sources."""
    kept = kept_integers(seed)
    return {
        **{name: apply_op(op, kept) for name, op in declared_ops().items()},
        **{name: build(kept, seed) for name, (_, build, _) in UNDRAWN.items()},
    }


def test_every_stream_stage_kind_is_declared_built_here_or_not_carried() -> None:
    heads = {kind for kind, stage in declared_stages("stream") if stage.combines}
    kinds = set(names(undeclared("stream") | heads))  # a head is built here, over streams
    built = {kind for kind, _, _ in UNDRAWN.values()}
    missing = sorted(kinds - built - set(NOT_CARRIED))
    assert not missing, f"{missing}: declare random_stage, or add to UNDRAWN or NOT_CARRIED"
    assert built | set(NOT_CARRIED) <= kinds, "declared, so drawn, or not a stage kind"
    assert set(TOO_SHORT) <= set(declared_kinds(INTEGERS, "stream"))
    assert all(reason for _, _, reason in UNDRAWN.values()) and all(NOT_CARRIED.values())


@pytest.mark.parametrize("stage", list(every_stage(0)))
def test_every_stream_stage_gives_the_same_global_batches_on_any_hosts_and_resumes(
    stage: str,
) -> None:
    stream = digested(every_stage(7)[stage])
    layout = Layout(8, 4)
    expected = reference_batches(stream, layout)
    assert len(expected) >= 4, f"{stage}: too short to resume twice"
    for hosts in (1, 2, 4):
        got = global_batches(host_streams(stream, layout, hosts))
        assert_same_batches(got, expected)
    # 4 hosts run two steps and save, 2 restore and run two more and save, 1 finishes.
    taken, merged = run_and_save(host_streams(stream, layout, 4), 2)
    two = host_streams(stream, layout, 2)
    restored = [states.ElasticCodec(s).decode(merged) for s in two]
    iterators = [fn.iterate(s, state) for s, state in zip(two, restored)]
    for _ in range(2):
        taken.append(np.concatenate([next(it) for it in iterators]))
    saved = [
        (f"process_{h}-of-2.json", states.ElasticCodec(s).encode(it.state))
        for h, (s, it) in enumerate(zip(two, iterators))
    ]
    one = host_stream(stream, layout)
    rest = global_batches([one], [states.ElasticCodec(one).decode(states.merge(saved))])
    assert_same_batches((taken + rest)[:MAX_BATCHES], expected)


@pytest.mark.parametrize(("host", "num_hosts"), [(0, 1), (1, 2)])
def test_the_element_spec_is_one_hosts_rows_of_a_global_batch(host: int, num_hosts: int) -> None:
    data = fn.batch(3, fn.range(30), drop_remainder=True)
    stream = fn.elastic_batches(4, data, num_logical_shards=2, host=host, num_hosts=num_hosts)
    spec = fn.element_spec(stream)
    first = next(iter(fn.iterate(stream)))
    assert (spec.shape, spec.dtype) == ((4 // num_hosts, 3), np.int64)
    assert first.shape == spec.shape and first.dtype == spec.dtype

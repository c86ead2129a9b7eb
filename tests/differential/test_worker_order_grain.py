"""Grain's worker order (`mp_prefetch(..., grain_worker_order=True)`) against Grain 0.2.18.

Grain's `mp_prefetch` output depends on its worker count: each worker runs the
pipeline over its own slice of the data, and their elements come in turn.
With `grain_worker_order=True`, grainfn yields the same elements in the same
order, for any worker count and buffer size, reads the state Grain's
`mp_prefetch` wrote, and writes one Grain's `mp_prefetch` reads.
"""

from __future__ import annotations

import itertools
from typing import Any

import grain
import numpy as np
import pytest
from absl import flags
from hypothesis import assume, given, note, settings
from hypothesis import strategies as st

import grainfn
from grainfn import fn

from pipelines import build_grain_stream, stream_specs

pytestmark = pytest.mark.grain

LIMIT = 60


@pytest.fixture(autouse=True)
def absl_flags_parsed() -> None:
    if not flags.FLAGS.is_parsed():  # Grain's worker processes read absl flags
        flags.FLAGS.mark_as_parsed()


def with_workers(module: Any, ds: Any, workers: int, buffer: int = 1) -> Any:
    options = module.MultiprocessingOptions(num_workers=workers, per_worker_buffer_size=buffer)
    if module is grain:
        return ds.mp_prefetch(options)
    return ds.mp_prefetch(options, grain_worker_order=True)


def plain(element: Any) -> Any:
    return np.asarray(element).tolist()


def read(iterator: Any, limit: int = LIMIT) -> list[Any]:
    out = [plain(e) for e in itertools.islice(iterator, limit)]
    if hasattr(iterator, "close"):
        iterator.close()
    return out


def grain_reads(spec: tuple[Any, ...]) -> bool:
    """Whether Grain reads the pipeline without workers (some random specs it refuses)."""
    try:
        list(itertools.islice(iter(build_grain_stream(spec, grain)), LIMIT))
    except (ValueError, TypeError):
        return False
    return True


@settings(max_examples=6, deadline=None)
@given(stream_specs(), st.integers(1, 3), st.integers(1, 3))
def test_random_pipelines_come_in_grains_worker_order(
    spec: tuple[Any, ...], workers: int, buffer: int
) -> None:
    note(f"spec = {spec!r}")
    assume(grain_reads(spec))
    theirs = read(iter(with_workers(grain, build_grain_stream(spec, grain), workers, buffer)))
    ours = read(iter(with_workers(grainfn, build_grain_stream(spec, grainfn), workers, buffer)))
    assert ours == theirs


def test_the_order_is_grains_not_grainfns_own() -> None:
    ds = shuffled_batches(grainfn)
    own = read(iter(ds.mp_prefetch(grainfn.MultiprocessingOptions(num_workers=2))))
    ordered = read(iter(with_workers(grainfn, ds, 2)))
    assert ordered == read(iter(with_workers(grain, shuffled_batches(grain), 2)))
    assert ordered != own  # each worker batches its own slice
    # The same elements (their draws differ: worker w draws for indices w, w + 2, ...).
    assert sorted(x // 100 for b in ordered for x in b) == sorted(x // 100 for b in own for x in b)


def shuffled_batches(module: Any) -> Any:
    """A shuffle, a filter, random draws and batches: every worker's slice differs."""
    return (
        module.MapDataset.range(60)
        .seed(3)
        .shuffle()
        .to_iter_dataset()
        .filter(lambda x: x % 3 != 0)
        .random_map(lambda x, rng: x * 100 + int(rng.integers(100)))
        .batch(4)
    )


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("taken", [0, 3, 5])
def test_grains_mp_prefetch_state_continues_in_grainfn(workers: int, taken: int) -> None:
    theirs = iter(with_workers(grain, shuffled_batches(grain), workers))
    list(itertools.islice(theirs, taken))
    state = theirs.get_state()
    expected = read(theirs)
    ours = iter(with_workers(grainfn, shuffled_batches(grainfn), workers))
    ours.set_state(state)
    assert read(ours) == expected


@pytest.mark.parametrize("workers", [2, 3])
@pytest.mark.parametrize("taken", [0, 4])
def test_a_state_written_for_grains_mp_prefetch_continues_in_grain(
    workers: int, taken: int
) -> None:
    ours = iter(with_workers(grainfn, shuffled_batches(grainfn), workers))
    list(itertools.islice(ours, taken))
    written = ours.grain_state()
    theirs = iter(with_workers(grain, shuffled_batches(grain), workers))
    list(itertools.islice(theirs, taken))
    assert written == theirs.get_state()
    theirs.close()
    restored = iter(with_workers(grain, shuffled_batches(grain), workers))
    restored.set_state(written)
    assert read(restored) == read(ours)


def test_grainfn_states_in_grains_order_restore_with_and_without_workers() -> None:
    stream = fn.grain_worker_order(3, fn.from_dataset(fn.shuffle(fn.range(40), seed=2)))
    iterator = fn.iterate(fn.mp_prefetch(2, stream))
    head = list(itertools.islice(iterator, 11))
    state = iterator.state
    iterator.close()
    want = list(fn.iterate(stream))
    assert head + list(fn.iterate(stream, state)) == want
    assert sorted(want) == list(range(40))  # every position once

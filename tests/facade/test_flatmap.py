"""FlatMap (with Limit, Repeat and a window shuffle): equal to Grain, resumable, worker-blind.

Grain's headline use of a map-level flat_map is splitting documents into
chunks and shuffling the chunks globally; the pipelines here do that.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import grainfn as grain
from grainfn.testing import assert_elements_equal, assert_resumable

pytestmark = pytest.mark.grain

CHUNK = 4


def document(index: int) -> np.ndarray:
    """A deterministic document of 1 to 14 tokens."""
    length = 1 + (index * 7919) % 14
    return np.arange(length, dtype=np.int32) + 100 * index


def chunks(doc: np.ndarray) -> list[np.ndarray]:
    return [doc[i : i + CHUNK] for i in range(0, len(doc), CHUNK)]


MAX_CHUNKS = 4  # ceil(14 / CHUNK)


def split_transform(base: type) -> Any:
    class SplitDocument(base):  # type: ignore[misc, valid-type]
        max_fan_out = MAX_CHUNKS

        def flat_map(self, element: np.ndarray) -> Sequence[np.ndarray]:
            return chunks(element)

    return SplitDocument()


def split_shuffled(lib: Any, count: int, seed: int) -> Any:
    """Documents split into chunks at map level, the chunks shuffled globally."""
    docs = lib.MapDataset.range(count).map(document)
    split = lib.experimental.FlatMapMapDataset(
        docs, split_transform(lib.experimental.FlatMapTransform)
    )
    return split.shuffle(seed=seed)


def iter_options(lib: Any) -> Any:
    return lib.ReadOptions(num_threads=0) if lib is not grain else None


def assert_all_equal(ours: Sequence[Any], theirs: Sequence[Any]) -> None:
    assert len(ours) == len(theirs)
    for i, (a, b) in enumerate(zip(ours, theirs)):
        assert_elements_equal(a, b, f"element {i}")


@pytest.mark.slow
@settings(max_examples=25)
@given(count=st.integers(1, 40), seed=st.integers(0, 2**31 - 1))
def test_split_documents_shuffle_globally_as_in_grain(count: int, seed: int) -> None:
    import grain as real

    ours, theirs = split_shuffled(grain, count, seed), split_shuffled(real, count, seed)
    assert len(ours) == len(theirs) == count * MAX_CHUNKS
    positions = range(2 * len(ours))  # two epochs: Nones where a document has fewer chunks
    assert_all_equal([ours[i] for i in positions], [theirs[i] for i in positions])
    ours_iter = list(ours.to_iter_dataset())
    assert_all_equal(ours_iter, list(theirs.to_iter_dataset(iter_options(real))))
    every_chunk = sorted(tuple(c.tolist()) for i in range(count) for c in chunks(document(i)))
    assert sorted(tuple(c.tolist()) for c in ours_iter) == every_chunk


@settings(max_examples=25)
@given(count=st.integers(0, 30), limit=st.integers(0, 40), epochs=st.integers(1, 3))
def test_iter_flat_map_limit_and_repeat_match_grain(count: int, limit: int, epochs: int) -> None:
    import grain as real

    def build(lib: Any) -> Any:
        ds = lib.MapDataset.range(count).map(document).to_iter_dataset(iter_options(lib))
        ds = lib.experimental.FlatMapIterDataset(
            ds, split_transform(lib.experimental.FlatMapTransform)
        )
        ds = lib.experimental.LimitIterDataset(ds, count=max(limit, 1))
        return lib.experimental.RepeatIterDataset(ds, num_epochs=epochs)

    assert_all_equal(list(build(grain)), list(build(real)))


class NotThirds(grain.transforms.Filter):
    def filter(self, element: int) -> bool:
        return element % 3 > 0


def experimental_pipelines() -> list[Any]:
    def split() -> Any:
        return split_shuffled(grain, 12, seed=5).to_iter_dataset()

    def limited_repeat() -> Any:
        ds = grain.experimental.FlatMapIterDataset(
            grain.MapDataset.range(9).map(document).to_iter_dataset(),
            split_transform(grain.transforms.FlatMap),
        )
        ds = grain.experimental.LimitIterDataset(ds, count=13)
        return grain.experimental.RepeatIterDataset(ds, num_epochs=2).batch(3, batch_fn=list)

    def window_shuffled() -> Any:
        ds = grain.experimental.WindowShuffleMapDataset(
            grain.MapDataset.range(30), window_size=7, seed=3
        )
        return grain.experimental.apply_transformations(
            ds.to_iter_dataset(), [NotThirds(), grain.transforms.Batch(4)]
        )

    return [split, limited_repeat, window_shuffled]


@pytest.mark.parametrize("make", experimental_pipelines())
def test_every_stage_resumes_at_any_element(make: Any) -> None:
    elements = len(list(make()))
    assert_resumable(lambda: make().core, max_elements=elements, resume_points=elements + 1)


@pytest.mark.parametrize("make", experimental_pipelines())
def test_the_output_does_not_depend_on_the_worker_count(make: Any) -> None:
    expected = list(make())
    for workers in (1, 2):
        options = grain.MultiprocessingOptions(num_workers=workers)
        assert_all_equal(list(make().mp_prefetch(options)), expected)

"""seed: passes elements through and seeds the random stages downstream that have no seed."""

from __future__ import annotations

import numpy as np
import pytest

from grainfn import fn

from support import conformance


def draw(x: int, rng: np.random.Generator) -> int:
    return int(rng.integers(1000))


def test_seed_derives_distinct_reproducible_seeds() -> None:
    seeded = fn.seed(42, fn.range(100))
    first, second = fn.shuffle(seeded), fn.shuffle(fn.shuffle(seeded))
    assert first.seed != second.seed
    assert fn.shuffle(fn.seed(42, fn.range(100))).seed == first.seed
    explicit = fn.shuffle(seeded, seed=5)
    assert explicit.seed == 5


def test_a_seeded_dataset_passes_its_elements_through() -> None:
    ds = fn.seed(5, fn.range(4))
    assert ds.get_many(range(6)) == [0, 1, 2, 3, 0, 1]
    assert ds.describe_stage() == "seed(5)"


def test_a_seeded_stream_keeps_its_parents_state_and_seeds_random_maps() -> None:
    stream = fn.seed(5, fn.from_dataset(fn.range(4)))
    assert stream.init() == fn.DatasetPosition(0)
    assert list(fn.iterate(stream)) == [0, 1, 2, 3]
    assert stream.describe_stage() == "seed(5)"
    drawn = fn.random_map(draw, stream)
    again = fn.random_map(draw, fn.seed(5, fn.from_dataset(fn.range(4))))
    other = fn.random_map(draw, fn.seed(6, fn.from_dataset(fn.range(4))))
    assert drawn.seed == again.seed != other.seed
    assert list(fn.iterate(drawn)) == list(fn.iterate(again)) != list(fn.iterate(other))


@pytest.mark.parametrize("seed", [-1, 2**32, 2**40])
def test_seeds_outside_uint32_are_refused(seed: int) -> None:
    for build in (
        lambda: fn.seed(seed, fn.range(3)),
        lambda: fn.shuffle(fn.range(3), seed=seed),
    ):
        with pytest.raises(ValueError, match=rf"\[0, 2\*\*32\), got {seed}"):
            build()
    with pytest.raises(TypeError, match=r"got 1\.5"):
        fn.shuffle(fn.range(3), seed=1.5)
    # random_map takes any seed >= 0, as Grain does (its generator is keyed by SeedSequence).
    mapped = fn.random_map(lambda x, r: x, fn.range(3), seed=abs(seed))
    assert mapped.get(1) == 1
    with pytest.raises(ValueError, match=r"an integer >= 0, got -1"):
        fn.random_map(lambda x, r: x, fn.range(3), seed=-1)


test_conforms = conformance.conforms(
    conformance.Example("seed(3)", lambda: fn.seed(3, fn.range(5))),
    conformance.Example("seed(3)", lambda: fn.seed(3, conformance.numbers(5))),
)

"""grainfn's DataLoader against Grain 0.2.18's, with worker_count=0, on random specs.

Where the shards are uneven and not dropped, Grain reads `len(sampler) //
shard_count` indices per shard, which loses records of the larger shards and
reads extra ones on the smaller; grainfn reads each shard's records exactly
once per epoch. There the two outputs agree on their common prefix (all but the
last, possibly partial, batch of the shorter one).
"""

from __future__ import annotations

import itertools
from typing import Any

import pytest
from hypothesis import given, settings

import grainfn
from grainfn._src.loader.samplers import shard_length

from support.loader_specs import (
    assert_same_elements,
    build_loader,
    build_sampler,
    loader_shard_count,
    loader_specs,
)

pytestmark = pytest.mark.grain

LIMIT = 80
"""Elements read from each loader (infinite epochs are cut here)."""


def read(loader: Any, limit: int = LIMIT) -> list[Any]:
    return list(itertools.islice(iter(loader), limit))


@pytest.mark.slow
@settings(max_examples=120)
@given(loader_specs())
def test_same_elements_as_grain(spec: tuple[Any, ...]) -> None:
    import grain

    ours = read(build_loader(grainfn, spec))
    theirs = read(build_loader(grain, spec))
    sampler = build_sampler(grainfn, spec)
    loader = build_loader(grainfn, spec)
    grain_reads = len(sampler) // loader_shard_count(spec)
    if shard_length(sampler, loader.shard_options) == grain_reads:
        assert_same_elements(ours, theirs)
    else:
        common = min(len(ours), len(theirs)) - 1
        assert_same_elements(ours[:common], theirs[:common])


def test_a_tf_random_map_runs_in_the_dataloader_as_in_grain_and_not_on_datasets() -> None:
    import grain
    import grain.python as grain_python
    import numpy as np

    outputs = []
    for loader_module, transforms in (
        (grain_python, grain.transforms),
        (grainfn, grainfn.transforms),
    ):

        class AddNoise(transforms.TfRandomMap):
            def np_random_map(self, x: int, rng: np.random.Generator) -> int:
                return x + int(rng.integers(100))

        sampler = loader_module.IndexSampler(
            8, shard_options=loader_module.NoSharding(), shuffle=True, num_epochs=1, seed=3
        )
        loader = loader_module.DataLoader(
            data_source=list(range(8)), sampler=sampler, operations=[AddNoise()], worker_count=0
        )
        outputs.append([int(x) for x in loader])
    assert outputs[1] == outputs[0]
    with pytest.raises(NotImplementedError, match="TfRandomMap"):
        grainfn.experimental.apply_transformations(grainfn.MapDataset.range(3), AddNoise())

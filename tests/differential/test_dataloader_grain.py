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

from loader_specs import (
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

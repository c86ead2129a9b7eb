"""Grain's `load` module's facade function: load, a DataLoader in one call, against Grain's."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn as grain

from support.loader_specs import assert_same_elements


def test_load_batches_like_a_loader() -> None:
    loader = grain.load(
        list(range(10)), num_epochs=1, shuffle=True, seed=4, batch_size=4, drop_remainder=True
    )
    batches = list(loader)
    assert [len(b) for b in batches] == [4, 4]
    sampler = grain.IndexSampler(10, shuffle=True, num_epochs=1, seed=4)
    assert np.concatenate(batches).tolist() == [sampler[g].record_key for g in range(8)]


@pytest.mark.grain
def test_load_equals_grains_load() -> None:
    import grain as google_grain

    def run(module: Any) -> list[Any]:
        class Square(module.transforms.Map):
            def map(self, x: int) -> int:
                return x * x

        shard = module.sharding.ShardOptions(1, 2, drop_remainder=True)
        loader = module.load(
            list(range(25)),
            num_epochs=2,
            shuffle=True,
            seed=11,
            shard_options=shard,
            transformations=[Square()],
            batch_size=3,
        )
        return list(loader)

    assert_same_elements(run(grain), run(google_grain))

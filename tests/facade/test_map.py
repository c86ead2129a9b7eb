"""RngPool against Grain 0.2.18: the same draws for the same seed, index and op seed."""

from __future__ import annotations

import grain
import pytest

import grainfn

pytestmark = pytest.mark.grain


@pytest.mark.parametrize(
    ("seed", "index", "op_seed"), [(0, 0, 0), (3, 5, 0), (42, 123456, 7), (2**40, 9, 2**31)]
)
def test_an_rng_pool_hands_out_grains_draws(seed: int, index: int, op_seed: int) -> None:
    draws = []
    for module in (grain, grainfn):
        pool = module.experimental.RngPool(seed)
        rng = pool.acquire_rng(index, op_seed=op_seed)
        first = rng.integers(0, 10**9, 6).tolist()
        pool.release_rng(rng)
        again = pool.acquire_rng(index, op_seed=op_seed).integers(0, 10**9, 6).tolist()
        assert again == first  # a released generator comes back rewound
        draws.append(first)
    assert draws[1] == draws[0]

"""Index math of mix and concatenate against Python references."""

from __future__ import annotations

import sys

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn._src.index import mixing


@given(st.lists(st.integers(1, 400), min_size=1, max_size=5).map(tuple))
def test_mix_keys_count_up_per_component(proportions: tuple[int, ...]) -> None:
    """Each component is read in order: its n-th appearance reads its key n."""
    components, keys = mixing.mix_indices(np.arange(300), proportions)
    seen = [0] * len(proportions)
    for component, key in zip(components.tolist(), keys.tolist()):
        assert key == seen[component]
        seen[component] += 1
    scalar = [mixing.mix_index(k, proportions) for k in range(300)]
    assert list(zip(components.tolist(), keys.tolist())) == scalar


@given(st.lists(st.integers(1, 400), min_size=1, max_size=5).map(tuple))
def test_mix_shares_follow_proportions(proportions: tuple[int, ...]) -> None:
    count = 20 * sum(proportions)
    components, _ = mixing.mix_indices(np.arange(count), proportions)
    counts = np.bincount(components, minlength=len(proportions))
    assert counts.tolist() == [20 * p for p in proportions]


def test_mix_indices_match_scalar_for_huge_positions() -> None:
    proportions = (100, 250, 333)
    indices = np.array([0, 2**40, 2**62, 2**63 - 2], dtype=np.int64)
    components, keys = mixing.mix_indices(indices, proportions)
    expected = [mixing.mix_index(int(i), proportions) for i in indices]
    assert list(zip(components.tolist(), keys.tolist())) == expected


@given(st.lists(st.integers(0, 6), min_size=1, max_size=5))
def test_concatenate_matches_list_concatenation_per_epoch(lengths: list[int]) -> None:
    total = sum(lengths)
    if total == 0:
        return
    components, keys = mixing.concat_indices(np.arange(3 * total), lengths)
    expected = [
        (c, k + epoch * n) for epoch in range(3) for c, n in enumerate(lengths) for k in range(n)
    ]
    assert list(zip(components.tolist(), keys.tolist())) == expected


def test_int_proportions_scale_the_smallest_weight_to_100() -> None:
    assert mixing.int_proportions([1.0, 2.5]) == (100, 250)
    assert mixing.int_proportions([0.2, 0.2, 0.6]) == (100, 100, 300)
    assert mixing.int_proportions([3]) == (100,)


def test_mix_length_ends_where_the_first_component_runs_out() -> None:
    assert mixing.mix_length([5, 3], [100, 100]) == 6
    assert mixing.mix_length([10, 100], [100, 300]) == 40
    assert mixing.mix_length([sys.maxsize, sys.maxsize], [100, 100]) == sys.maxsize


def test_mix_length_agrees_with_mix_index() -> None:
    lengths, proportions = [7, 20, 4], (100, 250, 150)
    length = mixing.mix_length(lengths, proportions)
    reads = [mixing.mix_index(k, proportions) for k in range(length)]
    assert all(key < lengths[component] for component, key in reads)


@pytest.mark.parametrize("proportions", [(100, 200), (3, 5, 7), (70_000, 1)])
def test_mix_pattern_matches_mix_index_with_and_without_a_table(
    proportions: tuple[int, ...],
) -> None:
    pattern = mixing.mix_pattern(proportions)
    positions = [*range(50), 10**6 + 3, 2**40 + 1]
    expected = [mixing.mix_index(k, proportions)[0] for k in positions]
    assert [pattern(k) for k in positions] == expected


def test_mixing_functions_trace_under_jax_jit() -> None:
    import jax
    import jax.numpy as jnp

    indices = np.arange(200, dtype=np.int64)
    jax_indices = jnp.arange(200, dtype=jnp.int32)
    proportions = (100, 250, 175)
    c_jax, k_jax = jax.jit(lambda i: mixing.mix_indices(i, proportions))(jax_indices)
    c_np, k_np = mixing.mix_indices(indices, proportions)
    np.testing.assert_array_equal(c_jax, c_np)
    np.testing.assert_array_equal(k_jax, k_np)

    c_jax, k_jax = jax.jit(lambda i: mixing.concat_indices(i, [3, 0, 7]))(jax_indices)
    c_np, k_np = mixing.concat_indices(indices, [3, 0, 7])
    np.testing.assert_array_equal(c_jax, c_np)
    np.testing.assert_array_equal(k_jax, k_np)


def test_mix_indices_under_jax_x64_for_large_positions() -> None:
    import jax
    import jax.numpy as jnp

    proportions = (100, 300)
    with jax.enable_x64(True):
        positions = jnp.array([0, 10**12, 10**15], dtype=jnp.int64)
        c_jax, k_jax = jax.jit(lambda i: mixing.mix_indices(i, proportions))(positions)
        c_np, k_np = mixing.mix_indices(np.asarray(positions), proportions)
    np.testing.assert_array_equal(c_jax, c_np)
    np.testing.assert_array_equal(k_jax, k_np)

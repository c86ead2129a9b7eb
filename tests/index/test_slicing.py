"""Index math of slice, repeat, mix and concatenate against Python references."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from grainfn._src.index import mixing, slicing

bounds = st.one_of(st.none(), st.integers(-30, 30))
steps = st.one_of(st.none(), st.integers(-5, 5).filter(lambda s: s != 0))


@given(st.integers(0, 25), bounds, bounds, steps)
def test_slice_matches_python_slicing_in_every_epoch(n: int, start, stop, step) -> None:
    sl = slice(start, stop, step)
    first, stride, size = slicing.slice_params(sl, n)
    expected = list(range(n))[sl]
    assert size == len(expected)
    if size == 0:
        return
    indices = np.arange(3 * size)
    got = slicing.slice_indices(indices, first, stride, size, n)
    assert got.tolist() == [e + epoch * n for epoch in range(3) for e in expected]
    assert [slicing.slice_indices(int(i), first, stride, size, n) for i in indices] == got.tolist()


@given(st.lists(st.integers(-20, 19), min_size=1, max_size=10))
def test_take_matches_python_indexing(positions: list[int]) -> None:
    n = 20
    table = slicing.index_table(positions, n)
    expected = [list(range(n))[p] for p in positions]
    got = slicing.take_indices(np.arange(2 * len(positions)), table, n).tolist()
    assert got == expected + [e + n for e in expected]


def test_index_table_names_out_of_range_position() -> None:
    with pytest.raises(IndexError, match="slice position 7 is out of range"):
        slicing.index_table([0, 7], 5)
    with pytest.raises(TypeError, match="must be integers, got 'a'"):
        slicing.index_table(["a"], 5)


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


def test_addressable_guard() -> None:
    slicing.check_addressable(2**62, 10, 10)
    with pytest.raises(OverflowError, match="past the last addressable position"):
        slicing.check_addressable(10, 10, 2**63 - 1)


def test_index_functions_trace_under_jax_jit() -> None:
    import jax
    import jax.numpy as jnp

    indices = np.arange(200, dtype=np.int64)
    jax_indices = jnp.arange(200, dtype=jnp.int32)
    first, stride, size = slicing.slice_params(slice(17, 2, -3), 40)
    sliced = jax.jit(lambda i: slicing.slice_indices(i, first, stride, size, 40))(jax_indices)
    np.testing.assert_array_equal(sliced, slicing.slice_indices(indices, first, stride, size, 40))

    for reseed in (True, False):
        repeated = jax.jit(lambda i, r=reseed: slicing.repeat_indices(i, 7, r))(jax_indices)
        np.testing.assert_array_equal(repeated, slicing.repeat_indices(indices, 7, reseed))

    table = np.array([3, 1, 4, 1, 5])
    taken = jax.jit(lambda i: slicing.take_indices(i, table, 9))(jax_indices)
    np.testing.assert_array_equal(taken, slicing.take_indices(indices, table, 9))

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

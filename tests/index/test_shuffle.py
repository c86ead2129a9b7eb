"""Tests for grainfn._src.index.shuffle: Grain parity, bijectivity, scalar/vector/jax agreement."""

import random

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from grainfn._src.index import cipher
from grainfn._src.index import shuffle as shuffle_module
from grainfn._src.index.shuffle import permute_index, shuffle_index, shuffle_indices

from support.grain_shuffle import grain_block_bits, grain_is_broken

SEEDS = [0, 1, 12345, 2**31, 2**32 - 1]
LENGTHS = [
    *[1, 2, 3, 7, 255, 256, 257, 1000, 65535, 65536, 65537],
    *[2**17 - 1, 2**17, 2**17 + 1, 2**18 + 1, 10**6 + 3, 2**32, 2**32 + 1, 2**40, 2**40 + 1],
    *[2**52 + 6, 2**53 + 1, 2**54 + 1, 2**56 + 7, 2**62, 2**62 + 1, 2**62 + 12345, 2**63 - 1],
]
# Lengths at which Grain's floating-point block size is one bit short (see grain_block_bits):
# n - 1 is an even power of two >= 2**16, or lies just above one (>= 2**50) so that the
# double log2 (or the conversion to double) rounds down onto the power.
GRAIN_BROKEN = {
    *[2**16 + 1, 2**18 + 1, 2**32 + 1, 2**40 + 1],
    *[2**52 + 6, 2**54 + 1, 2**56 + 7, 2**62 + 1],
}


def grain_index_shuffle():
    from grain._src.python.experimental.index_shuffle.python import index_shuffle_module

    return index_shuffle_module.index_shuffle


def grain_shuffle(index: int, length: int, seed: int) -> int:
    """Grain's MapDataset.shuffle position -> parent index, with its C++ index_shuffle."""
    epoch, position = divmod(index, length)
    permuted = grain_index_shuffle()(
        position, max_index=length - 1, seed=(seed + epoch) % 2**32, rounds=4
    )
    return permuted + epoch * length


def sample_indices(length: int, epochs: int, count: int, rng: random.Random) -> list[int]:
    """Random indices over `epochs` epochs plus each epoch's first and last index."""
    epochs = max(1, min(epochs, (2**63 - 1) // length - 1))
    edges = [e * length + d for e in range(epochs) for d in (0, length - 1)]
    return edges + [rng.randrange(epochs * length) for _ in range(count)]


def assert_permutation(values: np.ndarray, length: int) -> None:
    assert values.shape == (length,)
    assert np.array_equal(np.sort(values), np.arange(length))


# --- Grain parity -------------------------------------------------------------------------


@pytest.mark.grain
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("length", [n for n in LENGTHS if n not in GRAIN_BROKEN])
def test_equals_grain(length: int, seed: int) -> None:
    rng = random.Random(length * 31 + seed)
    if length <= 70_000:
        indices = list(range(3 * length)) if length < 3000 else sample_indices(length, 3, 3000, rng)
    else:
        indices = sample_indices(length, 3, 300, rng)
    expected = [grain_shuffle(i, length, seed) for i in indices]
    assert shuffle_indices(np.array(indices, np.int64), length, seed).tolist() == expected
    assert [shuffle_index(i, length, seed) for i in indices] == expected


@pytest.mark.grain
@pytest.mark.parametrize("seed", [0, 2**32 - 1])
def test_equals_grain_map_dataset_shuffle(seed: int) -> None:
    import grain

    for length in [1, 5, 300, 70_000]:
        dataset = grain.MapDataset.range(length).shuffle(seed=seed)
        indices = [*range(min(length, 500)), length + 3, 2 * length + 1]
        ours = shuffle_indices(np.array(indices), length, seed) % length
        assert ours.tolist() == [dataset[i] for i in indices]


@pytest.mark.grain
def test_broken_lengths_are_exactly_the_predicted_ones() -> None:
    candidates = set(LENGTHS)
    for k in range(15, 63):
        candidates |= {2**k - 1, 2**k, 2**k + 1, 2**k + 2}
    candidates |= {2**k + d for k in range(48, 63) for d in (3, 7, 12, 2 ** max(0, k - 52) + 1)}
    rng = random.Random(0)
    mismatched = set()
    for length in sorted(candidates):
        for seed in (0, 2**32 - 1):
            indices = sample_indices(length, 2, 8, rng)
            ours = [shuffle_index(i, length, seed) for i in indices]
            if ours != [grain_shuffle(i, length, seed) for i in indices]:
                mismatched.add(length)
    assert mismatched == {n for n in candidates if grain_is_broken(n)}
    assert {n for n in LENGTHS if grain_is_broken(n)} == GRAIN_BROKEN
    # Below 2**50 exactly the even powers of two >= 2**16; above, also values just over them.
    assert {n for n in mismatched if n - 1 < 2**50} == {2**k + 1 for k in range(16, 50, 2)}
    assert {2**50 + 3, 2**52 + 12, 2**54 + 3, 2**62 + 7} <= mismatched


@pytest.mark.grain
@pytest.mark.parametrize("length", sorted(GRAIN_BROKEN))
def test_grain_collides_where_predicted(length: int) -> None:
    max_index, grain_bits = length - 1, grain_block_bits(length - 1)
    assert grain_bits < cipher.block_bits(max_index)
    # Grain's too-small block drops the top bits of its input, so two positions collide.
    other = max_index % 2**grain_bits
    for seed in (0, 7, 2**32 - 1):
        assert grain_shuffle(max_index, length, seed) == grain_shuffle(other, length, seed)
        assert shuffle_index(max_index, length, seed) != shuffle_index(other, length, seed)


@pytest.mark.grain
def test_grain_is_not_a_permutation_for_65537_but_ours_is() -> None:
    length, seed = 2**16 + 1, 3
    grains = [grain_shuffle(i, length, seed) for i in range(length)]
    assert len(set(grains)) < length and length - 1 not in grains
    assert_permutation(shuffle_indices(np.arange(length), length, seed), length)


@pytest.mark.grain
@settings(max_examples=30)
@given(
    length=st.integers(2, 2**63 - 1) | st.integers(2**53, 2**63 - 1),
    seed=st.integers(0, 2**32 - 1),
)
def test_equals_grain_or_grain_provably_broken(length: int, seed: int) -> None:
    rng = random.Random(seed)
    indices = sample_indices(length, 2, 6, rng)
    ours = shuffle_indices(np.array(indices, np.int64), length, seed).tolist()
    if grain_is_broken(length):
        other = (length - 1) % 2 ** grain_block_bits(length - 1)
        assert grain_shuffle(length - 1, length, seed) == grain_shuffle(other, length, seed)
    else:
        assert ours == [grain_shuffle(i, length, seed) for i in indices]


# --- Bijectivity --------------------------------------------------------------------------


@pytest.mark.slow
def test_permutation_for_every_length_up_to_2000() -> None:
    for length in range(1, 2001):
        assert_permutation(shuffle_indices(np.arange(length), length, 12345), length)


@settings(max_examples=20)
@given(length=st.integers(1, 2**20), seed=st.integers(0, 2**32 - 1))
def test_permutation_property(length: int, seed: int) -> None:
    assert_permutation(shuffle_indices(np.arange(length), length, seed), length)


@settings(max_examples=50)
@given(length=st.integers(2**20, 2**63 - 1), seed=st.integers(0, 2**32 - 1))
def test_large_lengths_sampled_distinct_and_in_range(length: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    positions = np.unique(rng.integers(0, length, 2000, dtype=np.int64))
    shuffled = shuffle_indices(positions, length, seed)
    assert len(np.unique(shuffled)) == len(positions)
    assert shuffled.min() >= 0 and shuffled.max() < length


def test_multiple_epochs_are_permutations_with_different_orders() -> None:
    length = 1000
    shuffled = shuffle_indices(np.arange(3 * length), length, 5).reshape(3, length)
    for epoch in range(3):
        assert_permutation(shuffled[epoch] - epoch * length, length)
    assert not np.array_equal(shuffled[0], shuffled[1] - length)


# --- Scalar / vector / shapes -------------------------------------------------------------


@settings(max_examples=100)
@given(
    length=st.integers(1, 300) | st.integers(1, 2**20) | st.integers(1, 2**63 - 1),
    seed=st.integers(0, 2**32 - 1),
    data=st.data(),
)
def test_scalar_and_vector_agree(length: int, seed: int, data: st.DataObject) -> None:
    limit = min(5 * length, 2**63 - length)
    indices = data.draw(st.lists(st.integers(0, limit - 1), min_size=1, max_size=20))
    vector = shuffle_indices(np.array(indices, np.int64), length, seed)
    assert vector.tolist() == [shuffle_index(i, length, seed) for i in indices]


def test_shape_dtype_and_large_chunked_input() -> None:
    indices = np.arange(7 * 30_011).reshape(7, -1)[:, ::-1]
    out = shuffle_indices(indices, 50_000, 9)
    assert out.shape == indices.shape and out.dtype == np.int64
    expected = [shuffle_index(int(i), 50_000, 9) for i in indices.ravel()[::997]]
    assert out.ravel()[::997].tolist() == expected
    assert shuffle_indices(np.array([], np.int64), 10, 0).shape == (0,)
    assert shuffle_indices(np.int64(3), 10, 0).shape == ()
    assert shuffle_indices(np.arange(4, dtype=np.int32), 4, 0).dtype == np.int64


def test_many_epochs_in_one_call() -> None:
    for length in (3, 1000, 100_003):
        indices = np.arange(0, 40 * length, max(1, length // 7))
        out = shuffle_indices(indices, length, 2**32 - 2)  # epoch seeds wrap past 2**32
        assert out.tolist() == [shuffle_index(int(i), length, 2**32 - 2) for i in indices]


# --- permute_index: Grain's index_shuffle with any number of rounds -----------------------

# Round counts at the edges of std::seed_seq's t (n >= 7, 39, 68, 623 words) and of the range.
ROUNDS = [4, 6, 8, 38, 40, 66, 68, 70, 622, 624, 1024]


@pytest.mark.parametrize("length", [1, 2, 9, 1000, 65536, 70_000, 2**40])
def test_permute_index_with_four_rounds_is_one_shuffle_epoch(length: int) -> None:
    positions = sorted({0, length // 3, length - 1, *range(min(length, 50))})
    for seed in (0, 7, 2**32 - 1):
        expected = [shuffle_index(p, length, seed) for p in positions]
        assert [permute_index(p, length - 1, seed) for p in positions] == expected
        assert [permute_index(p, length - 1, seed, rounds=4) for p in positions] == expected


@pytest.mark.parametrize("rounds", ROUNDS)
@pytest.mark.parametrize("length", [1, 2, 3, 255, 1000, 65536])
def test_permute_index_is_a_permutation_for_every_rounds(length: int, rounds: int) -> None:
    values = [permute_index(i, length - 1, seed=rounds, rounds=rounds) for i in range(length)]
    assert sorted(values) == list(range(length))


@settings(max_examples=25)
@given(
    length=st.integers(65537, 2**63),
    seed=st.integers(0, 2**32 - 1),
    rounds=st.integers(2, 512).map(lambda half: 2 * half),
    data=st.data(),
)
def test_permute_index_large_lengths_distinct_and_in_range(
    length: int, seed: int, rounds: int, data: st.DataObject
) -> None:
    positions = data.draw(st.sets(st.integers(0, length - 1), min_size=1, max_size=8))
    values = {permute_index(p, length - 1, seed, rounds) for p in positions}
    assert len(values) == len(positions)
    assert all(0 <= v < length for v in values)


def test_permute_index_rounds_and_seeds_give_other_permutations() -> None:
    orders = {
        (seed, rounds): tuple(permute_index(i, 99, seed, rounds) for i in range(100))
        for seed in (0, 1)
        for rounds in ROUNDS
    }
    assert len(set(orders.values())) == len(orders)


def test_permute_index_single_position_and_largest_range() -> None:
    assert [permute_index(0, 0, seed, rounds) for seed in (0, 5) for rounds in (4, 6)] == [0] * 4
    top = 2**63 - 1
    values = {permute_index(i, top, 3, rounds) for i in (0, 1, top) for rounds in (4, 10)}
    assert len(values) == 6 and all(0 <= v <= top for v in values)


@pytest.mark.parametrize(
    ("args", "error", "message"),
    [
        (
            (0, 8, 33, 2),
            ValueError,
            "rounds must be an even integer between 4 and 1024, got rounds=2",
        ),
        ((0, 8, 33, 5), ValueError, "got rounds=5"),
        ((0, 8, 33, 1025), ValueError, "got rounds=1025"),
        ((0, 8, 33, 1026), ValueError, "got rounds=1026"),
        ((0, 8, 33, 0), ValueError, "got rounds=0"),
        ((0, 1, 0, 4294967294), ValueError, "got rounds=4294967294"),
        ((0, 1, 0, -4), ValueError, "got rounds=-4"),
        ((0, 1, 0, 4.0), TypeError, "rounds must be an even integer between 4 and 1024, got 4.0"),
        ((0, 1, 0, True), TypeError, "rounds must be .* got True"),
        ((-1, 8, 33, 4), ValueError, r"index must be in \[0, max_index\], got index=-1 with max"),
        ((9, 8, 76, 4), ValueError, r"index must be in \[0, max_index\], got index=9 with max"),
        ((2**64, 2**64, 0, 4), ValueError, r"max_index must be an integer in \[0, 2\*\*63 - 1\]"),
        ((0, -1, 0, 4), ValueError, r"max_index must be an integer in \[0, 2\*\*63 - 1\], got -1"),
        ((0.5, 8, 0, 4), TypeError, "index must be an integer in"),
        ((0, 8, -1, 4), ValueError, r"seed must be an integer in \[0, 2\*\*32\), got -1"),
        ((0, 8, 2**32, 6), ValueError, f"got {2**32}"),
    ],
)
def test_permute_index_bad_arguments_raise(args: tuple, error: type, message: str) -> None:
    with pytest.raises(error, match=message):
        permute_index(*args)


# --- Validation ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("call", "value"),
    [
        (lambda: shuffle_index(0, 0, 0), "got 0"),
        (lambda: shuffle_index(0, 2**63, 0), f"got {2**63}"),
        (lambda: shuffle_index(0, 5, -1), "got -1"),
        (lambda: shuffle_index(0, 5, 2**32), f"got {2**32}"),
        (lambda: shuffle_index(-3, 5, 0), "got -3"),
        (lambda: shuffle_indices(np.array([1, -4]), 5, 0), "got -4"),
        (lambda: shuffle_indices(np.array([1]), -2, 0), "got -2"),
        (lambda: shuffle_indices(np.array([1]), 5, 2**32 + 5), f"got {2**32 + 5}"),
        (lambda: shuffle_indices(np.array([2**62 + 5]), 2**62 + 1, 0), f"{2**62 + 5}"),
    ],
)
def test_bad_values_raise(call, value: str) -> None:
    with pytest.raises(ValueError, match=value):
        call()


def test_bad_types_raise() -> None:
    with pytest.raises(TypeError, match="seed"):
        shuffle_index(0, 5, 1.5)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="integers"):
        shuffle_indices(np.array([0.5]), 5, 0)


def test_import_does_not_import_jax() -> None:
    import subprocess
    import sys

    # Loads the module file alone, so that other grainfn modules cannot affect the answer.
    code = (
        "import importlib.util, sys\n"
        f"spec = importlib.util.spec_from_file_location('shuffle', {shuffle_module.__file__!r})\n"
        "spec.loader.exec_module(importlib.util.module_from_spec(spec))\n"
        "print('jax' in sys.modules)"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.strip() == "False", result.stderr

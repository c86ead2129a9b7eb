"""grain.experimental.index_shuffle against Grain 0.2.18's C++ one: any rounds, same outputs."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

import grainfn

from support.grain_shuffle import grain_is_broken

pytestmark = pytest.mark.grain

# Round counts at the edges of std::seed_seq's t (n >= 7, 39, 68, 623 words) and of the range.
ROUNDS = [4, 6, 8, 10, 38, 40, 66, 68, 70, 100, 622, 624, 1024]
MAX_INDICES = [0, 4000, 46_204, 65_535, 70_000, 2**20 + 3, 1_234_567_891, 2**33 + 5, 2**63 - 1]
# Grain's C++ cycle-walks a tiny range through a 2**16 block one value at a time, so its
# cost grows with rounds * 2**16 / (max_index + 1): seconds for max_index 1 at 1024 rounds.
SMALL_MAX_INDICES = [1, 8, 300]


def grain_index_shuffle() -> Any:
    import grain

    return grain.experimental.index_shuffle


@pytest.mark.parametrize("rounds", ROUNDS)
@pytest.mark.parametrize("max_index", MAX_INDICES)
def test_equals_grain_for_every_rounds(max_index: int, rounds: int) -> None:
    theirs = grain_index_shuffle()
    indices = sorted({0, 1 % (max_index + 1), max_index // 3, max_index // 2, max_index})
    for seed in (0, 33, 2**31, 2**32 - 1):
        expected = [theirs(i, max_index, seed, rounds) for i in indices]
        ours = [grainfn.experimental.index_shuffle(i, max_index, seed, rounds) for i in indices]
        assert ours == expected


@pytest.mark.parametrize("rounds", [4, 6, 8, 38, 40, 66, 68, 70])
def test_whole_small_permutations_equal_grain(rounds: int) -> None:
    theirs = grain_index_shuffle()
    for max_index in SMALL_MAX_INDICES:
        positions = range(max_index + 1)
        expected = [theirs(i, max_index, 52, rounds) for i in positions]
        ours = [grainfn.experimental.index_shuffle(i, max_index, 52, rounds) for i in positions]
        assert ours == expected


@settings(max_examples=60)
@given(
    max_index=st.one_of(st.integers(2**12, 2**17), st.integers(2**17, 2**63 - 1)),
    seed=st.integers(0, 2**32 - 1),
    rounds=st.integers(2, 512).map(lambda half: 2 * half),
    data=st.data(),
)
def test_equals_grain_hypothesis(max_index: int, seed: int, rounds: int, data: Any) -> None:
    # Where Grain's float-sized block is a bit short it is no permutation (docs/functional.md).
    assume(not grain_is_broken(max_index + 1))
    index = data.draw(st.integers(0, max_index))
    assert grainfn.experimental.index_shuffle(index, max_index, seed, rounds) == (
        grain_index_shuffle()(index, max_index, seed, rounds)
    )


@pytest.mark.parametrize(
    "args",
    [
        # Grain's own test cases (index_shuffle_test.py) ...
        (0, 8, 33, 2),
        (0, 8, 33, 1025),
        (0, 8, 76, 5),
        (0, 1, 0, 4294967294),
        (-1, 8, 33, 4),
        (9, 8, 76, 4),
        # ... and more values within the C++ argument types.
        (0, 8, 0, 0),
        (0, 8, 0, 1026),
        (0, -1, 0, 4),
        (5, 4, 0, 6),
        (0, 1, 0, 2**32 - 2),
    ],
)
def test_bad_arguments_raise_grains_exception_type(args: tuple[int, ...]) -> None:
    with pytest.raises(Exception) as theirs:
        grain_index_shuffle()(*args)
    with pytest.raises(Exception) as ours:
        grainfn.experimental.index_shuffle(*args)
    assert type(ours.value) is type(theirs.value) is ValueError
    # Grain's message starts the same way: "rounds must be an even integer between 4 and
    # 1024", "index must be in [0, max_index]"; ours also names the bad value.
    if "rounds" in str(theirs.value):
        assert str(ours.value).startswith("rounds must be an even integer between 4 and 1024")
    elif args[1] >= 0:
        assert str(ours.value).startswith("index must be in [0, max_index]")

"""Grain's experimental `testing` module's facade: assert_equal_output_after_checkpoint.

Each of its checks is run against Grain's on the same toy iterables in
tests/differential/test_checkpoint_assertion_grain.py; here, what it passes and
what it refuses, on its own.
"""

from __future__ import annotations

from typing import Any

import pytest

import grainfn as grain
from grainfn.experimental import assert_equal_output_after_checkpoint


class Forgetful:
    """An iterable over `range(4)` whose iterator's `set_state` does nothing."""

    def __iter__(self) -> ForgetfulIterator:
        return ForgetfulIterator()


class ForgetfulIterator:
    def __init__(self) -> None:
        self.i = 0

    def __iter__(self) -> ForgetfulIterator:
        return self

    def __next__(self) -> int:
        if self.i >= 4:
            raise StopIteration
        self.i += 1
        return self.i - 1

    def get_state(self) -> dict[str, int]:
        return {"i": self.i}

    def set_state(self, state: Any) -> None:
        del state


def test_grainfn_datasets_and_a_data_loader_pass() -> None:
    assert_equal_output_after_checkpoint(grain.MapDataset.range(20).seed(1).shuffle().batch(3))
    ds = grain.MapDataset.range(20).to_iter_dataset().filter(lambda x: x % 3).batch(2)
    assert_equal_output_after_checkpoint(ds)
    loader = grain.DataLoader(
        data_source=list(range(7)),
        sampler=grain.samplers.SequentialSampler(7, grain.sharding.NoSharding()),
    )
    assert_equal_output_after_checkpoint(loader)


def test_an_iterator_that_does_not_restore_fails_naming_the_step_and_state() -> None:
    with pytest.raises(AssertionError, match=r"restored at step 1, the state\['i'\]: 0 != 1"):
        assert_equal_output_after_checkpoint(Forgetful())


def test_an_iterable_without_states_is_refused_naming_its_iterator() -> None:
    with pytest.raises(TypeError, match="gave a list_iterator, which has no get_state"):
        assert_equal_output_after_checkpoint([1, 2, 3])

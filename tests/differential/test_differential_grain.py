"""Differential tests: grainfn.fn against Grain 0.2.18 on random pipelines.

For the same pipeline and seeds, every position (current epoch and later
ones) must hold the same element in both libraries, and a pipeline Grain
refuses must be refused by grainfn too.
"""

from __future__ import annotations

import math
import sys
from typing import Any

import numpy as np
import pytest
from hypothesis import given, note, settings
from hypothesis import strategies as st

from grainfn._src.stages.batch import BatchedDataset
from grainfn._src.testing.specs import INTEGERS, declared_stages, sample_head, sample_op

from support.grain_shuffle import grain_shuffle_is_not_a_permutation
from support.pipelines import build_dataset, build_grain, dataset_specs

pytestmark = pytest.mark.grain


def assert_same_element(ours: Any, theirs: Any, where: str) -> None:
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), where
        assert ours.dtype == theirs.dtype, f"{where}: dtype {ours.dtype} != {theirs.dtype}"
        np.testing.assert_array_equal(ours, theirs, err_msg=where)
    else:
        assert type(ours) is type(theirs) or np.asarray(ours).dtype == np.asarray(theirs).dtype, (
            where
        )
        assert ours == theirs, f"{where}: {ours!r} != {theirs!r}"


def positions_to_check(length: int) -> list[int]:
    """The first positions, the last ones, and some in the next epochs."""
    if length == 0:
        return []
    head = list(range(min(length, 60)))
    tail = list(range(max(0, length - 5), length)) if length < sys.maxsize else []
    later = [length + i for i in range(min(length, 25))] if length < 2**40 else []
    far = [2**40 + 17, 2**50 + 3] if length >= 2**50 else []
    return sorted(set(head + tail + later + far))


def compare(spec: tuple[Any, ...]) -> None:
    try:
        theirs = build_grain(spec)
    except (ValueError, TypeError):
        with pytest.raises((ValueError, TypeError)):
            build_dataset(spec)
        return
    except OverflowError:
        # Grain's float length arithmetic on an infinite dataset went past
        # sys.maxsize, so its len() fails while building. grainfn's exact lengths
        # stay in range: it builds the pipeline, or refuses it with a clear error.
        try:
            ours = build_dataset(spec)
        except ValueError:
            return  # both refuse the pipeline
        assert has_infinite_stage(ours)
        return
    try:
        ours = build_dataset(spec)
    except ValueError:
        # A concatenation past 2**63 - 2 positions: grainfn refuses it where it
        # is built, Grain's len() overflows.
        with pytest.raises(OverflowError):
            len(theirs)
        return
    if grain_shuffle_is_not_a_permutation(ours):
        # Grain sizes its shuffle cipher with a float log2: for these lengths its
        # shuffle repeats some elements (a documented difference; see
        # tests/index/test_shuffle.py).
        return
    if grain_batch_length_is_inexact(ours):
        # Grain counts this pipeline's batches with a float ceil that is off, so
        # its positions downstream differ by design: see
        # test_batch_of_infinite_dataset_has_exact_integer_length.
        return
    assert ours.length == len(theirs)
    for position in positions_to_check(ours.length):
        where = f"position {position} of {spec!r}"
        try:
            expected = theirs[position]
        except (ValueError, OverflowError, IndexError) as error:
            # Ragged batches (ValueError), a position Grain cannot address past
            # 2**64 (OverflowError), or one past a selection map's table in a later
            # epoch (IndexError): grainfn must refuse it the same way.
            with pytest.raises(type(error)):
                ours.get_many([position])
            with pytest.raises(type(error)):
                ours.get(position)
            continue
        try:
            element = ours.get_many([position])[0]
        except OverflowError:
            # Past an infinite stage a later epoch lies beyond 2**63 - 1: grainfn
            # refuses it (Grain computes on unbounded Python ints instead).
            assert has_infinite_stage(ours), where
            with pytest.raises(OverflowError):
                ours.get(position)
            continue
        if expected is None:
            assert element is None, where
        else:
            assert_same_element(element, expected, where)
            assert_same_element(ours.get(position), expected, where + " (scalar get)")


def grain_batch_length_is_inexact(ds: Any) -> bool:
    """Whether Grain's `math.ceil(len / batch_size)` differs from the exact count somewhere."""
    if isinstance(ds, BatchedDataset) and not ds.drop_remainder:
        n = ds.parent.length
        if math.ceil(n / ds.batch_size) != -(-n // ds.batch_size):
            return True
    return any(grain_batch_length_is_inexact(p) for p in ds.parents)


def has_infinite_stage(ds: Any) -> bool:
    return ds.length >= sys.maxsize or any(has_infinite_stage(p) for p in ds.parents)


@pytest.mark.slow
@settings(max_examples=300)
@given(dataset_specs())
def test_random_pipelines_match_grain(spec: tuple[Any, ...]) -> None:
    note(f"spec = {spec!r}")
    compare(spec)


GRAIN_HAS = {stage.name: stage for _, stage in declared_stages("dataset") if stage.in_grain}
"""Every declared map-level stage and head that Grain has, drawn or not (`in_grain`)."""


@pytest.mark.parametrize("name", sorted(GRAIN_HAS))
@settings(max_examples=5)
@given(data=st.data())
def test_every_declared_stage_grain_has_matches_its_grain_twin(
    name: str, data: st.DataObject
) -> None:
    stage, seeded = GRAIN_HAS[name], (("range", 7), ("seed", 1))
    if stage.combines:
        head = data.draw(
            st.composite(lambda draw: sample_head(draw, {name: stage}, st.just(seeded)))()
        )
        spec: tuple[Any, ...] = (head,)
    else:
        op = data.draw(st.composite(lambda draw: sample_op(draw, {name: stage}, INTEGERS))())
        spec = (*seeded, op)
    note(f"spec = {spec!r}")
    compare(spec)


@pytest.mark.parametrize(
    "spec",
    [
        (("range", 200), ("seed", 0), ("shuffle", None), ("map", "add_one"), ("batch", 32, False)),
        (
            ("range", 30),
            ("seed", 5),
            ("random_map", "add_draw", None),
            ("random_map", "add_uniform", None),
        ),
        (("range", 10), ("seed", 1), ("shuffle", None), ("repeat", None, True), ("shuffle", None)),
        (
            (
                "mix",
                ((("range", 7), ("shuffle", 3)), (("range", 20), ("map", "add_one"))),
                (1.0, 2.5),
            ),
            ("seed", 9),
            ("random_map", "add_draw", None),
        ),
        (("concatenate", ((("range", 3),), (("range", 5), ("shuffle", 2)))), ("repeat", 2, True)),
        (("range", 12), ("slice", 10, 1, -3), ("repeat", 3, False), ("map_with_index",)),
        (("range", 9), ("take", (4, 4, 0)), ("batch", 2, True)),
    ],
)
def test_known_pipelines_match_grain(spec: tuple[Any, ...]) -> None:
    compare(spec)


@pytest.mark.parametrize("weights", [None, (1, 1, 1), (0.2, 0.3, 0.5), (5.0, 1.0, 0.3)])
def test_weighted_mix_of_shuffled_datasets_matches_grain(weights: Any) -> None:
    spec = (
        (
            "mix",
            tuple(
                (("range", n), ("seed", s), ("shuffle", None))
                for n, s in ((50, 1), (80, 2), (65, 3))
            ),
            weights,
        ),
    )
    compare(spec)


def test_batch_of_infinite_dataset_has_exact_integer_length() -> None:
    """Grain computes `math.ceil(len / batch_size)` in floats; grainfn counts exactly."""
    import grain

    from grainfn import fn

    ours = fn.batch(5, fn.repeat(None, fn.range(3)))
    assert ours.length == -(-sys.maxsize // 5) == 1844674407370955162
    theirs = grain.MapDataset.range(3).repeat().batch(5)
    assert len(theirs) == 1844674407370955264  # off by 102 batches

"""Tests for grainfn._src.index.seeds: how a random stage finds its seed."""

from types import SimpleNamespace as Node

import numpy as np

from grainfn._src.index.seeds import derive_seed


def expected(*pairs: int) -> int:
    return int(np.random.SeedSequence(list(pairs)).generate_state(1, dtype=np.uint32)[0])


SOURCE = Node(parents=(), pipeline_seed=None)


def test_unseeded_pipelines_give_none() -> None:
    assert derive_seed([]) is None
    assert derive_seed([SOURCE]) is None
    assert derive_seed([Node(parents=(SOURCE, SOURCE), pipeline_seed=None)]) is None


def test_the_seed_and_its_distance_feed_a_seed_sequence() -> None:
    seeded = Node(parents=(SOURCE,), pipeline_seed=42)
    assert derive_seed([seeded]) == expected(42, 1)
    above = Node(parents=(seeded,), pipeline_seed=None)
    assert derive_seed([above]) == expected(42, 2)
    assert derive_seed([seeded]) != derive_seed([above])


def test_a_seed_stage_ends_its_branch() -> None:
    inner = Node(parents=(SOURCE,), pipeline_seed=7)
    outer = Node(parents=(inner,), pipeline_seed=42)
    assert derive_seed([outer]) == expected(42, 1)


def test_branches_are_walked_breadth_first() -> None:
    near = Node(parents=(SOURCE,), pipeline_seed=5)
    far = Node(parents=(Node(parents=(SOURCE,), pipeline_seed=9),), pipeline_seed=None)
    assert derive_seed([far, near]) == expected(5, 1, 9, 2)
    assert derive_seed([near, far]) == expected(5, 1, 9, 2)
    assert derive_seed([Node(parents=(far, near), pipeline_seed=None)]) == expected(5, 2, 9, 3)

"""What every stage keeps, checked on small example pipelines of each stage: the shared list.

Each stage's test file (`tests/stages/test_<module>.py`) declares its examples
with one line:

    test_conforms = conformance.conforms(conformance.Example("limit(4)", lambda: ...))

an `Example` being the text its `describe` line starts with and a function
that builds a small pipeline ending in the stage. Every check here then runs
on it:

- iterating twice (and a second build) gives the same elements;
- `step` from `init`, again and again, gives the elements iteration gives;
- a state taken after k elements, through `fn.state_to_dict`, JSON and
  `fn.state_from_dict`, resumes a fresh build with the same rest;
- the pipeline pickles, and the copy equals it and gives the same elements;
- `fn.describe_text` names the stage on its first line, and so does `repr`
  (unless the stage is transparent: then `repr` is its parent's);
- a dataset reads a block of positions as it reads them one at a time.

A dataset is read as a stream with `fn.from_dataset`. Functions in the
pipelines are module-level, so that plain `pickle` takes them.
`tests/stages/test_conformance.py` checks that every stage module's test file
declares its examples.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pickle
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn.testing import assert_elements_equal

Pipeline = fn.Dataset | fn.Stream

MAX_ELEMENTS = 24
"""How many elements each test reads at most (endless pipelines stop there)."""


def twice(x: int) -> list[int]:
    return [x, x]


def keep_even(x: int) -> bool:
    return x % 2 == 0


def below_five(x: int) -> bool:
    return x < 5


def draw(x: int, rng: np.random.Generator) -> int:
    return x * 1000 + int(rng.integers(1000))


@dataclasses.dataclass(frozen=True)
class EveryOther:
    """A selection map: position i reads element i // 2 of dataset i % 2."""

    length: int

    def __len__(self) -> int:
        return self.length

    def __getitem__(self, index: int) -> tuple[int, int]:
        return index % 2, index // 2


def numbers(n: int, start: int = 0) -> fn.Stream:
    return fn.from_dataset(fn.range(start, start + n))


@dataclasses.dataclass(frozen=True)
class Example:
    """A small pipeline whose last stage is the one under test."""

    stage: str
    """What the stage's `describe` line starts with."""
    build: Callable[[], Pipeline]


def label(example: Example) -> str:
    """The test id: the stage and the class it builds, e.g. `map(add_one) MappedStream`."""
    return f"{example.stage} {type(example.build()).__name__}"


def stream_of(pipeline: Pipeline) -> fn.Stream:
    return pipeline if isinstance(pipeline, fn.Stream) else fn.from_dataset(pipeline)


def read(stream: fn.Stream, state: Any = None, count: int = MAX_ELEMENTS) -> list[Any]:
    """The first `count` elements from `state` (the initial state by default)."""
    iterator = fn.iterate(stream) if state is None else fn.iterate(stream, state)
    try:
        return list(itertools.islice(iterator, count))
    finally:
        iterator.close()


def states_after_each(stream: fn.Stream) -> tuple[list[Any], list[Any]]:
    """The first elements, and the state before each of them and after the last."""
    iterator = fn.iterate(stream)
    try:
        elements, states = [], [iterator.state]
        for element in itertools.islice(iterator, MAX_ELEMENTS):
            elements.append(element)
            states.append(iterator.state)
        return elements, states
    finally:
        iterator.close()


def assert_same_elements(got: list[Any], expected: list[Any], where: str) -> None:
    assert len(got) == len(expected), f"{where}: {len(got)} elements, expected {len(expected)}"
    assert_elements_equal(got, expected, where)


def an_example_has_elements(example: Example) -> None:
    assert read(stream_of(example.build()))


def iterating_twice_gives_the_same_elements(example: Example) -> None:
    pipeline = example.build()
    first = read(stream_of(pipeline))
    assert_same_elements(read(stream_of(pipeline)), first, "a second iteration")
    assert_same_elements(read(stream_of(example.build())), first, "a second build")


def stepping_from_init_gives_what_iteration_gives(example: Example) -> None:
    stream = stream_of(example.build())
    expected = read(stream)
    stepped, state = [], stream.init()
    while len(stepped) < MAX_ELEMENTS:
        element, state = stream.step(state)
        if element is fn.END:
            break
        stepped.append(element)
    assert_same_elements(stepped, expected, "stepping from init")


def a_state_after_k_elements_resumes_through_a_dict(example: Example) -> None:
    stream = stream_of(example.build())
    elements, states = states_after_each(stream)
    count = len(elements)
    for k in sorted({0, 1, count // 2, count}):
        saved = json.dumps(fn.state_to_dict(stream, states[k]))
        fresh = stream_of(example.build())
        restored = fn.state_from_dict(fresh, json.loads(saved))
        assert restored == states[k]
        # One more than is left: a finite stream must end where it ended before.
        rest = read(fresh, restored, count - k + (count < MAX_ELEMENTS))
        assert_same_elements(rest, elements[k:], f"resumed after {k} elements")


def the_pipeline_pickles_and_the_copy_gives_the_same_elements(example: Example) -> None:
    pipeline = example.build()
    copy = pickle.loads(pickle.dumps(pipeline))
    assert copy == pipeline
    assert_same_elements(read(stream_of(copy)), read(stream_of(pipeline)), "the pickled copy")


def describe_and_repr_name_the_stage(example: Example) -> None:
    pipeline = example.build()
    assert fn.describe_text(pipeline).splitlines()[0].startswith(example.stage)
    if getattr(pipeline, "transparent", False):
        assert repr(pipeline) == repr(pipeline.parent)
    else:
        assert repr(pipeline).splitlines()[0].startswith(example.stage)


def a_dataset_reads_a_block_as_it_reads_single_positions(example: Example) -> None:
    ds = example.build()
    positions = [0, 3, 1, 7, 2, 30, 3]  # past the length: later epochs
    block = ds.get_many(positions)
    assert_same_elements(block, [ds.get(p) for p in positions], "single reads")


CHECKS: tuple[Callable[[Example], None], ...] = (
    an_example_has_elements,
    iterating_twice_gives_the_same_elements,
    stepping_from_init_gives_what_iteration_gives,
    a_state_after_k_elements_resumes_through_a_dict,
    the_pipeline_pickles_and_the_copy_gives_the_same_elements,
    describe_and_repr_name_the_stage,
)
"""The checks every example takes."""

DATASET_CHECKS: tuple[Callable[[Example], None], ...] = (
    a_dataset_reads_a_block_as_it_reads_single_positions,
)
"""The checks every example that builds a Dataset takes too."""


def conforms(*examples: Example) -> Callable[..., None]:
    """The test function that runs every check on every example (bind it as `test_conforms`)."""
    cases = [
        pytest.param(example, check, id=f"{label(example)}: {check.__name__}")
        for example in examples
        for check in CHECKS + (DATASET_CHECKS if isinstance(example.build(), fn.Dataset) else ())
    ]

    @pytest.mark.parametrize("example, check", cases)
    def test_conforms(example: Example, check: Callable[[Example], None]) -> None:
        check(example)

    return test_conforms

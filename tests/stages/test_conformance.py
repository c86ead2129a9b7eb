"""What every stage keeps, checked on small example pipelines of each stage.

A new stage adds its line (or lines: a dataset form and a stream form) to
EXAMPLES below: the text its `describe` line starts with, and a function that
builds a small pipeline ending in the stage. Every test here then runs on it:

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
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import pickle
import pkgutil
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from grainfn import fn
from grainfn._src import stages
from grainfn.testing import add_one, assert_elements_equal, with_index

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


EXAMPLES: list[Example] = [
    # Sources.
    Example("range(2, 9, 1)", lambda: fn.range(2, 9)),
    Example("source(str, length 5)", lambda: fn.source("abcde")),
    Example("from_dataset()", lambda: numbers(7)),
    Example("from_iterable(range)", lambda: fn.from_iterable(range(6))),
    # Element stages.
    Example("map(add_one)", lambda: fn.map(add_one, fn.range(7))),
    Example("map(add_one)", lambda: fn.map(add_one, numbers(7))),
    Example("map_with_index(with_index)", lambda: fn.map_with_index(with_index, fn.range(5))),
    Example("map_with_index(with_index)", lambda: fn.map_with_index(with_index, numbers(5))),
    Example("random_map(draw, seed=1)", lambda: fn.random_map(draw, fn.range(6), seed=1)),
    Example("random_map(draw, seed=1)", lambda: fn.random_map(draw, numbers(6), seed=1)),
    Example("filter(keep_even)", lambda: fn.filter(keep_even, fn.range(9))),
    Example("filter(keep_even)", lambda: fn.filter(keep_even, numbers(9))),
    Example(
        "flat_map(twice, max_fan_out=2)", lambda: fn.flat_map(twice, fn.range(4), max_fan_out=2)
    ),
    Example("flat_map(twice)", lambda: fn.flat_map(twice, numbers(4))),
    # Order and selection.
    Example("shuffle(seed=2)", lambda: fn.shuffle(fn.range(9), seed=2)),
    Example("seed(3)", lambda: fn.seed(3, fn.range(5))),
    Example("seed(3)", lambda: fn.seed(3, numbers(5))),
    Example("slice(start=1, stop=11, step=2)", lambda: fn.slice(slice(1, 10, 2), fn.range(10))),
    Example("slice(positions of length 3)", lambda: fn.slice([3, 0, 2], fn.range(4))),
    Example("window_shuffle(3, seed=1)", lambda: fn.window_shuffle(3, fn.range(7), seed=1)),
    Example("window_shuffle(3, seed=1)", lambda: fn.window_shuffle(3, numbers(7), seed=1)),
    Example("limit(4)", lambda: fn.limit(4, numbers(9))),
    Example("take_while(below_five)", lambda: fn.take_while(below_five, numbers(9))),
    Example("repeat(3 epochs)", lambda: fn.repeat(3, fn.shuffle(fn.range(4), seed=5))),
    Example("repeat(forever)", lambda: fn.repeat(None, fn.range(4))),
    Example("repeat(2)", lambda: fn.repeat(2, numbers(3))),
    Example("repeat(forever)", lambda: fn.repeat(None, numbers(3))),
    # Several parents.
    Example("mix(weights=[2.0, 1.0])", lambda: fn.mix([fn.range(4), fn.range(10, 16)], [2, 1])),
    Example("mix(weights=[1.0, 2.0])", lambda: fn.mix([numbers(3), numbers(5, 10)], [1, 2])),
    Example(
        "mix({'a': 1.0, 'b': 2.0})", lambda: fn.mix({"b": numbers(4), "a": numbers(4, 10)}, [2, 1])
    ),
    Example("concatenate(2 datasets)", lambda: fn.concatenate([fn.range(3), fn.source("ab")])),
    Example(
        "select_from_datasets(EveryOther)",
        lambda: fn.select_from_datasets([fn.range(3), fn.source("ab")], EveryOther(5)),
    ),
    Example("zip(2 datasets)", lambda: fn.zip([fn.range(4), fn.source("abcd")])),
    Example("zip(2 streams)", lambda: fn.zip([numbers(4), fn.from_dataset(fn.source("abc"))])),
    Example(
        "interleave(cycle_length=2, 3 datasets)",
        lambda: fn.interleave(2, [fn.range(3), fn.range(10, 12), fn.range(20, 23)]),
    ),
    # Batches.
    Example("batch(3)", lambda: fn.batch(3, fn.range(8))),
    Example("batch(2, batch_fn=sum)", lambda: fn.batch(2, fn.range(5), batch_fn=sum)),
    Example("batch(3, drop_remainder=True)", lambda: fn.batch(3, numbers(8), drop_remainder=True)),
    Example("rebatch(3)", lambda: fn.rebatch(3, fn.batch(4, numbers(10)))),
    # Transparent stages: same elements and states as their parent.
    Example("cache()", lambda: fn.cache(fn.map(add_one, numbers(5)))),
    Example("thread_prefetch(2)", lambda: fn.thread_prefetch(2, numbers(5))),
]


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


@pytest.fixture(params=EXAMPLES, ids=label)
def example(request: pytest.FixtureRequest) -> Example:
    return request.param


def test_every_stage_module_has_an_example() -> None:
    modules = {info.name for info in pkgutil.iter_modules(stages.__path__)}
    covered = {type(example.build()).__module__.rsplit(".", 1)[-1] for example in EXAMPLES}
    assert modules <= covered, f"stage modules without an example: {sorted(modules - covered)}"


def test_an_example_has_elements(example: Example) -> None:
    assert read(stream_of(example.build()))


def test_iterating_twice_gives_the_same_elements(example: Example) -> None:
    pipeline = example.build()
    first = read(stream_of(pipeline))
    assert_same_elements(read(stream_of(pipeline)), first, "a second iteration")
    assert_same_elements(read(stream_of(example.build())), first, "a second build")


def test_stepping_from_init_gives_what_iteration_gives(example: Example) -> None:
    stream = stream_of(example.build())
    expected = read(stream)
    stepped, state = [], stream.init()
    while len(stepped) < MAX_ELEMENTS:
        element, state = stream.step(state)
        if element is fn.END:
            break
        stepped.append(element)
    assert_same_elements(stepped, expected, "stepping from init")


def test_a_state_after_k_elements_resumes_through_a_dict(example: Example) -> None:
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


def test_the_pipeline_pickles_and_the_copy_gives_the_same_elements(example: Example) -> None:
    pipeline = example.build()
    copy = pickle.loads(pickle.dumps(pipeline))
    assert copy == pipeline
    assert_same_elements(read(stream_of(copy)), read(stream_of(pipeline)), "the pickled copy")


def test_describe_and_repr_name_the_stage(example: Example) -> None:
    pipeline = example.build()
    assert fn.describe_text(pipeline).splitlines()[0].startswith(example.stage)
    if getattr(pipeline, "transparent", False):
        assert repr(pipeline) == repr(pipeline.parent)
    else:
        assert repr(pipeline).splitlines()[0].startswith(example.stage)


@pytest.mark.parametrize(
    "example", [e for e in EXAMPLES if isinstance(e.build(), fn.Dataset)], ids=label
)
def test_a_dataset_reads_a_block_as_it_reads_single_positions(example: Example) -> None:
    ds = example.build()
    positions = [0, 3, 1, 7, 2, 30, 3]  # past the length: later epochs
    block = ds.get_many(positions)
    assert_same_elements(block, [ds.get(p) for p in positions], "single reads")

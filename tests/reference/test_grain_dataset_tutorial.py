"""The code examples of grain-dataset-tutorial.md ("tutorial"), run with grainfn.

The tutorial imports `grain.python as grain`; its examples run with
`import grainfn.python as grain`. The rules the tests follow are in
reference/shared.py. Not run: "Installs PyGrain" (`!pip install grain`, a
shell command).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest

import grainfn.python

from reference.shared import assert_same


def tutorial_list_dataset(grain: Any) -> Any:
    return (
        # You can also use a shortcut grain.MapDataset.range for
        # range-like input.
        grain.MapDataset.source([0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
        .shuffle(seed=10)  # Shuffles globally.
        .map(lambda x: x + 1)  # Maps each element.
        .batch(batch_size=2)  # Batches consecutive elements.
    )


def tutorial_source_dataset(grain: Any) -> Any:
    # Note: Inheriting `grain.RandomAccessDataSource` is optional but recommended.
    class MySource(grain.RandomAccessDataSource):
        def __init__(self):
            self._data = [0, 1, 2, 3, 4, 5, 6, 7]

        def __getitem__(self, idx):
            return self._data[idx]

        def __len__(self):
            return len(self._data)

    source = MySource()

    dataset = (
        grain.MapDataset.source(source)
        .shuffle(seed=10)  # Shuffles globally.
        .map(lambda x: x + 1)  # Maps each element.
        .batch(batch_size=2)  # Batches consecutive elements.
    )
    return dataset


def check_tutorial_batches(batches: list[np.ndarray], elements: list[int]) -> None:
    assert all(isinstance(batch, np.ndarray) for batch in batches)
    assert [len(batch) for batch in batches[:-1]] == [2] * (len(batches) - 1)
    assert sorted(np.concatenate(batches).tolist()) == elements


@pytest.mark.grain
def test_tutorial_map_dataset() -> None:
    import grain.python as real_grain

    dataset = tutorial_list_dataset(grainfn.python)
    first = dataset[0]  # pprint.pprint(dataset[0])
    batches = list(dataset)  # pprint.pprint(list(dataset))
    assert_same(first, batches[0])
    assert len(batches) == 6
    check_tutorial_batches(batches, list(range(1, 12)))
    expected = tutorial_list_dataset(real_grain)
    assert_same((first, batches), (expected[0], list(expected)))


@pytest.mark.grain
def test_tutorial_map_dataset_random_access_data_source() -> None:
    import grain.python as real_grain

    dataset = tutorial_source_dataset(grainfn.python)
    first = dataset[0]
    batches = list(dataset)
    assert_same(first, batches[0])
    assert len(batches) == 4
    check_tutorial_batches(batches, list(range(1, 9)))
    expected = tutorial_source_dataset(real_grain)
    assert_same((first, batches), (expected[0], list(expected)))


@pytest.mark.grain
def test_tutorial_map_dataset_index_past_length() -> None:
    import grain.python as real_grain

    dataset = tutorial_source_dataset(grainfn.python)
    expected = tutorial_source_dataset(real_grain)
    # Prints the 3rd element of the second epoch.
    third_of_second_epoch = dataset[len(dataset) + 2]
    assert third_of_second_epoch.shape == (2,)
    assert set(third_of_second_epoch.tolist()) <= set(range(1, 9))
    assert_same(third_of_second_epoch, expected[len(expected) + 2])
    # dataset[idx] == dataset[len(dataset) + idx] iff there's no random transformations;
    # the comparison is elementwise on the batches.
    same = dataset[len(dataset) + 2] == dataset[2]
    assert_same(same, expected[len(expected) + 2] == expected[2])
    assert not same.all()  # each epoch is shuffled differently


@pytest.mark.grain
def test_tutorial_map_dataset_filter() -> None:
    import grain.python as real_grain

    def example(grain: Any) -> tuple[str, list[Any]]:
        dataset = tutorial_source_dataset(grain)
        filtered_dataset = dataset.filter(lambda e: (e[0] + e[1]) % 2 == 0)
        length = f"Length of this dataset: {len(filtered_dataset)}"
        return length, [filtered_dataset[i] for i in range(len(filtered_dataset))]

    length, elements = example(grainfn.python)
    assert length == "Length of this dataset: 4"
    unfiltered = list(tutorial_source_dataset(grainfn.python))
    for batch, kept in zip(unfiltered, elements):
        if batch.sum() % 2 == 0:
            assert_same(kept, batch)
        else:
            assert kept is None
    assert_same((length, elements), example(real_grain))


def tutorial_sharding(grain: Any) -> tuple[str, Any, Any, list[Any]]:
    dataset = tutorial_source_dataset(grain)
    shard_index = 0
    shard_count = 2

    sharded_dataset = dataset[shard_index::shard_count]
    length = f"Sharded dataset length = {len(sharded_dataset)}"
    first, second = sharded_dataset[0], sharded_dataset[1]

    iter_dataset = sharded_dataset.to_iter_dataset(
        grain.ReadOptions(num_threads=16, prefetch_buffer_size=500)
    )
    printed = []
    for element in iter_dataset:
        printed.append(element)  # pprint.pprint(element)
    return length, first, second, printed


@pytest.mark.grain
def test_tutorial_map_dataset_slicing() -> None:
    import grain.python as real_grain

    length, first, second, printed = tutorial_sharding(grainfn.python)
    assert length == "Sharded dataset length = 2"
    dataset = tutorial_source_dataset(grainfn.python)
    assert_same((first, second), (dataset[0], dataset[2]))
    # The IterDataset over the shard yields the same elements.
    assert_same(printed, [first, second])
    assert_same((length, first, second, printed), tutorial_sharding(real_grain))


def test_tutorial_dataset_iterator_isinstance() -> None:
    import grainfn.python as grain

    dataset = tutorial_source_dataset(grain)
    dataset_iter = iter(dataset)
    assert isinstance(dataset_iter, grain.DatasetIterator)  # True


def tutorial_get_state_set_state(grain: Any) -> list[Any]:
    dataset = tutorial_source_dataset(grain)
    dataset_iter = iter(dataset)
    printed = [next(dataset_iter)]  # pprint.pprint(next(dataset_iter))

    checkpoint = dataset_iter.get_state()

    printed.append(next(dataset_iter))

    # Recover the iterator to the state after the first produced element.
    dataset_iter.set_state(checkpoint)

    printed.append(next(dataset_iter))  # This should generate the same element as above
    return printed


@pytest.mark.grain
def test_tutorial_dataset_iterator_get_state_set_state() -> None:
    import grain.python as real_grain

    printed = tutorial_get_state_set_state(grainfn.python)
    batches = list(tutorial_source_dataset(grainfn.python))
    assert_same(printed, [batches[0], batches[1], batches[1]])
    # The states themselves are each library's own format; the elements must agree.
    assert_same(printed, tutorial_get_state_set_state(real_grain))

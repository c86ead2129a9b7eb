"""Fixtures of the checkpoint tests: pipelines, and a small iterator that speaks bytes."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

import grainfn as grain


def double(x: int) -> int:
    return 2 * x


def odd(x: int) -> bool:
    return x % 2 == 1


def shuffled(seed: int = 7) -> grain.IterDataset:
    """A shuffled, mapped, batched pipeline: its state is one position."""
    ds = grain.MapDataset.range(60).seed(seed).shuffle().map(double)
    return ds.to_iter_dataset().batch(4)


def mixed(seed: int = 1) -> grain.IterDataset:
    """A stream mix of a filtered and a plain component: its state has nested records and a bool."""
    a = grain.MapDataset.range(30).seed(seed).shuffle().filter(odd).to_iter_dataset()
    b = grain.MapDataset.range(100, 140).to_iter_dataset()
    return grain.IterDataset.mix([a, b], weights=[2, 1]).batch(3)


class BytesIterator(Iterator[Any]):
    """A DataLoader-like iterator: wraps a DatasetIterator and speaks JSON bytes.

    Its state has the DatasetIterator's keys plus loader fields, as the
    DataLoader iterator's has; `set_state` takes bytes and refuses a state of
    another loader, like the DataLoader's.
    """

    def __init__(self, dataset: grain.IterDataset, sampler: str = "sampler-A", workers: int = 0):
        self._inner = iter(dataset)
        self._identity = {"sampler": sampler, "data_source": "range(60)"}
        self.worker_count = workers
        self.started_prefetch = False

    def __next__(self) -> Any:
        return next(self._inner)

    def get_state(self) -> bytes:
        state = self._inner.get_state()
        state.update(self._identity, worker_count=self.worker_count)
        return json.dumps(state, indent=2).encode()

    def set_state(self, state: bytes) -> None:
        if not isinstance(state, bytes):
            raise TypeError(f"BytesIterator.set_state takes bytes, got {type(state).__name__}.")
        data = json.loads(state)
        for field, value in self._identity.items():
            if data.get(field) != value:
                raise ValueError(f"State belongs to another DataLoader: its {field} differs.")
        self._inner.set_state({key: data[key] for key in ("version", "pipeline", "state")})

    def start_prefetch(self) -> None:
        self.started_prefetch = True


@pytest.fixture
def bytes_iterator() -> Callable[..., BytesIterator]:
    """Makes a BytesIterator: `bytes_iterator(dataset, sampler=..., workers=...)`."""
    return BytesIterator


@pytest.fixture(params=["dict", "bytes"])
def make_iterator(request: pytest.FixtureRequest) -> Callable[[grain.IterDataset], Any]:
    """Builds an iterator of either kind over a dataset: a DatasetIterator, or a BytesIterator."""
    if request.param == "dict":
        return iter
    return BytesIterator


def take(it: Iterator[Any], n: int) -> list[Any]:
    return [_plain(next(it)) for _ in range(n)]


def rest(it: Iterator[Any]) -> list[Any]:
    return [_plain(x) for x in it]


def _plain(x: Any) -> Any:
    return x.tolist() if hasattr(x, "tolist") else x


@pytest.fixture
def pipelines() -> SimpleNamespace:
    """The pipeline builders and element helpers: `shuffled`, `mixed`, `take`, `rest`."""
    return SimpleNamespace(shuffled=shuffled, mixed=mixed, take=take, rest=rest)

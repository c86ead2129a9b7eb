"""Fixtures of the parallel tests: a real local Ray cluster, started once, stopped after its tests.

The root conftest runs the tests that take `cluster` one after another, in the
one test process that runs every test starting Ray, first. The cluster starts
with the first of them and stops as soon as the next test does not take it,
so the other Ray tests after them start their own Ray.
"""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster

_RUNNING: list[Cluster] = []
"""The cluster while its tests run (at most one)."""


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A Ray cluster of a head and a worker node on this machine, 1 CPU each, connected."""
    with warnings.catch_warnings():
        # JAX warns at every fork once its threads run; Ray starts nodes by fork and exec.
        warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
        started = Cluster(initialize_head=True, head_node_args={"num_cpus": 1}, connect=False)
        started.add_node(num_cpus=1)
        ray.init(address=started.address, log_to_driver=False)
    _RUNNING.append(started)
    yield started
    _stop()


def _stop() -> None:
    while _RUNNING:
        ray.shutdown()
        _RUNNING.pop().shutdown()


def _takes_cluster(item: pytest.Item | None) -> bool:
    return item is not None and "cluster" in getattr(item, "fixturenames", ())


@pytest.hookimpl(trylast=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None) -> None:
    """Stops the cluster after the last test that takes it, before any other test runs."""
    if _takes_cluster(item) and not _takes_cluster(nextitem):
        _stop()

"""Fixtures of the parallel tests: a real local Ray cluster, started once per session."""

from __future__ import annotations

import warnings
from collections.abc import Iterator

import pytest
import ray
from ray.cluster_utils import Cluster


@pytest.fixture(scope="session")
def cluster() -> Iterator[Cluster]:
    """A Ray cluster of a head and a worker node on this machine, 1 CPU each, connected."""
    with warnings.catch_warnings():
        # JAX warns at every fork once its threads run; Ray starts nodes by fork and exec.
        warnings.filterwarnings("ignore", r"os\.fork\(\) was called", RuntimeWarning)
        cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1}, connect=False)
        cluster.add_node(num_cpus=1)
        ray.init(address=cluster.address, log_to_driver=False)
    yield cluster
    ray.shutdown()
    cluster.shutdown()

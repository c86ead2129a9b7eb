"""Tests for grainfn._src.parallel.ray_lifetime: who shuts a Ray down, with a stand-in `ray`.

A real cluster is used by test_ray_prefetch.py; here `import ray` finds a
stand-in that records what grainfn asks of it.
"""

import sys
from types import SimpleNamespace
from typing import Any

import pytest

from grainfn._src.parallel import ray_lifetime


class StandInRay:
    """What ray_lifetime uses of `ray`: init, is_initialized, the session, shutdown."""

    def __init__(self, initialized: bool = False) -> None:
        self.initialized = initialized
        self.job = 1
        self.inits: list[tuple[Any, dict[str, Any]]] = []
        self.shutdowns = 0

    def init(self, address: Any = None, **options: Any) -> None:
        self.inits.append((address, options))
        self.initialized = True

    def is_initialized(self) -> bool:
        return self.initialized

    def get_runtime_context(self) -> Any:
        return SimpleNamespace(get_node_id=lambda: "node", get_job_id=lambda: f"job{self.job}")

    def shutdown(self) -> None:
        self.shutdowns += 1
        self.initialized = False


@pytest.fixture
def ray(monkeypatch: pytest.MonkeyPatch) -> StandInRay:
    stand_in = StandInRay()
    monkeypatch.setitem(sys.modules, "ray", stand_in)
    monkeypatch.setattr(ray_lifetime, "_registry", ray_lifetime._Registry())
    return stand_in


def test_grainfns_ray_lives_until_the_last_lease_is_released(ray: StandInRay) -> None:
    first = ray_lifetime.connect("auto", {"num_cpus": 2})
    second = ray_lifetime.connect("ignored once connected", {})
    assert ray.inits == [("auto", {"num_cpus": 2})]
    assert first is not None and second is not None
    assert first.started is second.started and first.started.holders == 2
    first.release()
    first.release()  # once only
    assert ray.shutdowns == 0 and second.started.holders == 1
    second.release()
    assert ray.shutdowns == 1
    assert ray_lifetime._registry.started is None


def test_a_ray_the_user_started_is_never_grainfns(ray: StandInRay) -> None:
    ray.initialized = True
    assert ray_lifetime.connect(None, {}) is None
    assert ray.inits == []


def test_a_ray_the_user_restarted_after_grainfns_is_the_users(ray: StandInRay) -> None:
    lease = ray_lifetime.connect(None, {})
    assert lease is not None
    ray.shutdown()  # the user shut grainfn's Ray down and started another
    ray.init()
    ray.job = 2
    assert ray_lifetime.connect(None, {}) is None
    lease.release()
    assert ray.shutdowns == 1  # the user's Ray is left running
    assert ray.initialized

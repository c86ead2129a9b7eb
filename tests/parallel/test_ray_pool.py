"""Tests for grainfn._src.parallel.ray_pool: a pool's options and its life before Ray starts.

Pools on a real cluster are tested in test_ray_prefetch.py and test_ray_faults.py.
"""

import pytest

from grainfn._src.parallel.ray_pool import ActorSlot, RayPool


def test_actor_options_spread_by_default_and_take_what_is_given() -> None:
    pool = RayPool(3, num_cpus=0.5, resources={"disk": 1}, label_selector={"role": "cpu"})
    assert pool.num_actors == 3
    assert pool.actor_options == {
        "num_cpus": 0.5,
        "scheduling_strategy": "SPREAD",
        "resources": {"disk": 1},
        "label_selector": {"role": "cpu"},
    }
    custom = RayPool(1, actor_options={"scheduling_strategy": "DEFAULT", "memory": 10})
    assert custom.actor_options == {"num_cpus": 1.0, "scheduling_strategy": "DEFAULT", "memory": 10}
    assert (custom.placement_timeout, custom.slots, custom.started_ray) == (60.0, [], False)


@pytest.mark.parametrize(
    ("kwargs", "error", "message"),
    [
        ({"num_actors": 0}, ValueError, "num_actors must be"),
        ({"num_actors": 1, "num_cpus": -1}, ValueError, r"num_cpus must be a number >= 0 \(CPUs"),
        ({"num_actors": 1, "num_cpus": True}, ValueError, "got True"),
        ({"num_actors": 1, "placement_timeout": 0}, ValueError, "placement_timeout must be None"),
    ],
)
def test_bad_options_are_refused_when_the_pool_is_made(
    kwargs: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        RayPool(**kwargs)


def test_a_pool_not_started_resizes_and_closes_without_ray() -> None:
    pool = RayPool(2)
    pool.resize(5)
    assert pool.num_actors == 5 and pool.slots == []
    with pytest.raises(ValueError, match="num_actors must be"):
        pool.resize(0)
    pool.close()
    pool.close()
    assert pool.closed
    with pytest.raises(RuntimeError, match="This RayPool is closed: make a new one"):
        pool.start()


def test_an_actor_slot_names_its_actor_and_counts_its_blocks() -> None:
    slot = ActorSlot(actor=None, index=3, pid=99, in_flight=2)
    assert slot.who == "Ray actor 3 (pid 99)"
    assert slot.load(ray=None) == 2  # nothing abandoned: Ray is not asked

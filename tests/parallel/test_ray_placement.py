"""Tests for grainfn._src.parallel.ray_placement: where a RayPool's actors can run, without Ray."""

import pytest

from grainfn._src.parallel import ray_placement as placement


def node(node_id: str, alive: bool = True, labels: dict | None = None, **resources: float) -> dict:
    return {"NodeID": node_id, "Alive": alive, "Resources": resources, "Labels": labels or {}}


def test_request_names_what_one_actor_reserves() -> None:
    options = {"num_cpus": 2, "num_gpus": 0.5, "memory": 2**31, "resources": {"disk": 1, "x": 0}}
    assert placement.request(options) == {"CPU": 2.0, "GPU": 0.5, "memory": 2.0**31, "disk": 1.0}
    assert placement.request({}) == {}


@pytest.mark.parametrize(
    ("selector", "value", "expected"),
    [
        ("cpu", "cpu", True),
        ("cpu", "gpu", False),
        ("cpu", None, False),
        ("!cpu", "cpu", False),
        ("!cpu", None, True),
        ("in(a, b)", "b", True),
        ("in(a,b)", "c", False),
        ("!in(a,b)", "a", False),
        ("!in(a,b)", None, True),
        ("", "a", None),
        ("in(a,)", "a", None),
    ],
)
def test_label_selectors_of_every_form(selector: str, value: str | None, expected: object) -> None:
    assert placement.label_matches(selector, value) is expected


def test_a_node_fits_an_actor_by_resources_and_labels() -> None:
    cpu = node("n1", labels={"role": "cpu"}, CPU=2.0)
    assert placement.fits({"CPU": 2.0}, {"role": "cpu"}, cpu)
    assert not placement.fits({"CPU": 2.5}, {}, cpu)
    assert not placement.fits({"GPU": 1.0}, {}, cpu)
    assert not placement.fits({}, {"role": "gpu"}, cpu)
    assert placement.fits({}, {"role": "in(,)"}, cpu)  # a selector it cannot read: no verdict


def test_unplaceable_names_the_request_and_what_each_alive_node_has() -> None:
    nodes = [node("ab12cd34ef", CPU=1.0), node("dead0000", alive=False, CPU=64.0)]
    assert placement.unplaceable({"num_cpus": 1}, nodes) is None
    message = placement.unplaceable({"num_cpus": 2, "label_selector": {"role": "cpu"}}, nodes)
    assert message is not None
    assert message.startswith(
        "No node of the Ray cluster can hold one actor of this RayPool: each asks for CPU 2, "
        "on a node labelled role=cpu, and the 1 alive node has: ab12cd34 (CPU 1, label role: "
        "none)."
    )
    assert "placement_timeout=None" in message


def test_unplaceable_counts_nodes_past_the_listed_ones() -> None:
    nodes = [node(f"node{i:04d}xx", CPU=1.0) for i in range(10)]
    message = placement.unplaceable({"num_cpus": 4}, nodes)
    assert message is not None
    assert "the 10 alive nodes have: node0000 (CPU 1); " in message
    assert "; and 2 more." in message


@pytest.mark.parametrize(
    "options",
    [
        {"num_cpus": 99, "scheduling_strategy": object()},  # a placement group, an affinity
        {"num_cpus": 99, "fallback_strategy": [{"label_selector": {}}]},
    ],
)
def test_unplaceable_does_not_judge_what_it_cannot_see(options: dict) -> None:
    assert placement.unplaceable(options, [node("n", CPU=1.0)]) is None


def test_unplaceable_without_alive_nodes_cannot_tell() -> None:
    assert placement.unplaceable({"num_cpus": 99}, [node("n", alive=False)]) is None
    assert placement.unplaceable({"num_cpus": 99, "scheduling_strategy": "SPREAD"}, []) is None


def test_unplaced_says_how_many_started_and_what_the_cluster_has() -> None:
    message = placement.unplaced(
        1, 4, 2.5, {"num_cpus": 1, "memory": 2**33}, {"CPU": 0.0}, {"CPU": 3.0, "memory": 2**34}
    )
    assert message.startswith(
        "Ray started 1 of 4 actors within placement_timeout=2.5 s; each asks for CPU 1, "
        "memory 8 GiB, and the cluster has CPU 0 available of 3, memory 0 GiB available of "
        "16 GiB (other actors and tasks hold the rest). The 3 not started were killed."
    )


def test_requests_and_nodes_are_described_for_errors() -> None:
    assert placement.describe_request({}, {}) == "no resources"
    assert placement.describe_request({"CPU": 0.5}, {"a": "b"}) == "CPU 0.5, on a node labelled a=b"
    described = placement.describe_node({"Resources": {"memory": 2**30}}, {"memory": 1.0}, {})
    assert described == "? (CPU 0, memory 1 GiB)"
    assert issubclass(placement.PlacementError, RuntimeError)

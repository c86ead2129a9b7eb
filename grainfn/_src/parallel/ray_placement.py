"""Where a `RayPool`'s actors can run: refused at once, or waited for with a bound.

Ray waits for as long as it takes to place an actor that no node can take
now, and tells the driver nothing. A pool does better in two steps:

1. Before it starts actors, it compares what one actor asks for (CPUs, GPUs,
   memory and custom resources, and node labels) with every alive node
   (`unplaceable`). Where no node could ever hold one, it raises `ValueError`
   at once, naming the request and what the nodes have.
2. Otherwise it waits for its actors to start for at most
   `placement_timeout` seconds; those that did not start are killed, and
   `PlacementError` says how many started, what each asks for, and what the
   cluster has (`unplaced`): other actors may hold the rest, or there are
   more actors than the nodes can hold.

The check of step 1 is skipped where it cannot judge: a scheduling strategy
of its own (a placement group, a node affinity), soft constraints
(`fallback_strategy`), or a pool told to wait for as long as it takes
(`placement_timeout=None`, for a cluster whose autoscaler adds nodes on demand).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

_LISTED_NODES = 8  # nodes an error describes one by one; the rest are counted


class PlacementError(RuntimeError):
    """Ray did not start a `RayPool`'s actors within its `placement_timeout`.

    The actors that did not start were killed; the message says what they
    ask for, what the cluster has, and what to do.
    """


def request(options: Mapping[str, Any]) -> dict[str, float]:
    """What one actor with these Ray actor `options` reserves, by Ray's resource names.

    Examples:
        >>> request({"num_cpus": 0.5, "resources": {"disk": 1}, "memory": 2**30})
        {'CPU': 0.5, 'memory': 1073741824.0, 'disk': 1.0}
        >>> request({"num_cpus": 0})
        {}
    """
    asked: dict[str, float] = {}
    for option, name in (("num_cpus", "CPU"), ("num_gpus", "GPU"), ("memory", "memory")):
        amount = options.get(option)
        if amount:
            asked[name] = float(amount)
    for name, amount in dict(options.get("resources") or {}).items():
        if amount:
            asked[str(name)] = float(amount)
    return asked


def label_matches(selector: str, value: str | None) -> bool | None:
    """Whether a node label `value` (None: the node has no such label) meets a selector value.

    The forms of Ray's `label_selector` values: `"a"`, `"!a"`, `"in(a,b)"`
    and `"!in(a,b)"`. None where the form is another (it cannot tell).

    Examples:
        >>> label_matches("cpu", "cpu"), label_matches("!cpu", "cpu"), label_matches("cpu", None)
        (True, False, False)
        >>> label_matches("in(a, b)", "b"), label_matches("!in(a,b)", None), label_matches("", "a")
        (True, True, None)
    """
    negated = selector.startswith("!")
    body = selector[1:] if negated else selector
    listed = re.fullmatch(r"(?:in)?\((.*)\)", body)
    values = {part.strip() for part in listed.group(1).split(",")} if listed else {body}
    if "" in values:
        return None
    matches = value is not None and value in values
    return not matches if negated else matches


def fits(asked: Mapping[str, float], labels: Mapping[str, str], node: Mapping[str, Any]) -> bool:
    """Whether `node` (as `ray.nodes()` lists it) could hold one actor, were it empty.

    Examples:
        >>> node = {"Resources": {"CPU": 2.0}, "Labels": {"role": "cpu"}}
        >>> fits({"CPU": 1.0}, {"role": "cpu"}, node), fits({"CPU": 4.0}, {}, node)
        (True, False)
        >>> fits({}, {"role": "gpu"}, node), fits({"disk": 1.0}, {}, node)
        (False, False)
    """
    resources = node.get("Resources") or {}
    if any(float(resources.get(name, 0.0)) < amount for name, amount in asked.items()):
        return False
    node_labels = node.get("Labels") or {}
    return all(label_matches(str(v), node_labels.get(k)) is not False for k, v in labels.items())


def unplaceable(options: Mapping[str, Any], nodes: Sequence[Mapping[str, Any]]) -> str | None:
    """Why no alive node of `nodes` (as `ray.nodes()` lists them) could hold one actor, or None.

    None too where it cannot tell (see the module): a scheduling strategy
    other than Ray's default or `"SPREAD"`, a `fallback_strategy`, or no
    alive node listed.

    Args:
        options: The Ray options of the actor (`RayPool.actor_options`).
        nodes: The cluster's nodes, as `ray.nodes()` lists them.

    Examples:
        >>> nodes = [{"NodeID": "ab12cd34ef", "Alive": True, "Resources": {"CPU": 1.0}}]
        >>> unplaceable({"num_cpus": 1}, nodes) is None
        True
        >>> import textwrap
        >>> print(textwrap.fill(unplaceable({"num_cpus": 2}, nodes), 88))
        No node of the Ray cluster can hold one actor of this RayPool: each asks for CPU 2, and
        the 1 alive node has: ab12cd34 (CPU 1). Ask for what a node has (the pool's num_cpus,
        resources, label_selector or actor_options), or add a node that has it. On a cluster
        whose autoscaler adds such nodes on demand, pass placement_timeout=None: the pool then
        waits for them.
    """
    strategy = options.get("scheduling_strategy")
    if not (strategy is None or isinstance(strategy, str)) or options.get("fallback_strategy"):
        return None
    alive = [node for node in nodes if node.get("Alive")]
    asked = request(options)
    labels = {str(k): str(v) for k, v in dict(options.get("label_selector") or {}).items()}
    if not alive or any(fits(asked, labels, node) for node in alive):
        return None
    listed = "; ".join(describe_node(node, asked, labels) for node in alive[:_LISTED_NODES])
    if len(alive) > _LISTED_NODES:
        listed += f"; and {len(alive) - _LISTED_NODES} more"
    have = "1 alive node has" if len(alive) == 1 else f"{len(alive)} alive nodes have"
    return (
        "No node of the Ray cluster can hold one actor of this RayPool: each asks for "
        f"{describe_request(asked, labels)}, and the {have}: {listed}. Ask for what a node has "
        "(the pool's num_cpus, resources, label_selector or actor_options), or add a node that "
        "has it. On a cluster whose autoscaler adds such nodes on demand, pass "
        "placement_timeout=None: the pool then waits for them."
    )


def unplaced(
    started: int,
    count: int,
    timeout: float,
    options: Mapping[str, Any],
    available: Mapping[str, Any],
    total: Mapping[str, Any],
) -> str:
    """Why `count - started` of `count` actors did not start within `timeout` seconds.

    Args:
        started: How many of them started.
        count: How many were asked for.
        timeout: The pool's `placement_timeout`.
        options: The Ray options of each actor.
        available: `ray.available_resources()`, while the actors waited.
        total: `ray.cluster_resources()`.

    Examples:
        >>> import textwrap
        >>> message = unplaced(2, 3, 3.0, {"num_cpus": 1}, {"CPU": 0.0}, {"CPU": 2.0})
        >>> print(textwrap.fill(message, 88))
        Ray started 2 of 3 actors within placement_timeout=3 s; each asks for CPU 1, and the
        cluster has CPU 0 available of 2 (other actors and tasks hold the rest). The 1 not
        started were killed. Ask for fewer actors or less for each (num_cpus, resources), add
        nodes, or raise placement_timeout where the nodes come later (None waits for as long as
        it takes).
    """
    asked = request(options)
    labels = {str(k): str(v) for k, v in dict(options.get("label_selector") or {}).items()}
    names = ["CPU", *(name for name in asked if name != "CPU")]
    has = ", ".join(
        f"{_amount(name, available.get(name, 0.0))} available of {_quantity(name, total.get(name))}"
        for name in names
    )
    return (
        f"Ray started {started} of {count} actors within placement_timeout={timeout:g} s; each "
        f"asks for {describe_request(asked, labels)}, and the cluster has {has} (other actors "
        f"and tasks hold the rest). The {count - started} not started were killed. Ask for "
        "fewer actors or less for each (num_cpus, resources), add nodes, or raise "
        "placement_timeout where the nodes come later (None waits for as long as it takes)."
    )


def describe_request(asked: Mapping[str, float], labels: Mapping[str, str]) -> str:
    """One actor's request, for errors.

    Examples:
        >>> describe_request({"CPU": 0.5, "disk": 1.0}, {"role": "cpu"})
        'CPU 0.5, disk 1, on a node labelled role=cpu'
        >>> describe_request({}, {})
        'no resources'
    """
    parts = [_amount(name, amount) for name, amount in asked.items()]
    if labels:
        parts.append("on a node labelled " + ", ".join(f"{k}={v}" for k, v in labels.items()))
    return ", ".join(parts) or "no resources"


def describe_node(
    node: Mapping[str, Any], asked: Mapping[str, float], labels: Mapping[str, str]
) -> str:
    """What `node` has of what an actor asks for (and its CPUs), for errors.

    Examples:
        >>> node = {"NodeID": "ab12cd34ef", "Resources": {"CPU": 1.0}, "Labels": {"zone": "a"}}
        >>> describe_node(node, {"disk": 1.0}, {"role": "cpu"})
        'ab12cd34 (CPU 1, disk 0, label role: none)'
    """
    resources = node.get("Resources") or {}
    node_labels = node.get("Labels") or {}
    names = ["CPU", *(name for name in asked if name != "CPU")]
    parts = [_amount(name, resources.get(name, 0.0)) for name in names]
    parts += [f"label {key}: {node_labels.get(key, 'none')}" for key in labels]
    return f"{str(node.get('NodeID', '?'))[:8]} ({', '.join(parts)})"


def _amount(name: str, amount: Any) -> str:
    """`amount` of resource `name`, named: "CPU 2", "memory 16 GiB"."""
    return f"{name} {_quantity(name, amount)}"


def _quantity(name: str, amount: Any) -> str:
    """`amount` of resource `name`: "2", "16 GiB" (Ray counts memory in bytes)."""
    value = float(amount or 0.0)
    return f"{value / 2**30:.3g} GiB" if name.endswith("memory") else f"{value:g}"

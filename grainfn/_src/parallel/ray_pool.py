"""Ray actors that read blocks of dataset positions, for `fn.ray_prefetch`.

A `RayPool` lives for a job: it connects to a Ray cluster (or starts a local
one) and keeps `num_actors` actors, placed by Ray resources or node labels,
across iterators and epochs. Each iterator opens a `RaySession` over its
pipeline's map-level leaves (see `ray_reads`: how blocks go to the actors,
and what becomes of a block whose actor dies or does not answer). The pool
puts a pipeline in the object store once, whatever the number of iterators
over it (see `shipping`: a small pickle, and its numpy arrays beside it,
which every actor reads as read-only views of the object store, without a
copy of its own); an actor loads a pipeline on its first block of it and
keeps it.

The pool replaces an actor that died (`_replace`), and its count may change
mid-run (`resize`); nodes may join or leave: the output never changes.
Actors that Ray cannot place are refused at once or waited for with a bound
(see `ray_placement`), and a Ray that grainfn started lives as long as a pool
uses it (see `ray_lifetime`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import os
import threading
import time
import uuid
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from grainfn._src.core import validate
from grainfn._src.core.blocks import read_block
from grainfn._src.core.dataset import Dataset
from grainfn._src.parallel.deaths import check_worker_timeout
from grainfn._src.parallel.ray_lifetime import RayLease, connect
from grainfn._src.parallel.ray_placement import PlacementError, unplaceable, unplaced
from grainfn._src.parallel.ray_reads import RaySession
from grainfn._src.parallel.shipping import Shipped, load_ray, ray_arrays
from grainfn._src.parallel.worker import error_payload

_KEPT_PIPELINES = 4  # pipelines an actor keeps loaded (the job's, most recent first)

READ_ONLY_NOTE = (
    "On Ray actors the pipeline's numpy arrays are read-only views of Ray's object store, "
    "shared by every actor: copy an array before writing into it (x = x.copy(), or "
    "np.array(x)) in the map that writes."
)
"""The note on a numpy error about writing into a read-only array, raised on an actor."""


class BlockActor:
    """A Ray actor's side: reads blocks of the leaves of the pipelines it is given."""

    def __init__(self) -> None:
        self.pipelines: collections.OrderedDict[str, list[Dataset[Any]]] = collections.OrderedDict()

    def node(self) -> str:
        """The id of the node this actor runs on."""
        import ray

        return str(ray.get_runtime_context().get_node_id())

    def where(self) -> tuple[str, int]:
        """The id of the node this actor runs on, and its process id."""
        return self.node(), os.getpid()

    def read(
        self, key: str, payload: list[Any], leaf: int, first: int, stop: int
    ) -> tuple[list[Any], bytes | None, str, float]:
        """Positions `[first, stop)` of leaf `leaf` of pipeline `key`, and how it went.

        Returns `(elements, error, its traceback, seconds)`: the elements
        before the first failure, and the failure pickled (or None).
        """
        leaves = self.pipelines.get(key)
        if leaves is None:
            import ray

            data, arrays = ray.get(payload[0])  # a list: Ray passes the ref as is
            leaves = load_ray(data, arrays)
            self.pipelines[key] = leaves
            while len(self.pipelines) > _KEPT_PIPELINES:
                self.pipelines.popitem(last=False)
        self.pipelines.move_to_end(key)
        started = time.perf_counter()
        block, error = read_block(leaves[leaf], first, stop)
        seconds = time.perf_counter() - started
        if error is None:
            return block, None, "", seconds
        import traceback

        if isinstance(error, ValueError) and "read-only" in str(error):
            error.add_note(READ_ONLY_NOTE)

        return block, error_payload(error), "".join(traceback.format_exception(error)), seconds


@dataclasses.dataclass(eq=False)
class ActorSlot:
    """One actor of the pool and the blocks it has in flight.

    A block no longer wanted (its reader closed, or another actor answered
    first) is left to run, never cancelled: in Ray 2.60 cancelling a queued
    actor call can leave the actor's later calls waiting for good. Its
    reference is kept in `abandoned` until it is done, and counts as load.
    """

    actor: Any
    index: int = 0  # its place in the pool, which names it in errors
    pid: int | None = None  # its process, once it started
    in_flight: int = 0
    abandoned: list[Any] = dataclasses.field(default_factory=list)
    killed: bool = False  # by the pool (it left, or timed out): its blocks are not suspects
    successor: ActorSlot | None = None  # the actor that took its place, once it died

    @property
    def who(self) -> str:
        """The actor, as errors name it."""
        return f"Ray actor {self.index} (pid {self.pid})"

    def load(self, ray: Any) -> int:
        """Blocks queued on the actor: those wanted, and those abandoned not done yet."""
        if self.abandoned:
            _, self.abandoned = ray.wait(self.abandoned, num_returns=len(self.abandoned), timeout=0)
        return self.in_flight + len(self.abandoned)


class RayPool:
    """Ray actors that read the per-position work of pipelines, for the life of a job.

    Pass it to `fn.ray_prefetch` (or `IterDataset.ray_prefetch`): the
    map-level work of the pipeline (every dataset under a `from_dataset`)
    runs on the actors; the stream stages run in this process. Elements and
    states are those of the pipeline without it, for any number of actors.

    Ray starts on first use: `ray.init(address=address, **init_options)`
    unless this process is connected already. The actors are started then,
    kept across iterators and epochs, and stopped by `close` (or when the
    pool is garbage collected). A Ray that grainfn started is shut down when
    the last pool using it closes (or is collected), never under a pool in
    use; a Ray the user started is never shut down by the pool.

    Actors that no alive node could hold (more CPUs than any node has, a
    resource or label no node has) are refused at once with a `ValueError`;
    actors that do not start within `placement_timeout` seconds (the nodes
    are busy or too few) are killed, and a `PlacementError` says how many
    started and what the cluster has.

    Args:
        num_actors: How many actors read blocks, >= 1.
        address: The cluster to connect to where Ray is not initialized yet:
            `"auto"`, a head's `"host:port"` or `"ray://host:port"`. None
            starts a local Ray.
        num_cpus: CPUs each actor reserves in Ray's scheduling (a float >= 0).
        resources: Other Ray resources each actor reserves, e.g.
            `{"preprocessing": 1}`: actors run only on nodes that have them.
        label_selector: Node labels an actor's node must have, e.g.
            `{"role": "cpu"}` (Ray's `label_selector` option).
        actor_options: Any other options of Ray actors (`runtime_env`,
            `scheduling_strategy`, `memory`...). By default actors spread over
            the nodes (`scheduling_strategy="SPREAD"`).
        init_options: Options of `ray.init` where the pool starts Ray.
        placement_timeout: Seconds to wait for Ray to start the actors (at
            `start`, `resize`, and when a dead one is replaced) before
            `PlacementError`; None waits for as long as it takes, without the
            check against the nodes (a cluster whose autoscaler adds nodes on
            demand).

    Examples:
        >>> pool = RayPool(2, num_cpus=0.5)
        >>> pool.num_actors
        2
        >>> pool.close()  # nothing was started: a no-op
    """

    def __init__(
        self,
        num_actors: int,
        *,
        address: str | None = None,
        num_cpus: float = 1.0,
        resources: Mapping[str, float] | None = None,
        label_selector: Mapping[str, str] | None = None,
        actor_options: Mapping[str, Any] | None = None,
        init_options: Mapping[str, Any] | None = None,
        placement_timeout: float | None = 60.0,
    ) -> None:
        self.num_actors = validate.check_positive_int(num_actors, "num_actors")
        self.placement_timeout = check_worker_timeout(placement_timeout, "placement_timeout")
        if isinstance(num_cpus, bool) or not isinstance(num_cpus, (int, float)) or num_cpus < 0:
            raise ValueError(f"num_cpus must be a number >= 0 (CPUs per actor), got {num_cpus!r}.")
        options: dict[str, Any] = {"num_cpus": num_cpus, "scheduling_strategy": "SPREAD"}
        if resources:
            options["resources"] = dict(resources)
        if label_selector:
            options["label_selector"] = dict(label_selector)
        options.update(actor_options or {})
        self.actor_options = options
        self.address = address
        self.init_options = dict(init_options or {})
        self.slots: list[ActorSlot] = []
        self.started_ray = False
        self.closed = False
        self.replaced = 0  # actors replaced after they died
        self.duplicated = 0  # slow blocks also sent to a second actor
        self.lost = 0  # results lost from the object store, read again
        self.call_seconds: float | None = None  # a round trip to an idle actor
        self.puts = 0  # pipelines put in the object store
        self._pipelines: dict[int, tuple[str, Any]] = {}  # by id of its Shipped: key, reference
        self._lock = threading.Lock()
        self._finalizer: weakref.finalize | None = None

    def start(self) -> None:
        """Connects to Ray (or starts it) and starts the actors, if not done yet.

        Raises:
            ValueError: if no node of the cluster could hold one actor.
            PlacementError: if Ray did not start them all within
                `placement_timeout`; none is kept, and Ray is let go of.
        """
        if self.closed:
            raise RuntimeError("This RayPool is closed: make a new one.")
        if self.slots:
            return
        import ray

        first = self._finalizer is None  # else every actor was lost, and none replaced
        if first:
            lease = connect(self.address, self.init_options)
            self.started_ray = lease is not None
            self.slots = []
            # The list and the lease, not the pool: a finalizer must not keep the pool alive.
            self._finalizer = weakref.finalize(self, _stop, self.slots, lease)
        try:
            self._check_placeable()
            stopped = "The pool did not start: its actors were stopped."
            self._add_actors(self.slots, self.num_actors, stopped)
        except BaseException:
            if first and self._finalizer is not None:
                self._finalizer()  # the actors that started, and Ray where it was the pool's
                self._finalizer = None
            else:
                _stop(self.slots, None)
            self.slots.clear()
            raise
        started = time.perf_counter()
        ray.get(self.slots[0].actor.node.remote())
        self.call_seconds = time.perf_counter() - started

    def resize(self, num_actors: int) -> None:
        """Keeps `num_actors` actors from now on: new ones join, the last ones leave.

        Blocks in flight on an actor that leaves are read again by another.
        The output does not change.

        Raises:
            ValueError: if no node of the cluster could hold one actor.
            PlacementError: if Ray did not start the new actors within
                `placement_timeout`; the pool keeps those that started.
        """
        count = validate.check_positive_int(num_actors, "num_actors")
        if not self.slots:
            self.num_actors = count
            return
        import ray

        while len(self.slots) > count:
            slot = self.slots.pop()
            slot.killed = True
            _kill(ray, slot.actor)
        self.num_actors = len(self.slots)
        if count > len(self.slots):
            self._check_placeable()
            try:
                self._add_actors(self.slots, count - len(self.slots), "")
            finally:
                self.num_actors = len(self.slots)

    def nodes(self) -> list[str]:
        """The node id of each actor (starting the pool if it is not started)."""
        import ray

        self.start()
        return [str(node) for node in ray.get([slot.actor.node.remote() for slot in self.slots])]

    def session(
        self,
        leaves: Sequence[Dataset[Any]],
        pinned: bool = True,
        worker_timeout: float | None = None,
    ) -> RaySession:
        """What reads `leaves` for one iterator (see `RaySession` for the options)."""
        return RaySession(self, list(leaves), pinned, worker_timeout)

    def put(self, shipped: Shipped) -> tuple[str, Any]:
        """The key and object reference of a pipeline in the object store: put once per pool.

        Kept while the pipeline is (its `Shipped` lives as long as its parts).
        """
        import ray

        self.start()
        with self._lock:
            entry = self._pipelines.get(id(shipped))
            if entry is None:
                entry = (uuid.uuid4().hex, ray.put((shipped.data, ray_arrays(shipped))))
                self._pipelines[id(shipped)] = entry
                self.puts += 1
                # The dictionary, not the pool: a pipeline kept alive must not keep the pool.
                pipelines = self._pipelines
                weakref.finalize(shipped, pipelines.pop, id(shipped), None)
            return entry

    def has(self, shipped: Shipped) -> bool:
        """Whether `put(shipped)` would not wait: the pipeline is in the store already."""
        return id(shipped) in self._pipelines

    def close(self) -> None:
        """Stops the actors, and lets go of Ray. Closing again does nothing.

        A Ray that grainfn started stops with the last pool that uses it (see
        `ray_lifetime`); a Ray the user started runs on.
        """
        self.closed = True
        if self._finalizer is not None:
            self._finalizer()
        self.slots = []
        self._pipelines.clear()

    def __enter__(self) -> RayPool:
        return self

    def __exit__(self, *_: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"RayPool({self.num_actors} actors)"

    def __reduce__(self) -> Any:
        raise TypeError(
            "A RayPool holds live Ray actors and cannot be pickled: make the pool in the "
            "process that iterates (one per host), and pass it to fn.ray_prefetch there."
        )

    # The side of RaySession and RayTask.

    def _new_actor(self) -> Any:
        import ray

        return ray.remote(BlockActor).options(**self.actor_options).remote()

    def _check_placeable(self) -> None:
        """Raises ValueError where no alive node could hold one actor (see `ray_placement`)."""
        if self.placement_timeout is None:  # wait for as long as it takes: nodes may come
            return
        import ray

        reason = unplaceable(self.actor_options, ray.nodes())
        if reason is not None:
            raise ValueError(reason)

    def _add_actors(self, slots: list[ActorSlot], count: int, consequence: str) -> None:
        """Starts `count` actors into `slots`, and waits for them for `placement_timeout`.

        Those not started by then are killed and left out of `slots`, and
        `PlacementError` says so, then `consequence` (what became of the pool).
        """
        import ray

        new = []
        for _ in range(count):
            new.append(ActorSlot(self._new_actor(), index=len(slots)))
            slots.append(new[-1])
        unstarted = self._await_started(new)
        if not unstarted:
            return
        slots[:] = [slot for slot in slots if slot not in unstarted]
        assert self.placement_timeout is not None, "only a timeout leaves actors unstarted"
        message = unplaced(
            count - len(unstarted),
            count,
            self.placement_timeout,
            self.actor_options,
            ray.available_resources(),
            ray.cluster_resources(),
        )
        for slot in unstarted:
            slot.killed = True
            _kill(ray, slot.actor)
        raise PlacementError(f"{message} {consequence}".rstrip())

    def _await_started(self, new: list[ActorSlot]) -> list[ActorSlot]:
        """Waits up to `placement_timeout` for the actors of `new`; those that did not start."""
        import ray

        calls = [slot.actor.where.remote() for slot in new]
        ready, _ = ray.wait(calls, num_returns=len(calls), timeout=self.placement_timeout)
        answered = set(ready)
        unstarted = []
        for slot, call in zip(new, calls):
            if call in answered:
                _, slot.pid = ray.get(call)  # raises what its start raised, if it failed
            else:
                unstarted.append(slot)
        return unstarted

    def _submit(
        self, session: RaySession, leaf: int, first: int, stop: int, avoid: Sequence[ActorSlot] = ()
    ) -> tuple[ActorSlot, Any]:
        """Sends a block to the actor with the fewest in flight (other than `avoid`, if any)."""
        import ray

        self.start()
        choices = [slot for slot in self.slots if slot not in avoid] or self.slots
        slot = min(choices, key=lambda s: s.load(ray))
        slot.in_flight += 1
        ref = slot.actor.read.remote(session.key, [session.payload], leaf, first, stop)
        return slot, ref

    def _release(self, slot: ActorSlot, abandoned: Any = None) -> None:
        """A block of `slot` is done, or no longer wanted (`abandoned`: its reference)."""
        slot.in_flight = max(0, slot.in_flight - 1)
        if abandoned is not None and any(slot is kept for kept in self.slots):
            slot.abandoned.append(abandoned)

    def _replace(self, dead: ActorSlot) -> None:
        """Replaces an actor that died or was killed (if it is still in the pool).

        Waits for the new actor to start, for `placement_timeout`: if it
        does not, it is killed, the pool goes on with one actor fewer, and
        `PlacementError` says so.
        """
        import ray

        for place, slot in enumerate(self.slots):
            if slot is dead:
                _kill(ray, slot.actor)
                new = ActorSlot(self._new_actor(), index=slot.index)
                self.slots[place] = dead.successor = new
                self.replaced += 1
                if self._await_started([new]):
                    self.slots.remove(new)
                    new.killed = True
                    _kill(ray, new.actor)
                    assert self.placement_timeout is not None, "only a timeout leaves it unstarted"
                    message = unplaced(
                        0,
                        1,
                        self.placement_timeout,
                        self.actor_options,
                        ray.available_resources(),
                        ray.cluster_resources(),
                    )
                    raise PlacementError(
                        f"{message} It was to replace {dead.who}, which died: the pool goes on "
                        f"with {len(self.slots)} actors."
                    )
                return

    def _heir(self, slot: ActorSlot) -> ActorSlot:
        """The actor that took the place of `slot` (or `slot`, if it is in the pool).

        The least loaded actor where none did (it left the pool).
        """
        import ray

        self.start()
        while not any(slot is kept for kept in self.slots) and slot.successor is not None:
            slot = slot.successor
        if any(slot is kept for kept in self.slots):
            return slot
        return min(self.slots, key=lambda s: s.load(ray))


def _kill(ray: Any, actor: Any) -> None:
    with contextlib.suppress(Exception):  # dead already, or Ray is shut down
        ray.kill(actor, no_restart=True)


def _stop(slots: list[ActorSlot], lease: RayLease | None) -> None:
    """Stops a pool's actors, and lets go of Ray where grainfn started it (see `ray_lifetime`).

    Also at garbage collection: it holds the pool's list of actors and its
    lease, never the pool.
    """
    import ray

    if ray.is_initialized():
        for slot in slots:
            _kill(ray, slot.actor)
    if lease is not None:
        lease.release()

"""Ray actors that read blocks of dataset positions, for `fn.ray_prefetch`.

A `RayPool` lives for a job: it connects to a Ray cluster (or starts a local
one) and keeps `num_actors` actors, placed by Ray resources or node labels,
across iterators and epochs. Each iterator opens a `RaySession` over its
pipeline's map-level leaves. The pool puts a pipeline in the object store
once, whatever the number of iterators over it (see `shipping`: a small
pickle, and its numpy arrays beside it, which every actor reads as read-only
views of the object store, without a copy of its own); an actor loads a
pipeline on its first block of it and keeps it. While that happens the
reader reads in its own thread (`RayLeafExecutor.ready`).

A block of positions goes to the actor with the fewest blocks in flight, not
round-robin, and blocks come back in position order (the `BlockReader`
seam that `mp_prefetch` uses). A block's elements depend only on its
positions, so any answer for a block is the answer, which makes these safe:
- a block lost with its actor (killed, or its node removed) or with its
  result (an object lost from the store) is read again by another actor, and
  the dead actor is replaced;
- a block far slower than the recent median is also sent to a second actor,
  and the first answer is kept.
The actors' count may change mid-run (`resize`), and nodes may join or leave:
the output never changes. A Ray that grainfn started lives as long as a pool
uses it (see `ray_lifetime`).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import statistics
import threading
import time
import uuid
import warnings
import weakref
from collections.abc import Mapping, Sequence
from typing import Any

from grainfn._src.core import validate
from grainfn._src.core.blocks import MAX_TASK, Result, read_block
from grainfn._src.core.dataset import Dataset
from grainfn._src.parallel.ray_lifetime import RayLease, connect
from grainfn._src.parallel.shipping import Shipped, load_ray, ray_arrays, ship
from grainfn._src.parallel.worker import error_payload, rebuild_error

TASK_SECONDS = 0.05
"""How long a block should take an actor: a Ray call costs about 1 ms, so 2% of it."""

FIRST_TASK_SECONDS = 0.01
"""How long each of the first round of blocks should take: the first elements come soon."""

SLOW_FACTOR = 4.0
"""A block waited for this many times the recent median block time is also sent elsewhere."""

SLOW_FLOOR = 0.5
"""Seconds: a block is never sent to a second actor before this."""

CHEAP_BLOCKS = 8
"""Blocks measured before judging whether the work pays for its transfer."""

QUICK_PUT_BYTES = 16 * 2**20
"""A pipeline with fewer bytes of arrays is put in the object store at once, not in a thread."""

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
class _Slot:
    """One actor of the pool and the blocks it has in flight.

    A block no longer wanted (its reader closed, or another actor answered
    first) is left to run, never cancelled: in Ray 2.60 cancelling a queued
    actor call can leave the actor's later calls waiting for good. Its
    reference is kept in `abandoned` until it is done, and counts as load.
    """

    actor: Any
    in_flight: int = 0
    abandoned: list[Any] = dataclasses.field(default_factory=list)

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
    ) -> None:
        self.num_actors = validate.check_positive_int(num_actors, "num_actors")
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
        self.slots: list[_Slot] = []
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
        """Connects to Ray (or starts it) and starts the actors, if not done yet."""
        if self.closed:
            raise RuntimeError("This RayPool is closed: make a new one.")
        if self.slots:
            return
        import ray

        lease = connect(self.address, self.init_options)
        self.started_ray = lease is not None
        self.slots = []
        # The list and the lease, not the pool: a finalizer must not keep the pool alive.
        self._finalizer = weakref.finalize(self, _stop, self.slots, lease)
        self.slots.extend(_Slot(self._new_actor()) for _ in range(self.num_actors))
        ray.get([slot.actor.node.remote() for slot in self.slots])  # every actor is up
        started = time.perf_counter()
        ray.get(self.slots[0].actor.node.remote())
        self.call_seconds = time.perf_counter() - started

    def resize(self, num_actors: int) -> None:
        """Keeps `num_actors` actors from now on: new ones join, the last ones leave.

        Blocks in flight on an actor that leaves are read again by another.
        The output does not change.
        """
        count = validate.check_positive_int(num_actors, "num_actors")
        self.num_actors = count
        if not self.slots:
            return
        import ray

        while len(self.slots) > count:
            _kill(ray, self.slots.pop().actor)
        while len(self.slots) < count:
            self.slots.append(_Slot(self._new_actor()))

    def nodes(self) -> list[str]:
        """The node id of each actor (starting the pool if it is not started)."""
        import ray

        self.start()
        return [str(node) for node in ray.get([slot.actor.node.remote() for slot in self.slots])]

    def session(self, leaves: Sequence[Dataset[Any]], pinned: bool = True) -> RaySession:
        """What reads `leaves` for one iterator; `pinned`: every block goes to the actors."""
        return RaySession(self, list(leaves), pinned)

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

    def _submit(
        self, session: RaySession, leaf: int, first: int, stop: int, avoid: Sequence[_Slot] = ()
    ) -> tuple[_Slot, Any]:
        """Sends a block to the actor with the fewest in flight (other than `avoid`, if any)."""
        import ray

        self.start()
        choices = [slot for slot in self.slots if slot not in avoid] or self.slots
        slot = min(choices, key=lambda s: s.load(ray))
        slot.in_flight += 1
        ref = slot.actor.read.remote(session.key, [session.payload], leaf, first, stop)
        return slot, ref

    def _release(self, slot: _Slot, abandoned: Any = None) -> None:
        """A block of `slot` is done, or no longer wanted (`abandoned`: its reference)."""
        slot.in_flight = max(0, slot.in_flight - 1)
        if abandoned is not None and any(slot is kept for kept in self.slots):
            slot.abandoned.append(abandoned)

    def _replace(self, dead: _Slot) -> None:
        """Replaces an actor that died (if it is still in the pool)."""
        import ray

        for index, slot in enumerate(self.slots):
            if slot is dead:
                _kill(ray, slot.actor)
                self.slots[index] = _Slot(self._new_actor())
                self.replaced += 1
                return


class RaySession:
    """One iterator's reads on a `RayPool`: its leaves in the object store, and their timings.

    Where the blocks are `pinned` to the actors, work too cheap for Ray gets a
    warning (see `record`); otherwise the reader reads such work here itself.
    """

    def __init__(self, pool: RayPool, leaves: list[Dataset[Any]], pinned: bool = True) -> None:
        self.pool, self.leaves = pool, leaves
        self.key = ""
        self.payload: Any = None
        self.block_seconds: collections.deque[float] = collections.deque(maxlen=32)
        self.costs: list[tuple[int, float, float]] = []  # elements, compute, transfer seconds
        self.warned = not pinned  # nothing to warn of: the reader moves cheap work here
        self._putter: threading.Thread | None = None  # puts the pipeline (see `ready`)
        self._lock = threading.Lock()

    def start(self) -> None:
        """Starts the pool and puts the pipeline in the object store, if not done yet."""
        with self._lock:
            if self.payload is None:
                self.key, self.payload = self.pool.put(ship((*self.leaves, None)))

    def ready(self) -> bool:
        """Whether the pipeline is in the object store; never waits for it to get there.

        The pool's actors are started here, where they are not (Ray is started
        in the calling thread); the pipeline is put here too where that takes
        no time (its arrays under `QUICK_PUT_BYTES`), else in a thread.
        """
        if self.payload is not None:
            return True
        if self._putter is None:
            self.pool.start()
            shipped = ship((*self.leaves, None))
            if self.pool.has(shipped) or shipped.nbytes < QUICK_PUT_BYTES:
                self.start()
                return True
            self._putter = threading.Thread(target=self._put, name="grainfn-ray-put", daemon=True)
            self._putter.start()
        return not self._putter.is_alive()

    def _put(self) -> None:
        with contextlib.suppress(Exception):  # raised again by the first block's `start`
            self.start()

    def executor(self, leaf: int) -> RayLeafExecutor:
        return RayLeafExecutor(self, leaf)

    def close(self) -> None:
        if self._putter is not None:
            self._putter.join()
        self.payload = None  # the pool keeps the pipeline in the store while it lives

    def measured(self) -> bool:
        """Whether the blocks that judge the cost of Ray are in (see `record`)."""
        return self.warned or len(self.costs) >= CHEAP_BLOCKS

    def slow_after(self) -> float | None:
        """Seconds to wait for a block before sending it to a second actor as well."""
        if len(self.block_seconds) < 4 or len(self.pool.slots) < 2:
            return None
        return max(SLOW_FLOOR, SLOW_FACTOR * statistics.median(self.block_seconds))

    def record(self, elements: int, compute: float, waited: float, transfer: float) -> None:
        """Keeps a block's times; warns once if the work does not pay for its transfer."""
        self.block_seconds.append(max(compute, waited))
        if self.warned or len(self.costs) >= CHEAP_BLOCKS:
            return
        self.costs.append((elements, compute, transfer))
        if len(self.costs) == CHEAP_BLOCKS:
            message = too_cheap(self.costs, self.pool.call_seconds or 0.0)
            if message is not None:
                self.warned = True
                warnings.warn(message, RuntimeWarning, stacklevel=2)


def too_cheap(costs: Sequence[tuple[int, float, float]], call: float) -> str | None:
    """Why blocks with these `(elements, compute, transfer)` seconds do not pay for Ray, or None.

    An element costs `compute` on an actor and `transfer` to bring back, and a
    block one call. Blocks grow to `TASK_SECONDS` of work (at most
    `MAX_TASK` elements), so the work pays where a block that size computes
    for longer than its call and transfer take.

    Examples:
        >>> too_cheap([(100, 0.5, 0.001)], call=0.001) is None  # 5 ms an element
        True
        >>> print(too_cheap([(1000, 0.0002, 0.004)], call=0.001))  # doctest: +ELLIPSIS
        ray_prefetch: an element takes 0.2 µs to compute on an actor, and 4 µs to bring back...
    """
    elements = sum(c[0] for c in costs)
    compute, transfer = sum(c[1] for c in costs) / elements, sum(c[2] for c in costs) / elements
    size = MAX_TASK if compute <= 0 else max(1, min(MAX_TASK, int(TASK_SECONDS / compute)))
    if compute * size > transfer * size + call:
        return None
    return (
        f"ray_prefetch: an element takes {compute * 1e6:.3g} µs to compute on an actor, and "
        f"{transfer * 1e6:.3g} µs to bring back; a call costs {call * 1e3:.3g} ms. Even blocks "
        f"of {size} elements spend longer on Ray than on the work: it is too cheap to pay for "
        "Ray. Read it in this process (drop ray_prefetch), or with mp_prefetch; Ray pays "
        "where an element takes a millisecond or more."
    )


class RayLeafExecutor:
    """The executor of one leaf of a session, for a BlockReader."""

    def __init__(self, session: RaySession, leaf: int) -> None:
        self.session, self.leaf = session, leaf
        # Two blocks per actor: while an actor computes one, its next is queued.
        self.max_tasks = 2 * session.pool.num_actors
        self.submitted = 0
        # How long a block should take: less for the first round, so the first elements come
        # soon, then TASK_SECONDS.
        self.task_seconds = FIRST_TASK_SECONDS

    def ready(self) -> bool:
        """Whether the pipeline is on its way to the actors (see `RaySession.ready`)."""
        return self.session.ready()

    def submit(self, first: int, stop: int) -> RayTask:
        self.session.start()
        self.submitted += 1
        if self.submitted > self.max_tasks:
            self.task_seconds = TASK_SECONDS
        return RayTask(self.session, self.leaf, first, stop)

    def close(self) -> None:
        """The session belongs to the iterator that opened it; it closes the session."""


class RayTask:
    """A block in flight on one actor, or two (a slow one is sent to a second)."""

    def __init__(self, session: RaySession, leaf: int, first: int, stop: int) -> None:
        self.session, self.leaf, self.first, self.stop = session, leaf, first, stop
        self.attempts: list[tuple[_Slot, Any]] = []
        self._send()

    def _send(self) -> None:
        busy = [slot for slot, _ in self.attempts]
        if busy:
            self.session.pool.duplicated += 1
        self.attempts.append(
            self.session.pool._submit(self.session, self.leaf, self.first, self.stop, busy)
        )

    def result(self) -> Result:
        import ray

        waiting = time.perf_counter()
        while True:
            limit = self.session.slow_after() if len(self.attempts) == 1 else None
            if len(self.attempts) == 1 and self.session.measured():
                index = 0  # one call: get, with the time after which it is sent again
            else:  # wait first, to tell the waiting from the transfer, or for either copy
                refs = [ref for _, ref in self.attempts]
                ready, _ = ray.wait(refs, num_returns=1, timeout=limit)
                if not ready:  # far slower than the others: another actor reads it too
                    self._send()
                    continue
                index, limit = refs.index(ready[0]), None
            slot, ref = self.attempts[index]
            got = time.perf_counter()
            try:
                block, payload, trace, seconds = ray.get(ref, timeout=limit)
            except ray.exceptions.GetTimeoutError:  # far slower than the others
                self._send()
                continue
            except ray.exceptions.RayActorError:  # the actor died, or its node left
                self._drop(index)
                self.session.pool._replace(slot)
            except ray.exceptions.ObjectLostError:  # its result was lost: read it again
                self._drop(index)
                self.session.pool.lost += 1
            else:
                transfer = time.perf_counter() - got
                self._drop(index)
                self.cancel()  # a second copy, if any, is not needed
                self.session.record(len(block), seconds, time.perf_counter() - waiting, transfer)
                error = None
                if payload is not None:
                    error = rebuild_error(payload, trace, "a Ray actor (fn.ray_prefetch)")
                return block, error, seconds
            if not self.attempts:
                self._send()

    def _drop(self, index: int) -> None:
        slot, _ = self.attempts.pop(index)
        self.session.pool._release(slot)

    def cancel(self) -> bool:
        """Drops the block: its calls run on (see `_Slot`), and their answers are ignored."""
        pool = self.session.pool
        for slot, ref in self.attempts:
            pool._release(slot, abandoned=ref)
        self.attempts = []
        return True


def _kill(ray: Any, actor: Any) -> None:
    with contextlib.suppress(Exception):  # dead already, or Ray is shut down
        ray.kill(actor, no_restart=True)


def _stop(slots: list[_Slot], lease: RayLease | None) -> None:
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

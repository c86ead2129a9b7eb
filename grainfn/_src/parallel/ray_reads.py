"""One iterator's reads on the actors of a `RayPool`: blocks out, answers back in order.

A `RaySession` puts the iterator's pipeline in the object store (once per
pool) and makes a `RayLeafExecutor` per map-level leaf, for a `BlockReader`
(the seam `mp_prefetch` uses): blocks of positions go out as `RayTask`s and
come back in position order. While the pipeline goes to the actors the
reader reads in its own thread (`RayLeafExecutor.ready`).

A block goes to the actor with the fewest blocks in flight, not round-robin.
A block's elements depend only on its positions, so any answer for a block
is the answer, which makes these safe:
- a block lost with its result (an object lost from the store) is read
  again;
- a block lost with its actor (killed, or its node removed) is read again
  one position at a time (a call each, sent once the one before answered)
  by the actor that replaced it, and
  the worker processes' rule for deaths applies (see `deaths`): if that read
  completes, the block is delivered with no error; a position at which two
  actors in a row die ends the block with a `WorkerError` naming it, after
  the positions before it;
- a block far slower than the recent median is also sent to a second actor,
  and the first answer is kept;
- with a `worker_timeout`, a block with no answer within that many seconds
  ends with a `WorkerError`, its actors are killed and replaced, and the
  next read reads it again.
"""

from __future__ import annotations

import collections
import contextlib
import statistics
import threading
import time
import warnings
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from grainfn._src.core.blocks import Result
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.executor_policy import DEFAULT_TUNING
from grainfn._src.parallel.deaths import (
    TIMEOUT_HINT,
    Death,
    Retry,
    WorkerError,
    after_death,
    check_worker_timeout,
    timed_out,
)
from grainfn._src.parallel.shipping import COPY_RATE, ship
from grainfn._src.parallel.worker import rebuild_error

if TYPE_CHECKING:  # the pool makes sessions: it imports this module
    from grainfn._src.parallel.ray_pool import ActorSlot, RayPool

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


class RaySession:
    """One iterator's reads on a `RayPool`: its leaves in the object store, and their timings.

    Args:
        pool: The pool whose actors read.
        leaves: The datasets they read.
        pinned: Whether every block goes to the actors: then work too cheap
            for Ray gets a warning (see `record`); otherwise the reader reads
            such work here itself.
        worker_timeout: Seconds to wait for a block's answer (or for each
            position's, read one at a time) before its actors are killed and
            the block ends with a `WorkerError`; None waits for as long as
            they live.
    """

    def __init__(
        self,
        pool: RayPool,
        leaves: list[Dataset[Any]],
        pinned: bool = True,
        worker_timeout: float | None = None,
    ) -> None:
        self.pool, self.leaves = pool, leaves
        self.worker_timeout = check_worker_timeout(worker_timeout)
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

    def start_seconds(self) -> float:
        """About how long readying the actors costs: putting the pipeline's arrays in the store.

        0 once the pool has put this pipeline (it keeps it for every iterator).
        """
        if self.payload is not None:
            return 0.0
        shipped = ship((*self.leaves, None))
        return 0.0 if self.pool.has(shipped) else shipped.nbytes / COPY_RATE

    def _put(self) -> None:
        with contextlib.suppress(Exception):  # raised again by the first block's `start`
            self.start()

    def of_leaf(self, leaf: int) -> str:
        """Which dataset of the pipeline leaf `leaf` is, for errors ("" for the only one)."""
        return f" of dataset {leaf} of the pipeline" if len(self.leaves) > 1 else ""

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
    `Tuning.max_task` elements), so the work pays where a block that size computes
    for longer than its call and transfer take.

    Examples:
        >>> too_cheap([(100, 0.5, 0.001)], call=0.001) is None  # 5 ms an element
        True
        >>> print(too_cheap([(1000, 0.0002, 0.004)], call=0.001))  # doctest: +ELLIPSIS
        ray_prefetch: an element takes 0.2 µs to compute on an actor, and 4 µs to bring back...
    """
    elements = sum(c[0] for c in costs)
    compute, transfer = sum(c[1] for c in costs) / elements, sum(c[2] for c in costs) / elements
    most = DEFAULT_TUNING.max_task
    size = most if compute <= 0 else max(1, min(most, int(TASK_SECONDS / compute)))
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

    def start_seconds(self) -> float:
        """About how long readying the actors costs (see `RaySession.start_seconds`)."""
        return self.session.start_seconds()

    def submit(self, first: int, stop: int) -> RayTask:
        self.session.start()
        self.submitted += 1
        if self.submitted > self.max_tasks:
            self.task_seconds = TASK_SECONDS
        return RayTask(self.session, self.leaf, first, stop)

    def close(self) -> None:
        """The session belongs to the iterator that opened it; it closes the session."""


class RayTask:
    """A block in flight on one actor, or two (a slow one is sent to a second).

    Where the last actor holding it dies, the block is read again one
    position at a time (a call each) on the actor that replaced it, and the
    rule of `deaths` decides: the block as read, or the positions before one
    at which two actors in a row died and a `WorkerError` naming it. A block
    lost with an actor the pool killed itself (it left, or timed out) is
    only sent again. With the session's `worker_timeout`, a block (or a
    position read alone) with no answer in time ends with a `WorkerError`,
    and the actors holding it are killed and replaced.
    """

    def __init__(self, session: RaySession, leaf: int, first: int, stop: int) -> None:
        self.session, self.leaf, self.first, self.stop = session, leaf, first, stop
        self.attempts: list[tuple[ActorSlot, Any]] = []
        self.retry: Retry | None = None  # the one-at-a-time read, once an actor died on it
        self.reader: ActorSlot | None = None  # the actor that died; its heir reads one at a time
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
        deadline = _deadline(self.session.worker_timeout)
        while self.retry is None:
            if not self.attempts:  # its actor died, or its result was lost: read it again
                self._send()
                deadline = _deadline(self.session.worker_timeout)
            limit = self.session.slow_after() if len(self.attempts) == 1 else None
            wait = _sooner(limit, deadline)
            if len(self.attempts) == 1 and self.session.measured():
                index = 0  # one call: get, with the time after which it is sent again
            else:  # wait first, to tell the waiting from the transfer, or for either copy
                refs = [ref for _, ref in self.attempts]
                ready, _ = ray.wait(refs, num_returns=1, timeout=wait)
                if not ready:
                    if _passed(deadline):
                        return self._timed_out(self._holders())
                    self._send()  # far slower than the others: another actor reads it too
                    continue
                index, wait = refs.index(ready[0]), None
            slot, ref = self.attempts[index]
            got = time.perf_counter()
            try:
                block, payload, trace, seconds = ray.get(ref, timeout=wait)
            except ray.exceptions.GetTimeoutError:
                if _passed(deadline):
                    return self._timed_out(self._holders())
                self._send()  # far slower than the others
                continue
            except ray.exceptions.RayActorError as died:  # the actor died, or its node left
                self._drop(index)
                self.session.pool._replace(slot)
                if not self.attempts and not slot.killed:  # the pool's own kills blame nothing
                    death = _death(slot, died)
                    where = self.session.of_leaf(self.leaf)
                    self.retry = _as_retry(after_death(death, None, self.first, self.stop, where))
                    self.reader = slot
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
        return self._one_at_a_time(self.retry)

    def _one_at_a_time(self, retry: Retry) -> Result:
        """Reads the rest of the block a position per call, on the heir of the actor that died.

        Each call is sent once the one before it answered, so a death is at
        the position of the call in flight: with calls queued ahead, Ray may
        fail those whose answers were on their way when it learnt of the
        death, which would blame a position before the one that killed it.
        """
        import ray

        pool, session = self.session.pool, self.session
        seconds = 0.0
        while True:
            position = self.first + len(retry.parts)
            if position >= self.stop:  # read without a death: the death was not theirs
                return retry.parts, None, seconds
            assert self.reader is not None
            slot = self.reader = pool._heir(self.reader)
            call = slot.actor.read.remote(
                session.key, [session.payload], self.leaf, position, position + 1
            )
            slot.in_flight += 1
            try:
                block, payload, trace, took = ray.get(call, timeout=session.worker_timeout)
            except ray.exceptions.GetTimeoutError:
                return self._timed_out([slot], retry.parts)
            except ray.exceptions.RayActorError as died:
                pool._replace(slot)
                if slot.killed:  # the pool killed it: the position is read again, no suspect
                    continue
                where = session.of_leaf(self.leaf)
                decision = after_death(
                    _death(slot, died), retry, self.first, self.stop, where, keep=True
                )
                if not isinstance(decision, Retry):
                    parts, message = decision
                    return parts, WorkerError(message), seconds
                retry = self.retry = decision
                continue
            except ray.exceptions.ObjectLostError:  # its answer was lost: read it again
                pool.lost += 1
                continue
            finally:
                pool._release(slot)
            retry.parts.extend(block)
            seconds += took
            if payload is not None:  # the pipeline's own error, as from a whole block
                failure = rebuild_error(payload, trace, "a Ray actor (fn.ray_prefetch)")
                return retry.parts, failure, seconds

    def _holders(self) -> list[ActorSlot]:
        """The actors reading the whole block, which no longer hold it (see `_timed_out`)."""
        holders = [slot for slot, _ in self.attempts]
        for slot in holders:
            self.session.pool._release(slot)
        self.attempts = []
        return holders

    def _timed_out(self, holders: list[ActorSlot], parts: Sequence[Any] = ()) -> Result:
        """Kills and replaces the actors `holders` that held the block past `worker_timeout`.

        Its result is `parts` (what a one-at-a-time read had), then a `WorkerError`.
        """
        pool = self.session.pool
        timeout = self.session.worker_timeout
        assert timeout is not None, "only a worker_timeout times a block out"
        for slot in holders:
            slot.killed = True  # its other blocks are only sent again
        at = self.first + len(parts)
        also = "".join(f" (and so was {slot.who}, a second copy)" for slot in holders[1:])
        message = (
            f"{holders[0].who} {timed_out(timeout)} while reading positions [{at}, {self.stop})"
            f"{self.session.of_leaf(self.leaf)}{also}. Nothing was lost: the next read starts "
            f"again at position {at}, on a new actor.{TIMEOUT_HINT}"
        )
        for slot in holders:
            pool._replace(slot)
        return list(parts), WorkerError(message), 0.0

    def _drop(self, index: int) -> None:
        slot, _ = self.attempts.pop(index)
        self.session.pool._release(slot)

    def cancel(self) -> bool:
        """Drops the block: its calls run on (see `ActorSlot`), and their answers are ignored."""
        pool = self.session.pool
        for slot, ref in self.attempts:
            pool._release(slot, abandoned=ref)
        self.attempts = []
        return True


def _deadline(timeout: float | None) -> float | None:
    """When a wait of `timeout` seconds from now ends (None: never)."""
    return None if timeout is None else time.perf_counter() + timeout


def _passed(deadline: float | None) -> bool:
    return deadline is not None and time.perf_counter() >= deadline


def _sooner(limit: float | None, deadline: float | None) -> float | None:
    """Seconds to wait: up to `limit`, and not past `deadline` (None: no bound)."""
    if deadline is None:
        return limit
    left = max(0.0, deadline - time.perf_counter())
    return left if limit is None else min(limit, left)


def _as_retry(decision: Retry | tuple[list[Any], str]) -> Retry:
    """A first death on a whole block always reads it again (actors are ready: see `_death`)."""
    assert isinstance(decision, Retry), decision
    return decision


def _death(slot: ActorSlot, error: Exception) -> Death:
    """How the actor of `slot` died, as `error` (a RayActorError) tells it.

    An actor loads the pipeline with its first block, so it counts as ready:
    a death while loading it blames the block's first position.
    """
    return Death(slot.index, slot.pid, f"died ({_cause(error)})", ready=True, kind="Ray actor")


def _cause(error: Exception) -> str:
    r"""Ray's reason for an actor's death, in a sentence or two.

    Examples:
        >>> text = "The actor died.\n\tpid: 12\nIt was killed by `ray.kill`. Some common causes..."
        >>> _cause(Exception(text))
        'It was killed by `ray.kill`.'
    """
    lines = str(error).splitlines()
    reasons = [line.strip() for line in lines[1:] if line.strip() and not line.startswith("\t")]
    reason = (reasons or lines or [type(error).__name__])[0]
    reason = reason.split(" Some common causes")[0]
    return reason if len(reason) <= 300 else reason[:297] + "..."

"""put_on_device: a stream's elements as jax arrays on a device, with the stream's own states.

Moving elements to a device changes where they live, not what they are, so
the stage is transparent: a state saved with it restores without it, and the
other way round (as `mp_prefetch` and `thread_prefetch` are).

`jax.device_put` returns at once and copies in the background, so the cursor
overlaps the copy with the consumer's work without a thread of its own: it
keeps the next `ahead` elements already handed to `jax.device_put` (in the
consumer's thread; the elements read ahead together go in one call, since
each call costs tens of microseconds of Python) and returns the oldest. While the
consumer's step runs on element k, elements k + 1 .. k + ahead are on their
way. It records the parent's state after each element it reads ahead, so the
state after element k is the parent's state right after element k, and a
restore reads the elements that were on their way again.

What the parent raises while being read ahead (an error, or the end) is kept
and raised at its place, once the elements before it have been returned.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
from typing import Any, NamedTuple

import numpy as np
import toolz

from grainfn._src.core import validate
from grainfn._src.core.reading import as_stream
from grainfn._src.core.spec_rule import SpecRule
from grainfn._src.core.stream import BaseCursor, Cursor, PassThroughStream, Stream


@dataclasses.dataclass(frozen=True, repr=False)
class PutOnDeviceStream(PassThroughStream):
    """`jax.device_put(element, device)` for each element of the parent, `ahead` in flight."""

    transparent = True  # the same elements, on a device; the same states
    spec_rule = SpecRule.PARENT

    device: Any
    ahead: int = 0

    def open(self, state: Any) -> Cursor:
        parent = self.parent.open(state)
        put = Putter(self.device)
        if self.ahead == 0:
            return _PutCursor(parent, put)
        return _PutAheadCursor(parent, state, put, self.ahead)

    def describe_stage(self) -> str:
        return f"put_on_device({self.device}, ahead={self.ahead})"


class _PutCursor(BaseCursor):
    """`ahead=0`: each element put as it is read, in the consumer's step."""

    def __init__(self, parent: Cursor, put: Putter) -> None:
        self.parent, self.put = parent, put

    def next(self) -> Any:
        return self.put.one(self.parent.next())

    def next_many(self, count: int) -> list[Any]:
        return self.put.many(self.parent.next_many(count))

    def state(self) -> Any:
        return self.parent.state()

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)


class _PutAheadCursor(BaseCursor):
    """Keeps `ahead` elements handed to `jax.device_put` beyond the one it returns.

    `ready` holds `(element on its way to the device, parent state after it)`,
    oldest first. `raised` is what the parent raised (or `put` raised for its
    element) at the place after the last element of `ready`, with the parent's
    state then; it is raised once `ready` is empty. The end stays the end;
    after an error, the next read goes to the parent again, as it would
    without this stage. Neither is kept for a `BaseException` that is not an
    `Exception` (Ctrl-C): that is raised at once, leaving the cursor broken
    (a `StreamIterator` opens a new one where it stood).
    """

    def __init__(self, parent: Cursor, state: Any, put: Putter, ahead: int) -> None:
        self.parent, self.put, self.ahead = parent, put, ahead
        self.last_state = state  # the parent's state after the last element returned
        self.ready: collections.deque[tuple[Any, Any]] = collections.deque()
        self.raised: tuple[Exception, Any] | None = None
        self.unput: collections.deque[tuple[Any, Any]] = collections.deque()
        self.later: tuple[Exception, Any] | None = None
        self.ended = False

    def _fill(self, count: int) -> None:
        """Reads the parent until `ready` holds `count` elements, or it raises.

        The elements read are put with one `jax.device_put` call: each call
        costs tens of microseconds before any copy. If that call fails, they
        are put one by one: the one that cannot go raises at its place, and
        those read after it wait in `unput` (with what the parent raised
        after them in `later`).
        """
        parent, unput = self.parent, self.unput
        read: list[tuple[Any, Any]] = []
        while len(self.ready) + len(read) < count and self.raised is None:
            if unput:
                read.append(unput.popleft())
                continue
            if self.later is not None:
                self.raised, self.later = self.later, None
                break
            try:
                element = parent.next()
            except Exception as error:  # StopIteration too: kept for its place
                self.raised = (error, parent.state() if isinstance(error, StopIteration) else None)
                break
            read.append((element, parent.state()))
        if not read:
            return
        try:
            elements = self.put.many([element for element, _ in read])
        except Exception:  # one of them cannot go: put them one by one to find which
            for place, (element, state) in enumerate(read):
                try:
                    self.ready.append((self.put.one(element), state))
                except Exception as error:
                    unput.extendleft(reversed(read[place + 1 :]))
                    if self.raised is not None:
                        self.later = self.raised
                    self.raised = (error, None)
                    return
            return
        self.ready.extend(zip(elements, [state for _, state in read]))

    def _raise(self) -> None:
        """Raises what the parent raised after the last element returned."""
        assert self.raised is not None
        if isinstance(self.raised[0], StopIteration):
            self.ended, self.last_state = True, self.raised[1]
            raise StopIteration
        raise self._take_raised()

    def _take_raised(self) -> BaseException:
        """What the parent raised, forgotten here: it is raised once, then the parent is read again.

        Raised as `raise self._take_raised()`, no local variable of the raising
        frame holds it: one would hold its traceback, which holds that frame,
        and the cycle would keep this cursor alive until the garbage collector runs.
        """
        assert self.raised is not None
        error, self.raised = self.raised[0], None
        return error

    def next(self) -> Any:
        if self.ended:
            raise StopIteration
        self._fill(self.ahead + 1)
        if not self.ready:
            self._raise()
        element, self.last_state = self.ready.popleft()
        return element

    def next_many(self, count: int) -> list[Any]:
        """Up to `count` elements, fewer only at the end.

        An error among the `count` is raised with no element returned and
        nothing changed: the elements before it stay ready, and are returned
        (then the error raised) by the reads that follow.
        """
        if self.ended or count <= 0:
            return []
        self._fill(count + self.ahead)
        ready = self.ready
        if len(ready) < count and self.raised is not None:
            error, end_state = self.raised
            if not isinstance(error, StopIteration):
                if not ready:
                    self._raise()
                raise error  # kept: it comes again after the elements before it
            taken = list(ready)  # the end among the `count`: all that is left
            ready.clear()
            self.ended, self.last_state = True, end_state
            return [element for element, _ in taken]
        taken = [ready.popleft() for _ in range(count)]
        self.last_state = taken[-1][1]
        return [element for element, _ in taken]

    def state(self) -> Any:
        return self.last_state

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)

    def close(self) -> None:
        self.ready.clear()
        super().close()


class Putter:
    """`jax.device_put` of elements to one place, without its Python where it can.

    `jax.device_put` spends about 60 microseconds of Python on each call
    (flattening, abstract values, shardings) before the copy, as long as a
    jitted step's own transfer of the same numpy arrays takes. Where the place
    is one addressable device, in its default memory, and every leaf is a
    numpy array of a dtype that is the same in 32- and 64-bit mode, this calls
    what `jax.device_put` calls in the end, for each leaf, with the same
    arguments, so the arrays are the same (values, abstract value, dtype,
    sharding, committed, and a 64-byte-aligned array aliased on a CPU device
    as `jax.device_put` aliases it). Every other element goes through
    `jax.device_put`, as does everything after the direct call fails once
    (jax's internals are not its API: another version may differ).
    """

    def __init__(self, device: Any) -> None:
        import jax

        self.device = device
        self.device_put = jax.device_put
        self.flatten, self.unflatten = jax.tree_util.tree_flatten, jax.tree_util.tree_unflatten
        self.direct: DirectPut | None = _direct_put(device)
        self.avals: dict[tuple[tuple[int, ...], np.dtype[Any]], Any] = {}

    def one(self, element: Any) -> Any:
        """`jax.device_put(element, device)`."""
        placed = self._direct(element)
        return self.device_put(element, self.device) if placed is None else placed

    def many(self, elements: list[Any]) -> list[Any]:
        """`[jax.device_put(e, device) for e in elements]`, in one call."""
        placed = self._direct(elements)
        if placed is not None:
            return list(placed)
        per_field = isinstance(self.device, (list, tuple, dict))  # a place per field of each
        where = [self.device] * len(elements) if per_field else self.device
        return list(self.device_put(elements, where))

    def _direct(self, tree: Any) -> Any | None:
        """`tree` put by the direct call, or None where it does not apply."""
        if self.direct is None:
            return None
        leaves, structure = self.flatten(tree)
        if not all(type(leaf) is np.ndarray and leaf.dtype in DIRECT_DTYPES for leaf in leaves):
            return None
        put, shaped, scope, sharding, devices = self.direct
        avals = self.avals
        if len(avals) > MAX_AVALS:  # ragged elements: a bounded memory of shapes
            avals.clear()
        try:
            with scope():
                placed = []
                for leaf in leaves:
                    key = (leaf.shape, leaf.dtype)
                    aval = avals.get(key)
                    if aval is None:
                        aval = avals[key] = shaped(leaf.shape, leaf.dtype)
                    placed.append(put(aval, sharding, [leaf], devices))
                return self.unflatten(structure, placed)
        except Exception:  # jax's internals differ from these: jax.device_put from now on
            self.direct = None
            return None


DIRECT_DTYPES = frozenset(
    map(np.dtype, ["bool", "int8", "uint8", "int16", "uint16", "int32", "uint32", "float16"])
) | {np.dtype("float32"), np.dtype("complex64")}
"""The dtypes `Putter` puts directly: their own canonical dtype in 32- and 64-bit mode alike."""

MAX_AVALS = 1024
"""The most leaf shapes a `Putter` keeps the abstract value of."""


class DirectPut(NamedTuple):
    """jax's own calls that `jax.device_put` of a numpy array to one device ends in."""

    put: Any  # (abstract value, sharding, [array], [device]) -> a jax array
    shaped: Any  # (shape, dtype) -> the abstract value
    scope: Any  # () -> the context of an explicit transfer, for jax's transfer guard
    sharding: Any
    devices: list[Any]


def _direct_put(device: Any) -> DirectPut | None:
    """What `jax.device_put` of a numpy array to `device` calls in the end, or None.

    None where `device` is not one addressable device in its default memory,
    or jax's internals are not as this version of grainfn knows them.
    """
    import jax

    if isinstance(device, jax.Device):
        device = jax.sharding.SingleDeviceSharding(device)
    if not isinstance(device, jax.sharding.SingleDeviceSharding) or not device.is_fully_addressable:
        return None
    only: Any  # jaxlib's Device has no stub for `default_memory`
    (only,) = device.device_set
    if device.memory_kind not in (None, only.default_memory().kind):
        return None  # another memory (pinned host): jax.device_put also marks the abstract value
    try:
        from jax._src.config import explicit_device_put_scope
        from jax._src.core import ShapedArray
        from jax._src.interpreters.pxla import batched_device_put
    except ImportError:
        return None
    return DirectPut(batched_device_put, ShapedArray, explicit_device_put_scope, device, [only])


def check_device(device: Any) -> Any:
    """`device` after checking that `jax.device_put` takes it as where to put an element.

    That is a `jax.Device`, a `jax.sharding.Sharding`, a `PartitionSpec` (under
    a mesh), a `Format`, a pytree of them matching the elements (one per
    field), or None (jax's default device).

    Examples:
        >>> import jax
        >>> check_device(jax.devices()[0]) is jax.devices()[0]
        True
        >>> check_device("gpu")
        Traceback (most recent call last):
        ...
        TypeError: put_on_device puts elements where jax.device_put takes them: ... got 'gpu' of
        type str. Pick one from jax.devices().
    """
    import jax

    kinds: tuple[type, ...] = (jax.Device, jax.sharding.Sharding, jax.sharding.PartitionSpec)
    with contextlib.suppress(ImportError):
        from jax.experimental.layout import Format

        kinds = (*kinds, Format)
    for leaf in jax.tree_util.tree_leaves(device):
        if not isinstance(leaf, kinds):
            where = "" if leaf is device else f" in {validate.short_repr(device)}"
            raise TypeError(
                "put_on_device puts elements where jax.device_put takes them: a jax Device, a "
                "Sharding (or a pytree of them, one per field of the elements), got "
                f"{validate.short_repr(leaf)} of type {type(leaf).__name__}{where}. Pick one "
                "from jax.devices()."
            )
    return device


def host_thread_buffer(device: Any, buffer_size: int) -> int:
    """The buffer of a host read-ahead thread that pays in front of a put on `device`.

    `buffer_size` where `device` lies off the host's CPU (an accelerator);
    0, no thread, where every element goes to a CPU device. There the reading,
    the copies (`jax.device_put` copies in jax's own threads) and the jitted
    step all run on the host's cores, and a reading thread only adds work and
    hand-offs of the GIL: on a 2-core host, an epoch of a jitted MLP step fed
    by `put_on_device` over `thread_prefetch(4)` took 1.1 to 1.3 times as long
    as by `put_on_device` alone.

    Args:
        device: Where the elements go, as `put_on_device` takes it.
        buffer_size: The read-ahead asked for.

    Returns:
        `buffer_size`, or 0 where `device` is the host's CPU.

    Examples:
        >>> import jax
        >>> cpu = jax.devices("cpu")[0]
        >>> on_cpu = jax.sharding.SingleDeviceSharding(cpu)
        >>> host_thread_buffer(cpu, 4), host_thread_buffer({"x": on_cpu, "y": cpu}, 4)
        (0, 0)
    """
    return 0 if platforms(device) == {"cpu"} else buffer_size


def platforms(device: Any) -> set[str]:
    """The platforms (`"cpu"`, `"gpu"`, `"tpu"`) of the devices in `device` (a checked one).

    A place without devices of its own (None, a `PartitionSpec`, a `Format`)
    counts as jax's default backend.
    """
    import jax

    found: set[str] = set()
    for leaf in jax.tree_util.tree_leaves(device) or [None]:
        if isinstance(leaf, jax.Device):
            leaf = jax.sharding.SingleDeviceSharding(leaf)
        if isinstance(leaf, jax.sharding.Sharding):
            devices: set[Any] = leaf.device_set  # jaxlib's Device has no stub for `platform`
            found.update(d.platform for d in devices)
        else:
            found.add(jax.default_backend())
    return found


MAX_AHEAD = 1024
"""The most elements `put_on_device` keeps on their way to the device."""


@toolz.curry
def put_on_device(device: Any, stream: Stream[Any], *, ahead: int = 1) -> Stream[Any]:
    """`stream` with each element put on `device`, the next `ahead` on their way meanwhile.

    Elements go through `jax.device_put(elements, device)` in the
    consumer's thread, those read ahead together in one call. That call
    returns before the copy is done, so with `ahead >= 1` the copies of the next `ahead` elements
    run while the consumer works on the one returned: transfer overlaps the
    step, without a thread. The elements and the states are the stream's
    own (a state saved with this stage restores without it, and the other way
    round); a restore reads again the elements that were on their way. An
    error of `stream`, or its end, met while reading ahead comes out at its
    place, after the elements before it.

    Args:
        device: Where the elements go, as `jax.device_put` takes it: a
            `jax.Device`, a `jax.sharding.Sharding`, or a pytree of them
            matching the elements.
        stream: The stream to put on `device` (a dataset is read in order).
        ahead: How many elements beyond the one returned are handed to
            `jax.device_put` ahead of time; 0 puts each element when it is
            asked for; at most `MAX_AHEAD`. Each one holds device memory
            until it is returned.

    Returns:
        A stream of the same elements, as jax arrays on `device`.

    Examples:
        >>> import jax
        >>> from grainfn import fn
        >>> ds = fn.batch(2, fn.range(5))
        >>> it = fn.iterate(put_on_device(jax.devices()[0], fn.from_dataset(ds), ahead=2))
        >>> batch = next(it)
        >>> type(batch).__name__, batch.tolist(), it.state
        ('ArrayImpl', [0, 1], DatasetPosition(position=1))
        >>> [b.tolist() for b in fn.iterate(fn.from_dataset(ds), it.state)]
        [[2, 3], [4]]
    """
    size = validate.check_nonnegative_int(ahead, "put_on_device's ahead")
    if size > MAX_AHEAD:
        raise ValueError(
            f"put_on_device's ahead is {size}: that many elements would be read, and held on "
            f"the device, before the first is returned. It must be at most {MAX_AHEAD}; a few "
            "(1 to 4) keep the device busy, since each put returns before its copy is done."
        )
    return PutOnDeviceStream(as_stream(stream, "put_on_device"), check_device(device), size)

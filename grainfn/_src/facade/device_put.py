"""Grain's experimental `device_put`: a dataset moved to a jax device, read ahead on both sides."""

from __future__ import annotations

from typing import Any, TypeVar

from grainfn import fn
from grainfn._src.core import validate
from grainfn._src.device.put import check_device, host_thread_buffer, put_on_device
from grainfn._src.facade.dataset import IterDataset, iter_core

T = TypeVar("T")


def device_put(
    ds: IterDataset[T], device: Any, *, cpu_buffer_size: int = 4, device_buffer_size: int = 2
) -> IterDataset[T]:
    """`ds` moved to `device` (as `jax.device_put` takes it), read ahead on both sides.

    Built on `grainfn.fn.put_on_device`: each element is handed to
    `jax.device_put` in the consumer's thread, `device_buffer_size` elements
    ahead of the one returned, so that their copies run while the consumer's
    step does. A host thread reads ahead only where it pays: for a device off
    the host's CPU. The states are `ds`'s own: a state saved here restores
    `ds` without `device_put`, and the other way round.

    Args:
        ds: The dataset to read.
        device: Where the elements go, as `jax.device_put` takes it: a
            `jax.Device`, a `Sharding`, or a pytree of them.
        cpu_buffer_size: Elements a background thread reads ahead on the host
            (`thread_prefetch`) for an accelerator; 0: no thread. For a CPU
            device no thread is started (see
            `grainfn._src.device.put.host_thread_buffer`): there it costs more
            than it gives, and the elements are read in the consumer's thread.
        device_buffer_size: Elements handed to `jax.device_put` ahead of the
            one returned (`put_on_device`'s `ahead`); 0 puts each when asked.

    Returns:
        `ds` with its elements as jax arrays on `device`.

    Examples:
        >>> import jax
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(3).to_iter_dataset()
        >>> it = iter(device_put(ds, jax.devices()[0]))
        >>> int(next(it))
        0
        >>> plain = iter(ds)
        >>> plain.set_state(it.get_state())  # the states are ds's own
        >>> list(plain), [int(x) for x in it]
        ([1, 2], [1, 2])
    """
    cpu = validate.check_nonnegative_int(cpu_buffer_size, "cpu_buffer_size")
    ahead = validate.check_nonnegative_int(device_buffer_size, "device_buffer_size")
    stream = iter_core(ds, "device_put")
    stream = fn.thread_prefetch(host_thread_buffer(check_device(device), cpu), stream)
    return ds._rewrap(put_on_device(device, stream, ahead=ahead))

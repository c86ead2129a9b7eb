"""One global `jax.Array` from the batches each JAX process reads.

With `ShardByJaxProcess`, process `p` reads shard `p`; stacking the shards'
batches along the first axis gives the global batch a data-parallel step takes.
JAX is imported only here, when a global array is made.
"""

from __future__ import annotations

from typing import Any

import numpy as np


def make_global_array(local_batch: Any, sharding: Any = None) -> Any:
    """Turns this process's batch (a pytree of arrays) into global `jax.Array`s.

    Every process calls it with its own batch, of the same structure and
    shapes; leaf `x` of shape `(b, ...)` becomes a global array of shape
    `(b * jax.process_count(), ...)` whose rows `[p * b, (p + 1) * b)` are
    process `p`'s batch (for the default sharding).

    Args:
        local_batch: This process's batch: an array or a pytree of arrays.
        sharding: A `jax.sharding.Sharding` of the global arrays; by default
            the first axis split over all devices of all processes
            (`NamedSharding(Mesh(jax.devices(), ("data",)), PartitionSpec("data"))`).

    Returns:
        The pytree of global `jax.Array`s (`jax.make_array_from_process_local_data`
        on every leaf).

    Examples:
        >>> import numpy as np
        >>> batch = make_global_array({"image": np.zeros((4, 2)), "label": np.arange(4)})
        >>> batch["image"].shape, batch["label"].tolist()
        ((4, 2), [0, 1, 2, 3])
    """
    import jax

    if sharding is None:
        mesh = jax.sharding.Mesh(np.asarray(jax.devices()), ("data",))
        sharding = jax.sharding.NamedSharding(mesh, jax.sharding.PartitionSpec("data"))

    def to_global(leaf: Any) -> Any:
        return jax.make_array_from_process_local_data(sharding, np.asarray(leaf))

    return jax.tree_util.tree_map(to_global, local_batch)

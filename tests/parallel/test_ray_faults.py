"""Faults of fn.ray_prefetch and RayPool, on a real local Ray cluster (2 nodes, 1 CPU each).

Two pools on the Ray one of them started: closing one never stops Ray under
the other, and the last one stops it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from typing import Any

import pytest

# JAX warns at every fork once its threads run; Ray starts its processes by fork and exec.
pytestmark = pytest.mark.filterwarnings("ignore:os.fork\\(\\) was called:RuntimeWarning")


TWO_POOLS = """
import gc
import ray
from grainfn import fn

options = {"num_cpus": 2, "include_dashboard": False, "log_to_driver": False}


def read(pool, n):
    stream = fn.ray_prefetch(pool, fn.from_dataset(fn.range(n)), adaptive=False)
    return list(fn.iterate(stream))


a, b, c = (fn.RayPool(1, num_cpus=0.5, init_options=options) for _ in range(3))
assert read(a, 5) == list(range(5))  # a starts Ray
assert read(b, 5) == list(range(5)) and read(c, 5) == list(range(5))
a.close()
assert ray.is_initialized(), "closing the pool that started Ray stopped it under the others"
assert read(b, 50) == list(range(50))
b.close()
assert ray.is_initialized(), "c still uses it"
del c
gc.collect()
assert not ray.is_initialized(), "the last pool that used grainfn's Ray is gone, Ray is not"

ray.init(**options)  # the user's own Ray: never shut down by grainfn
with fn.RayPool(1, num_cpus=0.5) as d:
    assert read(d, 5) == list(range(5))
assert ray.is_initialized(), "a pool shut down the user's Ray"
ray.shutdown()
print("ok")
"""


def test_ray_started_by_pools_stops_with_the_last_of_them_and_the_users_never(
    tmp_path: Any,
) -> None:
    script = tmp_path / "pools.py"  # its own process: this one may be connected to a cluster
    script.write_text(TWO_POOLS)
    env = {key: value for key, value in os.environ.items() if key != "RAY_ADDRESS"}
    result = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=300, env=env
    )
    assert result.returncode == 0, result.stderr[-3000:]
    assert result.stdout.strip().endswith("ok")

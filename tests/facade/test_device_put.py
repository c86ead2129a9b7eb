"""device_put against Grain 0.2.18.

`device_put` reads ahead on the host and on the device; its elements are
Grain's, as device arrays, and its states are the pipeline's.
"""

from __future__ import annotations

import grain
import jax
import numpy as np
import pytest

import grainfn

pytestmark = pytest.mark.grain


def test_device_put_gives_grains_elements_as_device_arrays() -> None:
    device = jax.devices()[0]
    outputs = []
    for module in (grain, grainfn):
        ds = module.MapDataset.range(8).seed(3).shuffle().map(lambda x: np.arange(3) * x)
        put = module.experimental.device_put(
            ds.to_iter_dataset(), device, cpu_buffer_size=2, device_buffer_size=1
        )
        elements = list(put)
        assert all(isinstance(e, jax.Array) and e.devices() == {device} for e in elements)
        outputs.append([np.asarray(e).tolist() for e in elements])
    assert outputs[1] == outputs[0]


def test_device_put_keeps_the_pipelines_states() -> None:
    ds = grainfn.MapDataset.range(10).to_iter_dataset().map(lambda x: x * 3)
    it = iter(grainfn.experimental.device_put(ds, jax.devices()[0]))
    [next(it) for _ in range(4)]
    state = it.get_state()
    rest = [int(x) for x in it]
    plain = iter(ds)
    plain.set_state(state)
    assert list(plain) == rest == [12, 15, 18, 21, 24, 27]

"""pick_performance_config against Grain 0.2.18.

`pick_performance_config` is Grain's rule (element sizes against a RAM
budget): the same pipelines must give the same worker count and read-ahead.
"""

from __future__ import annotations

from typing import Any

import grain
import numpy as np
import pytest

import grainfn

pytestmark = pytest.mark.grain


def arrays(module: Any, megabytes: float, count: int = 40) -> Any:
    values = int(megabytes * 1024 * 1024) // 8
    return module.MapDataset.range(count).map(lambda x: np.full(values, x, np.float64))


PIPELINES = {
    "ints": lambda m: m.MapDataset.range(100).to_iter_dataset(),
    "1 MB arrays": lambda m: arrays(m, 1.0).to_iter_dataset(),
    "batched 0.25 MB arrays": lambda m: arrays(m, 0.25).to_iter_dataset().batch(4),
    "dicts, filtered": lambda m: (
        m.MapDataset.range(60)
        .map(lambda x: {"a": np.zeros(3000), "b": [x, np.ones(10)]})
        .to_iter_dataset()
        .filter(lambda e: e["b"][0] % 2 == 0)
    ),
    "a mix of two reads": lambda m: m.IterDataset.mix(
        [arrays(m, 0.5).to_iter_dataset(), arrays(m, 2.0).to_iter_dataset()], [1, 1]
    ),
    "too short to measure": lambda m: m.MapDataset.range(3).to_iter_dataset(),
    # A MapDataset, as Grain's advanced tutorial passes one: workers from its elements.
    "a MapDataset of 1 MB arrays": lambda m: arrays(m, 1.0),
    "a batched MapDataset": lambda m: arrays(m, 0.25).batch(4),
    "a MapDataset too short to measure": lambda m: m.MapDataset.range(3),
}


@pytest.mark.parametrize("pipeline", PIPELINES)
@pytest.mark.parametrize(
    ("budget", "max_workers", "max_buffer"), [(16, 8, None), (3, None, 50), (1024, 4, 10)]
)
def test_the_same_config_as_grain(
    pipeline: str, budget: int, max_workers: int | None, max_buffer: int | None
) -> None:
    configs = []
    for module in (grain, grainfn):
        config = module.experimental.pick_performance_config(
            PIPELINES[pipeline](module),
            ram_budget_mb=budget,
            max_workers=max_workers,
            max_buffer_size=max_buffer,
        )
        configs.append(
            (
                config.multiprocessing_options.num_workers,
                config.read_options.prefetch_buffer_size,
            )
        )
    assert configs[1] == configs[0]


def test_a_budget_is_required() -> None:
    ds = grainfn.MapDataset.range(10).to_iter_dataset()
    with pytest.raises(TypeError, match="needs ram_budget_mb"):
        grainfn.experimental.pick_performance_config(
            ds, ram_budget_mb=None, max_workers=2, max_buffer_size=None
        )

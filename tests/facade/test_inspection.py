"""grainfn.describe, trace and the other inspection functions on Grain-API objects.

They take MapDatasets, IterDatasets, their iterators and DataLoaders, and show
what the core functions show for the pipeline behind them.
"""

from __future__ import annotations

from typing import Any

import grainfn as grain
from grainfn import fn


def keep(x: Any) -> bool:
    return True


def test_facade_objects_iterators_and_loaders() -> None:
    ds = grain.MapDataset.range(5).seed(1).shuffle()
    shown = (
        "shuffle(seed=1189033389)  [length 5; seed from seed(1)]\n"
        "└─ seed(1)  [length 5]\n"
        "   └─ range(0, 5, 1)  [length 5]"
    )
    assert grain.describe_text(ds) == shown
    assert grain.describe_text(ds.core) == shown
    reading = (
        "filter(keep)\n"
        "└─ from_dataset()\n"
        "   └─ shuffle(seed=1189033389)  [length 5; seed from seed(1)]\n"
        "      └─ seed(1)  [length 5]\n"
        "         └─ range(0, 5, 1)  [length 5]"
    )
    iter_ds = ds.to_iter_dataset().filter(keep)
    assert grain.describe_text(iter_ds) == reading
    assert grain.describe_text(iter(iter_ds)) == reading
    assert grain.describe_text(fn.iterate(iter_ds.core)) == reading
    assert fn.describe_text(fn.iterate(iter_ds.core)) == reading
    loader = grain.load(list(range(10)), num_epochs=1, batch_size=4)
    lines = grain.describe_text(loader).splitlines()
    assert lines[0] == "from_dataset()"
    assert lines[-1].endswith("└─ source(list, length 10)  [length 10]")
    assert grain.describe_text(iter(loader)) == grain.describe_text(loader)


def test_facade_map_dataset_is_traced_through_its_core() -> None:
    ds = grain.MapDataset.range(20).seed(5).shuffle().slice(slice(2, 12))
    for index in range(len(ds)):
        assert grain.trace(ds, index).source_index == ds[index]
    assert grain.trace(ds, 3) == fn.trace(ds.core, 3)

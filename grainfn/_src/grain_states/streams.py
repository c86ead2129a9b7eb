"""Grain's own states, read into grainfn's records and written from them, where exact.

A run that moves from Grain to grainfn keeps its data position: Grain's
`get_state()` of a pipeline (also inside an Orbax checkpoint Grain wrote) is
turned into the state record of the same grainfn pipeline (`from_grain`). A
run going back does the reverse (`to_grain`, behind
`DatasetIterator.grain_state()`): Grain's `set_state` of the same pipeline
continues from it. This walker reads the leaf itself, `to_iter_dataset()`
(`{"next_index": n}`, the position in the MapDataset, or in a DataLoader's
records: see `grainfn._src.grain_states.loaders`), and no stage by name: each
stage reads and writes its part of Grain's nested dict as it declares in its
own module, its class attribute `grain_state` (see
`grainfn._src.core.grain_state`):

- a stage whose state is its parent's (`PARENTS`): its parent's;
- a stage whose Grain state is counters over its parent's (`GrainKeys`): its
  counters under its keys, its parent's state under the parent key;
- a stage whose Grain state is not counters over one parent (`OwnGrainState`):
  as the reader and the writer it defines beside it (without a writer: read
  only).

`stages()` lists them by Grain's names, for messages and docs.

Written states equal Grain's at the same position, except where Grain names
it otherwise (both continue alike): just after an element's last `flat_map`
output, a window's last element or a rebatch's parent batch, Grain names the
one that ended, grainfn the next; after a repeat's last epoch Grain keeps the
parent at its end, grainfn at its start. A stage whose Grain state does not
determine grainfn's (or the reverse) is refused with a message naming it:
Grain's `mp_prefetch` state, for one, is read and written only where grainfn's
`mp_prefetch` yields Grain's worker order (see `grainfn._src.parallel.prefetch`).
"""

from __future__ import annotations

import importlib
import pkgutil
from typing import Any

from grainfn._src.core import state as records
from grainfn._src.core.grain_state import CannotWriteError, read_count
from grainfn._src.core.reading import FromDatasetStream
from grainfn._src.core.stream import Stream, stage_kinds
from grainfn._src.grain_states.loaders import dataset_position, reads_loader_records

_STAGE_PACKAGES = ("stages", "packing", "formats")
"""The packages of `grainfn._src` whose modules define stages."""

_LEAF = "to_iter_dataset"
"""Grain's name of the one stage this walker reads itself: a dataset read in order."""


def stages() -> list[str]:
    """Grain's names of grainfn's stages whose states are read and written, but pass-throughs.

    Those that declare their Grain state (`grain_state`) in their modules, and
    the leaf `to_iter_dataset`; "(read only)" after those that are not written.

    Examples:
        >>> "LimitIterDataset" in stages(), "to_iter_dataset" in stages()
        (True, True)
    """
    for package in _STAGE_PACKAGES:  # a stage's class exists once its module is imported
        root = importlib.import_module(f"grainfn._src.{package}")
        for module in pkgutil.walk_packages(root.__path__, f"{root.__name__}."):
            importlib.import_module(module.name)
    declarations = {kind.grain_state for kind in stage_kinds() if kind.grain_state is not None}
    names = {
        declared.stage if declared.writes else f"{declared.stage} (read only)"
        for declared in declarations
        if declared.stage is not None
    }
    return sorted(names | {_LEAF}, key=str.lower)


def _supported(done: str = "read") -> str:
    return (
        f"Grain states are {done} for {', '.join(stages())}, and every stage whose state is its "
        "parent's (map, filter, batch, seed, prefetch, options)"
    )


def from_grain(stream: Stream[Any], state: Any, path: str = "state") -> Any:
    """The record of `stream` at the position Grain's state `state` names.

    Raises:
        ValueError: naming the stage whose Grain state cannot be read, or the
            key that is missing.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(9).to_iter_dataset().map(str).batch(2)
        >>> from_grain(ds.core, {"next_index": 4})
        DatasetPosition(position=4)
    """
    if isinstance(stream, FromDatasetStream):
        taken = read_count(state, "next_index", path)
        return records.DatasetPosition(dataset_position(stream.dataset, taken))
    declared = stream.grain_state
    if declared is None:
        raise ValueError(
            f"A state written by Grain cannot be read for the stage {stream.describe_stage()!r}: "
            f"its Grain state does not determine grainfn's. {_supported()}; restart the data "
            "position for this pipeline."
        )
    return declared.read(stream, state, path, from_grain)


# ---------------------------------------------------------------------------
# Going back: grainfn's records written in Grain's format.


def to_grain(stream: Stream[Any], record: Any, path: str = "state") -> Any:
    """Grain's state of the same pipeline at the position `record` of `stream` names.

    The inverse of `from_grain`, for the stages above whose grainfn record
    determines Grain's state; Grain's `set_state` of the same pipeline
    continues from it with the elements grainfn would have yielded next.

    Raises:
        ValueError: naming the stage whose Grain state grainfn cannot write.

    Examples:
        >>> import grainfn as grain
        >>> ds = grain.MapDataset.range(9).to_iter_dataset().random_map(lambda x, r: x, seed=1)
        >>> grains = {"parent": {"next_index": 4}, "index_for_rng": 4}
        >>> to_grain(ds.core, from_grain(ds.core, grains))
        {'parent': {'next_index': 4}, 'index_for_rng': 4}
    """
    if isinstance(stream, FromDatasetStream):
        if reads_loader_records(stream.dataset):
            raise _unwritable(stream, "a DataLoader's records (write the DataLoader's state)")
        return {"next_index": record.position}
    declared = stream.grain_state
    try:
        if declared is None:
            raise CannotWriteError("its grainfn state does not determine Grain's")
        return declared.write(stream, record, path, to_grain)
    except CannotWriteError as why:  # this stage's (one beneath raises its own ValueError)
        raise _unwritable(stream, str(why)) from None


def _unwritable(stream: Stream[Any], why: str) -> ValueError:
    return ValueError(
        f"grainfn cannot write Grain's state for the stage {stream.describe_stage()!r}: {why}. "
        f"{_supported('written')}, except concat-then-split and "
        "mp_prefetch in grainfn's own order."
    )

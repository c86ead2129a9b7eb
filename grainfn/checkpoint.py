"""Checkpointing iterators with Orbax: Grain's `grain.checkpoint`, plus the state as a pytree.

- `CheckpointSave` / `CheckpointRestore`: args for `orbax.checkpoint.CheckpointManager`
  (alone, or in `ocp.args.Composite` beside a model), served by `CheckpointHandler`;
  one JSON file per JAX process, `process_<index>-of-<count>.json`.
- `state_tree` / `set_state_tree`: an iterator's state as
  `{"fingerprint": int64[], "state": int64[n]}`, to save inside a model's pytree
  (`ocp.args.StandardSave`); `stream_state_tree` / `stream_state_from_tree` are
  the same for a core stream's state record.

Importing this module imports Orbax and JAX; `import grainfn` does not.
See docs/checkpointing.md.

>>> import grainfn as grain
>>> import grainfn.checkpoint
>>> it = iter(grain.MapDataset.range(6).to_iter_dataset())
>>> _ = next(it)
>>> grainfn.checkpoint.state_tree(it)["state"]
array([1])
"""

from grainfn._src.checkpoint.files import state_file_name
from grainfn._src.checkpoint.handler import CheckpointHandler, CheckpointRestore, CheckpointSave
from grainfn._src.checkpoint.tree import (
    set_state_tree,
    state_tree,
    stream_state_from_tree,
    stream_state_tree,
)

__all__ = [
    "CheckpointHandler",
    "CheckpointRestore",
    "CheckpointSave",
    "set_state_tree",
    "state_file_name",
    "state_tree",
    "stream_state_from_tree",
    "stream_state_tree",
]

"""Grain's internal `grain._src.python.checkpoint.handler`, for code that finds it by that path.

Orbax records this path in a checkpoint that Grain wrote
(`"item_handlers": {"input_iter": "grain._src.python.checkpoint.handler.CheckpointHandler"}`
in `_CHECKPOINT_METADATA`), and code that restores such checkpoints names it.
`CheckpointHandler`, `CheckpointSave` and `CheckpointRestore` are grainfn's own,
from `grainfn._src.checkpoint.handler` (`grainfn.checkpoint`). Importing this
module imports Orbax.
"""

from grainfn._src.checkpoint.handler import CheckpointHandler, CheckpointRestore, CheckpointSave

__all__ = ["CheckpointHandler", "CheckpointRestore", "CheckpointSave"]

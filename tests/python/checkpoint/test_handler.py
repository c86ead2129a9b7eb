"""Tests for grainfn._src.python.checkpoint.handler.

The path Orbax records for Grain's checkpoint handler.
"""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.grain


def test_checkpoint_handler_path_holds_grainfns_handler() -> None:
    import grain.checkpoint

    import grainfn.checkpoint
    from grainfn._src.python.checkpoint import handler

    # The path Orbax records for Grain's handler in a checkpoint's metadata.
    recorded = f"{grain.checkpoint.CheckpointHandler.__module__}.CheckpointHandler"
    assert recorded == "grain._src.python.checkpoint.handler.CheckpointHandler"
    assert (handler.CheckpointHandler, handler.CheckpointSave, handler.CheckpointRestore) == (
        grainfn.checkpoint.CheckpointHandler,
        grainfn.checkpoint.CheckpointSave,
        grainfn.checkpoint.CheckpointRestore,
    )

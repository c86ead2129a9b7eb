"""Checkpointing iterators: state files, the Orbax handler, the pytree form, background saves.

Nothing here is imported by `grainfn/__init__.py` except `background` and
`files` (through `DatasetIterator.save`/`load`), which import jax only when a
file is written or read; `handler` imports Orbax and is reached through
`grainfn.checkpoint`.
"""

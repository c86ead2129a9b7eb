"""Checkpointing iterators: state files, the Orbax handler, the pytree form, background saves.

Nothing here is imported by `import grainfn`: `background` and `files` (with
asyncio) are imported when an iterator is saved or loaded (`DatasetIterator.save`
/`load`), and import jax only when a file is written or read; `handler` imports
Orbax and is reached through `grainfn.checkpoint`.
"""

"""Grain's internal `index_shuffle_module` (`grain._src.python.experimental.index_shuffle.python`).

Code imports `index_shuffle` from this path to shuffle indices as Grain does, and falls
back to another shuffle (another order) when the import fails. `index_shuffle`
is grainfn's own, `grainfn.experimental.index_shuffle` (from
`grainfn._src.facade.index_shuffle`): the same permutation as Grain's.
"""

from grainfn._src.facade.index_shuffle import index_shuffle

__all__ = ["index_shuffle"]

"""Grain's internal `grain._src.python.options`, for code that imports options by that path.

A MaxText fork imports the module to build `MultiprocessingOptions`. Both names
are grainfn's own classes of `grainfn._src.facade.options` (`grainfn.ReadOptions`,
`grainfn.MultiprocessingOptions`).
"""

from grainfn._src.facade.options import MultiprocessingOptions, ReadOptions

__all__ = ["MultiprocessingOptions", "ReadOptions"]

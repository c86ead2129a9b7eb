"""Grain's internal `grain._src.python.samplers`, for code that imports samplers by that path.

`IndexSampler`, `Sampler` and `SequentialSampler` are grainfn's own, from
`grainfn._src.loader.samplers` (`grainfn.samplers`).
"""

from grainfn._src.loader.samplers import IndexSampler, Sampler, SequentialSampler

__all__ = ["IndexSampler", "Sampler", "SequentialSampler"]

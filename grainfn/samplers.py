"""Samplers: which record a DataLoader reads at each step."""

from grainfn._src.loader.samplers import IndexSampler, Sampler, SequentialSampler

__all__ = ["IndexSampler", "Sampler", "SequentialSampler"]

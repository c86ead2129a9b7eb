"""Sharding: which part of the data each process (host) reads, and global batches."""

from grainfn._src.loader.global_array import make_global_array
from grainfn._src.loader.sharding import NoSharding, ShardByJaxProcess, ShardOptions, even_split

__all__ = ["NoSharding", "ShardByJaxProcess", "ShardOptions", "even_split", "make_global_array"]

"""grainfn: deterministic, fast, checkpointable input pipelines.

A functional core (`grainfn.fn`): datasets are immutable `(length, index ->
element)` records built by pure, curried combinators.
"""

from grainfn import fn
from grainfn._src.dataset import Dataset

__all__ = ["Dataset", "fn"]
__version__ = "0.1.0"

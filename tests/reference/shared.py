"""What the reference-example tests share: Grain's documentation examples, run with grainfn.

The tests of this folder run the code examples of the Grain documentation
pages in /work/shared/reference/, one test module per page:

- grain-api-overview.md ("overview"): test_grain_api_overview.py;
- grain-dataset-api-reference.txt ("API reference"), its "Example usage"
  snippets: test_grain_dataset_api_reference.py;
- grain-dataset-tutorial.md ("tutorial"), which imports `grain.python as
  grain`: test_grain_dataset_tutorial.py;
- grain-quick-reference-jax.md ("quick reference"):
  test_grain_quick_reference_jax.py;
- the DataLoader, IndexSampler, `grain.load`, sharding, ArrayRecord and Orbax
  examples of those pages: test_loader_examples.py.

Each test is named after the doc section it comes from and runs its example as
written, with `import grainfn as grain` (`import grainfn.python as grain` for
the tutorial). Names an example leaves undefined (`my_source`, `preprocess`,
`images`, `train_step`, `tokenizer`, `max_steps`, `process`, ...) are small
stand-ins defined next to it. Where the docs show an exact output, the test
asserts it. Where the output is random ("e.g.", "deterministic") or not shown,
the test asserts a property of it and that grainfn gives exactly what Grain
0.2.18 gives for the same code; those tests import `grain` as the oracle and
are marked `grain`. Where the docs show an output Grain 0.2.18 itself does not
give, the test asserts what Grain 0.2.18 does and says so in a comment.

Examples that need a random seed or a pipeline are written once, as a function
of the `grain` module, and run with grainfn and with Grain.

Examples not run:

- tutorial "Installs PyGrain": `!pip install grain`, a shell command.
- quick reference: the Flax NNX and optax parts of the training loop (neither
  is a dependency); the loop itself runs with a plain-JAX step.
- grain-dataloader-video-notes.md has no code.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np


def assert_same(ours: Any, theirs: Any) -> None:
    """grainfn's value is Grain's: the same types, dtypes, shapes and values, recursively."""
    if isinstance(theirs, np.ndarray):
        assert isinstance(ours, np.ndarray), f"{ours!r} is not an array like {theirs!r}"
        assert ours.dtype == theirs.dtype, f"dtype {ours.dtype} != {theirs.dtype}"
        np.testing.assert_array_equal(ours, theirs)
    elif isinstance(theirs, dict):
        assert isinstance(ours, dict), f"{ours!r} is not a dict like {theirs!r}"
        assert list(ours) == list(theirs)
        for key in theirs:
            assert_same(ours[key], theirs[key])
    elif isinstance(theirs, (list, tuple)):
        assert type(ours) is type(theirs), f"{ours!r} is not a {type(theirs).__name__}"
        assert len(ours) == len(theirs), f"{ours!r} != {theirs!r}"
        for mine, reference in zip(ours, theirs):
            assert_same(mine, reference)
    else:
        assert type(ours) is type(theirs), f"{ours!r} is not a {type(theirs).__name__}"
        assert ours == theirs, f"{ours!r} != {theirs!r}"


def as_lists(batches: Sequence[np.ndarray]) -> list[list[Any]]:
    return [batch.tolist() for batch in batches]


def quick_reference_ops(grain: Any) -> list[Any]:
    """The quick reference's custom transforms and its `ops` list, with `grain`'s classes."""

    class Normalize(grain.MapTransform):
        def map(self, data):
            data["image"] = data["image"].astype(np.float32) / 255.0
            return data

    class RandomFlip(grain.RandomMapTransform):
        def random_map(self, data, rng):
            if rng.random() > 0.5:
                data["image"] = np.fliplr(data["image"])
            return data

    ops = [Normalize(), RandomFlip(), grain.Batch(batch_size=128)]
    return ops

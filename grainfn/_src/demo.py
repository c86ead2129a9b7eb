"""The built-in demo: a real pipeline on synthetic data, resumed from a saved position.

`python -m grainfn demo` runs it. It mixes two synthetic image sources, shuffles,
augments with `random_map`, batches, reads one epoch with a progress bar, saves
the iteration state to a JSON file midway, then restores it into a rebuilt
pipeline and checks that the resumed run yields exactly the same batches.
"""

from __future__ import annotations

import dataclasses
import json
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from grainfn import fn
from grainfn._src.dataset import Dataset


@dataclasses.dataclass(frozen=True)
class SyntheticImages:
    """A random-access source of small synthetic images with labels.

    Item `i` is a pure function of `(seed, i)`, so the source needs no files.

    Examples:
        >>> images = SyntheticImages(size=10, seed=0)
        >>> item = images[3]
        >>> item["image"].shape, item["image"].dtype, 0 <= item["label"] < 10
        ((16, 16, 3), dtype('uint8'), True)
    """

    size: int
    seed: int
    shape: tuple[int, ...] = (16, 16, 3)
    num_classes: int = 10

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        rng = np.random.default_rng((self.seed, index))
        image = rng.integers(0, 256, size=self.shape, dtype=np.uint8)
        return {"image": image, "label": int(rng.integers(self.num_classes))}


def augment(item: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """Random horizontal flip and brightness jitter, normalised to float32."""
    image = item["image"]
    if rng.random() < 0.5:
        image = image[:, ::-1]
    scale = np.float32(rng.uniform(0.8, 1.2))
    return {"image": image.astype(np.float32) * (scale / 255.0), "label": item["label"]}


def pipeline(size: int, batch_size: int, seed: int) -> Dataset[Any]:
    """The demo pipeline: mix two sources 3:1, shuffle, augment, batch."""
    cats: Dataset[Any] = fn.source(SyntheticImages(size=size, seed=1))
    dogs: Dataset[Any] = fn.source(SyntheticImages(size=size // 3, seed=2))
    mixed = fn.mix([fn.shuffle(fn.seed(seed, cats)), fn.shuffle(fn.seed(seed + 1, dogs))], [3, 1])
    return fn.batch(batch_size, fn.random_map(augment, fn.seed(seed, mixed)), drop_remainder=True)


def run(size: int = 20_000, batch_size: int = 64, seed: int = 0, progress: bool = True) -> bool:
    """Runs the demo and returns whether the resumed run matched; prints a summary."""
    from tqdm import tqdm

    stream = fn.from_dataset(pipeline(size, batch_size, seed))
    total = stream.dataset.length
    print(f"Pipeline:\n{stream!r}\n")
    resume_at = total // 2
    state_file = Path(tempfile.mkdtemp(prefix="grainfn-demo-")) / "state.json"
    digests: list[str] = []
    started = time.perf_counter()
    iterator = fn.iterate(stream)
    for batch in tqdm(iterator, total=total, unit="batch", disable=not progress):
        digests.append(_digest(batch))
        if len(digests) == resume_at:
            state_file.write_text(json.dumps(fn.state_to_dict(stream, iterator.state)))
    elapsed = time.perf_counter() - started
    examples = total * batch_size
    print(
        f"Read {total} batches ({examples} examples) in {elapsed:.2f} s: "
        f"{examples / elapsed:,.0f} examples/s."
    )

    restarted = fn.from_dataset(pipeline(size, batch_size, seed))
    saved = fn.state_from_dict(restarted, json.loads(state_file.read_text()))
    resumed = [_digest(b) for b in fn.iterate(restarted, saved)]
    same = resumed == digests[resume_at:]
    verdict = "identical to" if same else "DIFFERENT from"
    print(
        f"Resumed a rebuilt pipeline from {state_file} ({saved}): {len(resumed)} batches, "
        f"{verdict} the uninterrupted run."
    )
    return same


def _digest(batch: Any) -> str:
    import hashlib

    h = hashlib.sha256()
    for key in sorted(batch):
        h.update(np.ascontiguousarray(batch[key]).tobytes())
    return h.hexdigest()

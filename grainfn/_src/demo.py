"""The built-in demo: a real pipeline on synthetic data, resumed from a saved position.

`python -m grainfn demo` runs it. It writes two synthetic image sets to
ArrayRecord shard files, then reads them back: it mixes the two sources,
shuffles, decodes and augments with `random_map`, batches, reads one epoch with
a progress bar, saves the iteration state to a JSON file midway, then restores
it into a rebuilt pipeline and checks that the resumed run yields exactly the
same batches.
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
from grainfn._src.array_record.codec import decode_array
from grainfn._src.array_record.source import ArrayRecordDataSource
from grainfn._src.array_record.writer import write_array_records
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


RECORD = np.dtype([("image", np.uint8, (16, 16, 3)), ("label", np.int64)])
"""One stored example: the image and its label, as a 0-d structured array."""


def write_images(images: SyntheticImages, path: Path, num_shards: int) -> list[str]:
    """Writes the images to ArrayRecord shards, one `.npy` record of `RECORD` each."""

    def records() -> Any:
        for index in range(len(images)):
            item = images[index]
            record = np.zeros((), RECORD)
            record["image"], record["label"] = item["image"], item["label"]
            yield record

    return write_array_records(list(records()), path, num_shards=num_shards)


def decode(record: bytes) -> dict[str, Any]:
    """The image and label of a stored record.

    Examples:
        >>> from grainfn.sources import encode_array
        >>> stored = np.zeros((), RECORD)
        >>> stored["label"] = 7
        >>> decode(encode_array(stored))["label"]
        7
    """
    example = decode_array(record)
    return {"image": example["image"], "label": int(example["label"])}


def augment(item: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """Random horizontal flip and brightness jitter, normalised to float32."""
    image = item["image"]
    if rng.random() < 0.5:
        image = image[:, ::-1]
    scale = np.float32(rng.uniform(0.8, 1.2))
    return {"image": image.astype(np.float32) * (scale / 255.0), "label": item["label"]}


def pipeline(files: dict[str, list[str]], batch_size: int, seed: int) -> Dataset[Any]:
    """The demo pipeline: decode two sets of files, mix them 3:1, shuffle, augment, batch."""
    cats: Dataset[Any] = fn.map(decode, fn.source(ArrayRecordDataSource(files["cats"])))
    dogs: Dataset[Any] = fn.map(decode, fn.source(ArrayRecordDataSource(files["dogs"])))
    mixed = fn.mix([fn.shuffle(fn.seed(seed, cats)), fn.shuffle(fn.seed(seed + 1, dogs))], [3, 1])
    return fn.batch(batch_size, fn.random_map(augment, fn.seed(seed, mixed)), drop_remainder=True)


def run(size: int = 20_000, batch_size: int = 64, seed: int = 0, progress: bool = True) -> bool:
    """Runs the demo and returns whether the resumed run matched; prints a summary.

    The files it writes live in a temporary directory, removed at the end.
    """
    with tempfile.TemporaryDirectory(prefix="grainfn-demo-") as folder:
        return _run_in(Path(folder), size, batch_size, seed, progress)


def _run_in(folder: Path, size: int, batch_size: int, seed: int, progress: bool) -> bool:
    from tqdm import tqdm

    started = time.perf_counter()
    files = {
        "cats": write_images(SyntheticImages(size=size, seed=1), folder / "cats", num_shards=4),
        "dogs": write_images(SyntheticImages(size=size // 3, seed=2), folder / "dogs", 2),
    }
    written = time.perf_counter() - started
    print(f"Wrote {size + size // 3} examples to 6 ArrayRecord files in {written:.2f} s.")
    stream = fn.from_dataset(pipeline(files, batch_size, seed))
    total = stream.dataset.length
    print(f"Pipeline:\n{stream!r}\n")
    resume_at = total // 2
    state_file = folder / "state.json"
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

    restarted = fn.from_dataset(pipeline(files, batch_size, seed))
    saved = fn.state_from_dict(restarted, json.loads(state_file.read_text()))
    resumed = [_digest(b) for b in fn.iterate(restarted, saved)]
    same = resumed == digests[resume_at:]
    verdict = "identical to" if same else "DIFFERENT from"
    print(
        f"Resumed a rebuilt pipeline from the state saved as JSON midway ({saved}): "
        f"{len(resumed)} batches, {verdict} the uninterrupted run."
    )
    return same


def _digest(batch: Any) -> str:
    import hashlib

    h = hashlib.sha256()
    for key in sorted(batch):
        h.update(np.ascontiguousarray(batch[key]).tobytes())
    return h.hexdigest()

"""The demo's data: synthetic labelled images in ArrayRecord files, and the input pipeline.

The pipeline is what a JAX user writes with the Grain-style API
(`import grainfn as grain`): two ArrayRecord sources, each decoded and
shuffled, mixed 3:1, repeated, augmented with `random_map`, batched, and read
by worker processes with `mp_prefetch`.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import numpy as np

import grainfn as grain
from grainfn.sources import decode_array, write_array_records

SHAPE = (16, 16, 3)
"""The shape of every image: height, width, channels."""

NUM_CLASSES = 10

RECORD_DTYPE = np.dtype([("image", np.uint8, SHAPE), ("label", np.int64)])
"""One stored example: the image and its label, as a 0-d structured array."""


@dataclasses.dataclass(frozen=True)
class SyntheticImages:
    """A random-access source of small synthetic images with labels.

    Item `i` is a pure function of `(seed, i)`, so the source needs no files.
    Each image is noise with a bright 4x4 patch whose place and colour
    channel depend on the label, so that a small model can learn the labels.

    Examples:
        >>> images = SyntheticImages(size=10, seed=0)
        >>> item = images[3]
        >>> item["image"].shape, item["image"].dtype, 0 <= item["label"] < 10
        ((16, 16, 3), dtype('uint8'), True)
        >>> np.array_equal(images[3]["image"], item["image"])
        True
    """

    size: int
    seed: int

    def __len__(self) -> int:
        return self.size

    def __getitem__(self, index: int) -> dict[str, Any]:
        if not 0 <= index < self.size:
            raise IndexError(f"index {index} is out of range for {self.size} images.")
        rng = np.random.default_rng((self.seed, index))
        label = int(rng.integers(NUM_CLASSES))
        image = rng.integers(0, 160, size=SHAPE, dtype=np.uint8)
        row, column = 4 * (label // 4), 4 * (label % 4)
        image[row : row + 4, column : column + 4, label % 3] += 95
        return {"image": image, "label": label}


def write_images(images: SyntheticImages, path: Path, num_shards: int) -> list[str]:
    """Writes the images to ArrayRecord shards, one `.npy` record of `RECORD_DTYPE` each.

    Returns:
        The paths of the shard files, in order.
    """
    records = np.zeros(len(images), RECORD_DTYPE)
    for index in range(len(images)):
        item = images[index]
        records["image"][index], records["label"][index] = item["image"], item["label"]
    return write_array_records(list(records), path, num_shards=num_shards)


def decode(record: bytes) -> dict[str, Any]:
    """The image and label of a stored record.

    Examples:
        >>> from grainfn.sources import encode_array
        >>> stored = np.zeros((), RECORD_DTYPE)
        >>> stored["label"] = 7
        >>> decode(encode_array(stored))["label"]
        7
    """
    example = decode_array(record)
    return {"image": example["image"], "label": int(example["label"])}


def augment(item: dict[str, Any], rng: np.random.Generator) -> dict[str, Any]:
    """Random horizontal flip and brightness jitter, normalised to float32.

    Examples:
        >>> item = {"image": np.full((2, 2, 3), 255, np.uint8), "label": 1}
        >>> out = augment(item, np.random.default_rng(0))
        >>> out["image"].dtype, bool(0.8 <= out["image"].max() <= 1.2), out["label"]
        (dtype('float32'), True, 1)
    """
    image = item["image"]
    if rng.random() < 0.5:
        image = image[:, ::-1]
    scale = np.float32(rng.uniform(0.8, 1.2))
    return {"image": image.astype(np.float32) * (scale / 255.0), "label": item["label"]}


def write_sources(folder: Path, size: int) -> dict[str, list[str]]:
    """Writes the demo's two sources: `size` "cats" in 4 shards, `size // 3` "dogs" in 2."""
    if size < 3:
        raise ValueError(f"size must be at least 3 (the smaller source has size // 3), got {size}.")
    return {
        "cats": write_images(SyntheticImages(size=size, seed=1), folder / "cats", num_shards=4),
        "dogs": write_images(SyntheticImages(size=size // 3, seed=2), folder / "dogs", 2),
    }


def pipeline(
    files: Mapping[str, Sequence[str]], batch_size: int, seed: int, workers: int
) -> grain.IterDataset[Any]:
    """The demo pipeline: decode, shuffle and mix two sources 3:1, repeat, augment, batch.

    Everything up to the batch is map-level, so it runs in the `workers`
    worker processes (none for 0), always there (`adaptive=False`); the
    batches are the same for any number.

    Examples:
        >>> import tempfile
        >>> folder = Path(tempfile.mkdtemp())
        >>> files = write_sources(folder, size=30)
        >>> batches = iter(pipeline(files, batch_size=4, seed=0, workers=0))
        >>> batch = next(batches)
        >>> batch["image"].shape, batch["image"].dtype, batch["label"].shape
        ((4, 16, 16, 3), dtype('float32'), (4,))
        >>> import shutil; shutil.rmtree(folder)
    """

    def source(name: str, seed: int) -> grain.MapDataset[Any]:
        records = grain.ArrayRecordDataSource(list(files[name]))
        return grain.MapDataset.source(records).map(decode).seed(seed).shuffle()

    mixed = grain.MapDataset.mix([source("cats", seed), source("dogs", seed + 1)], [3, 1])
    ds = mixed.repeat().seed(seed).random_map(augment).batch(batch_size, drop_remainder=True)
    stream = ds.to_iter_dataset()
    if workers:
        # Pinned: the demo shows worker processes reading, and a preemption killing them,
        # from the first batch (grainfn would read a run this short in the trainer itself).
        options = grain.MultiprocessingOptions(num_workers=workers, adaptive=False)
        stream = stream.mp_prefetch(options)
    return stream


def epoch_batches(size: int, batch_size: int) -> int:
    """The number of whole batches in one epoch of the mix (it ends where "cats" run out).

    Examples:
        >>> epoch_batches(20_000, 64)
        416
    """
    sources = [grain.MapDataset.range(size), grain.MapDataset.range(size // 3)]
    return len(grain.MapDataset.mix(sources, [3, 1])) // batch_size


def digest(batch: Mapping[str, Any]) -> str:
    """A short fingerprint of a batch's contents: the same arrays give the same digest.

    Examples:
        >>> batch = {"image": np.zeros((2, 3)), "label": np.arange(2)}
        >>> digest(batch) == digest({"label": np.arange(2), "image": np.zeros((2, 3))})
        True
        >>> digest(batch) == digest({"image": np.ones((2, 3)), "label": np.arange(2)})
        False
    """
    h = hashlib.sha256()
    for key in sorted(batch):
        value = np.ascontiguousarray(batch[key])
        h.update(f"{key}:{value.dtype}:{value.shape}".encode())
        h.update(value.tobytes())
    return h.hexdigest()[:16]

"""Grain's legacy `PackAndBatchOperation`: records packed first-fit into batches of rows.

Called on an iterator of records it yields Grain's records; a DataLoader
runs it as the core stage `grainfn._src.packing.pack_and_batch` on its
stream of records, so the batches do not depend on the number of workers
and a state restores exactly. Each batch record carries the metadata of the
last record packed into it, without its record key, as in Grain.

A DataLoader needs this class to know its operations, but `import grainfn`
must not import packing (see `grainfn._src.lazy`): the packing core is
imported where it is first used, when an operation is made.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from grainfn._src.core.stream import Stream
from grainfn._src.loader.records import Record, record_data
from grainfn._src.stages.iterable import IterableStream

if TYPE_CHECKING:
    from grainfn._src.packing.pack_and_batch import PackAndBatchSpec, PackAndBatchStream


def packed_record(last: Record[Any], batch: Any) -> Record[Any]:
    """The record of a packed batch: `batch` with the metadata of `last`, its key removed."""
    return Record(last.metadata.remove_record_key(), batch)


@dataclasses.dataclass(frozen=True)
class PackAndBatchOperation:
    """Legacy: packs records first-fit into batches of rows; prefer FirstFitPackIterDataset.

    Each record's data is a tree of arrays with the structure of
    `length_struct`, every array of shape `(n, ...)` with `n` at most its leaf
    of `length_struct`. Records are read in order, each into the first of the
    `batch_size` rows where all its arrays fit (and which holds fewer than
    `max_sequences_per_bin` records); when one fits no row, the batch comes
    out and that record starts the next. The last batch comes out at the end.

    A batch is a record whose data is `(data, segmentations, positions)`, three
    trees of `length_struct`'s structure (dicts with sorted keys): `data` leaves
    have shape `(batch_size, T, ...)` and the dtype of the batch's first record,
    padded with zeros; `segmentations` (1, 2, ... for the records of a row, 0 on
    padding) and `positions` (0, 1, ... within each record) are int32 of shape
    `(batch_size, T)`. Rows no record went into are zeros. Its metadata is the
    last packed record's, without the record key.

    Args:
        length_struct: The data's structure (a dict, list, tuple or namedtuple
            nesting, or one array) with each leaf the row length `T` of its array.
        batch_size: The rows of a batch.
        max_sequences_per_bin: The most records one row takes; None: no limit.

    Raises:
        TypeError, ValueError: for bad arguments; while reading, for data of
            another structure or with an array longer than its row.

    Examples:
        >>> import numpy as np
        >>> from grainfn._src.loader.records import RecordMetadata
        >>> records = [
        ...     Record(RecordMetadata(i, record_key=i), {"x": np.arange(1, n + 1)})
        ...     for i, n in enumerate((3, 2, 4, 2))
        ... ]
        >>> for batch in PackAndBatchOperation({"x": 5}, batch_size=2)(iter(records)):
        ...     data, segmentations, positions = batch.data
        ...     print(batch.metadata.index, data["x"].tolist(), segmentations["x"].tolist())
        2 [[1, 2, 3, 1, 2], [1, 2, 3, 4, 0]] [[1, 1, 1, 2, 2], [1, 1, 1, 1, 0]]
        3 [[1, 2, 0, 0, 0], [0, 0, 0, 0, 0]] [[1, 1, 0, 0, 0], [0, 0, 0, 0, 0]]
    """

    length_struct: Any
    batch_size: int
    max_sequences_per_bin: int | None = None

    def __post_init__(self) -> None:
        _ = self.spec  # checks the arguments now

    @functools.cached_property
    def spec(self) -> PackAndBatchSpec:
        """The checked arguments."""
        from grainfn._src.packing.pack_and_batch import pack_and_batch_spec  # on first use

        return pack_and_batch_spec(self.length_struct, self.batch_size, self.max_sequences_per_bin)

    def stream(self, records: Stream[Record[Any]]) -> PackAndBatchStream:
        """The core stage over a stream of records, as a DataLoader runs it."""
        from grainfn._src.packing.pack_and_batch import PackAndBatchStream  # on first use

        return PackAndBatchStream(records, self.spec, record_data, packed_record)

    def __call__(self, input_iterator: Iterator[Record[Any]]) -> Iterator[Record[Any]]:
        """The batch records of the records of `input_iterator` (nothing if it is empty)."""
        stage = self.stream(IterableStream(input_iterator))  # one pass: opened once
        cursor = stage.open(stage.init())
        while True:
            try:
                yield cursor.next()
            except StopIteration:
                return

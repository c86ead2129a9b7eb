"""TFRecord files as streams of records, with the byte offset of the next record as state.

A TFRecord file is a sequence of records, each framed as

    uint64 length (little endian) | uint32 masked crc32c of the length bytes
    | data (length bytes) | uint32 masked crc32c of the data

where the mask is TensorFlow's: the CRC rotated right by 15 bits, plus
0xA282EAD8 (modulo 2**32). The stream yields each record's data as `bytes`,
the elements of Grain's `TFRecordIterDataset`. Its state is the offset of the
next record, so a restored iterator seeks there and reads on: it never reads
the file from its start again.

Grain 0.2.18 checks no checksum. Here the length's checksum is always checked
(8 bytes a record: cheap), so a damaged header or an offset that is not at a
record's start is reported instead of read as a bogus length; the data's
checksum is checked on request (`verify_data_crc=True`, over 100 MB/s with
numpy). A truncated or corrupt record is a ValueError naming the file and the
byte offset of the record.

Only a regular file is read or replaced: a FIFO, a device or a directory at
the path is refused with an error naming it and what it is (a ValueError; an
IsADirectoryError for a directory to be written over), after one `os.stat`
and before any open that could block on it.
"""

from __future__ import annotations

import dataclasses
import functools
import os
import struct
import weakref
from collections.abc import Iterable
from typing import Any, NamedTuple

import numpy as np

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.file_kinds import check_regular_file, check_replaceable
from grainfn._src.core.grain_state import GrainKeys
from grainfn._src.core.stream import BaseCursor, Cursor, Stream

_POLYNOMIAL = 0x82F63B78  # CRC-32C (Castagnoli), bit-reversed
_MASK_DELTA = 0xA282EAD8
_HEADER = struct.Struct("<QI")  # length, masked crc of the length
_FOOTER = struct.Struct("<I")  # masked crc of the data
_FRAME = _HEADER.size + _FOOTER.size  # bytes a record takes besides its data
_CHUNK = 1 << 20  # bytes read from the file at a time
_BLOCK = 1024  # bytes of data a numpy step of crc32c handles
_SHORT = 64  # below this many bytes, crc32c's Python loop beats numpy's fixed cost


# --- crc32c ---------------------------------------------------------------------------


def _byte_table() -> tuple[int, ...]:
    """The CRC-32C register update of each byte value, for the byte-at-a-time loop."""
    table = []
    for byte in range(256):
        crc = byte
        for _ in range(8):
            crc = (crc >> 1) ^ _POLYNOMIAL if crc & 1 else crc >> 1
        table.append(crc)
    return tuple(table)


_TABLE = _byte_table()


def _update(register: int, data: Iterable[int]) -> int:
    table = _TABLE
    for byte in data:
        register = table[(register ^ byte) & 0xFF] ^ (register >> 8)
    return register


@functools.cache
def _block_tables() -> tuple[np.ndarray, np.ndarray]:
    """Per-position tables: what byte value `b` at index `i` of a block adds to its CRC.

    From a zero register, the CRC of a block is linear in its bytes: the XOR
    over `i` of `rows[i][block[i]]`, where row `i` is the byte table shifted
    through the `_BLOCK - 1 - i` bytes after it (a block of `n < _BLOCK` bytes
    uses the last `n` rows). Returns the rows flattened, and each row's start.
    """
    rows = np.empty((_BLOCK, 256), np.uint32)
    rows[-1] = _TABLE
    table = np.array(_TABLE, np.uint32)
    for i in range(_BLOCK - 2, -1, -1):
        after = rows[i + 1]
        rows[i] = (after >> 8) ^ table[after & 0xFF]
    return rows.ravel(), np.arange(_BLOCK, dtype=np.intp) * 256


def crc32c(data: bytes | bytearray | memoryview) -> int:
    """The CRC-32C (Castagnoli) checksum of `data`, as TFRecord files use it.

    Long inputs are summed a block of 1024 bytes at a time with numpy (the
    register going into a block is XORed into its first 4 bytes, which is the
    same as starting the block from it), short ones byte by byte.

    Examples:
        >>> hex(crc32c(b"123456789"))
        '0xe3069283'
        >>> crc32c(b"")
        0
        >>> long = bytes(range(256)) * 20  # summed with numpy, the same as byte by byte
        >>> crc32c(long) == _update(0xFFFFFFFF, long) ^ 0xFFFFFFFF
        True
    """
    view = memoryview(data).cast("B")
    if len(view) < _SHORT:
        return _update(0xFFFFFFFF, view) ^ 0xFFFFFFFF
    flat, starts = _block_tables()
    array = np.frombuffer(view, np.uint8)
    register = 0xFFFFFFFF
    for begin in range(0, len(array), _BLOCK):
        block = array[begin : begin + _BLOCK]
        if len(block) < 4:  # too short to take the register in: the rest byte by byte
            register = _update(register, block.tolist())
            break
        index = starts[_BLOCK - len(block) :] + block  # a new array: safe to change
        index[:4] ^= np.frombuffer(register.to_bytes(4, "little"), np.uint8)
        register = int(np.bitwise_xor.reduce(flat.take(index)))
    return register ^ 0xFFFFFFFF


def masked_crc32c(data: bytes | bytearray | memoryview) -> int:
    """TensorFlow's masked CRC-32C of `data`: the checksum a TFRecord file stores.

    Examples:
        >>> hex(masked_crc32c((1).to_bytes(8, "little")))
        '0x41de7501'
    """
    crc = crc32c(data)
    return ((((crc >> 15) | (crc << 17)) & 0xFFFFFFFF) + _MASK_DELTA) & 0xFFFFFFFF


@functools.lru_cache(maxsize=1 << 14)
def _length_crc(length: int) -> int:
    # Records of a file have few distinct lengths: most headers are checked by a look-up.
    return masked_crc32c(length.to_bytes(8, "little"))


# --- writing --------------------------------------------------------------------------


def frame(record: bytes | bytearray | memoryview) -> bytes:
    """One record framed as in a TFRecord file: length, its checksum, data, its checksum.

    Examples:
        >>> frame(b"1").hex(" ")
        '01 00 00 00 00 00 00 00 01 75 de 41 31 c3 0c 4a d6'
    """
    data = bytes(record)
    header = _HEADER.pack(len(data), _length_crc(len(data)))
    return header + data + _FOOTER.pack(masked_crc32c(data))


def write_tfrecords(path: str | os.PathLike[str], records: Iterable[Any]) -> str:
    """Writes `records` (bytes-like) to one TFRecord file at `path`; returns the path.

    The bytes are those TensorFlow's `tf.io.TFRecordWriter` writes (no
    compression). An existing file is replaced.

    Args:
        path: The file to write.
        records: `bytes`, `bytearray` or `memoryview` values.

    Returns:
        `path` as a string.

    Raises:
        TypeError: if a record is not bytes-like (text must be encoded first).
        ValueError: if a FIFO, a device or a socket is at `path`.
        IsADirectoryError: if a directory is.

    Examples:
        >>> import os, tempfile
        >>> folder = tempfile.TemporaryDirectory()
        >>> path = write_tfrecords(os.path.join(folder.name, "x.tfrecord"), [b"1", b""])
        >>> os.path.getsize(path)  # 16 bytes of framing per record
        33
        >>> folder.cleanup()
    """
    name = validate.check_path(path, "TFRecord")
    check_replaceable(name, "TFRecord")
    with open(name, "wb") as file:
        for i, record in enumerate(records):
            if not isinstance(record, (bytes, bytearray, memoryview)):
                raise TypeError(
                    f"Record {i} is {record!r} of type {type(record).__name__}; TFRecord "
                    "records are bytes, bytearray or memoryview (encode text, e.g. "
                    "text.encode())."
                )
            file.write(frame(record))
    return name


# --- reading --------------------------------------------------------------------------


def truncated_error(path: Any, offset: int, what: str, need: int, have: int) -> ValueError:
    """The error for a TFRecord file that ends inside the record at byte `offset`."""
    return ValueError(
        f"TFRecord file {path!r} is truncated at byte {offset}: {what} needs {need} bytes "
        f"there, but the file ends {have} bytes later. It was cut short (an unfinished "
        "write?), or is not a TFRecord file."
    )


def corrupt_error(path: Any, offset: int, what: str, stored: int, computed: int) -> ValueError:
    """The error for a checksum of the record at byte `offset` that is not the one stored."""
    return ValueError(
        f"TFRecord file {path!r} is corrupt at byte {offset}: the checksum of {what} is "
        f"{computed:#010x}, but {stored:#010x} is stored. The file is damaged or not a "
        "TFRecord file, or reading started at an offset that is not the start of a record."
    )


@records.register
class TFRecordPosition(NamedTuple):
    """State of a TFRecord file stream: the byte offset of the next record in the file.

    The end of the file is its size. Grain's own state of its
    `TFRecordIterDataset`, `{"reader_offset": n}`, is the same number.
    """

    offset: int


@dataclasses.dataclass(frozen=True, repr=False)
class TFRecordStream(Stream[bytes]):
    """The records of one TFRecord file, in order, as `bytes`.

    Build one with `tfrecord`. Each cursor opens the file afresh.

    Attributes:
        path: The local file, as given.
        verify_data_crc: Whether the data's checksum of each record is checked
            too. It changes no element, so it is not part of the stage's
            description: a state saved with it restores without it.
    """

    path: str
    verify_data_crc: bool = False
    grain_state = GrainKeys(
        "TFRecordIterDataset", TFRecordPosition, (("reader_offset", "offset"),), parent=None
    )
    reads_in_parent = True  # no dataset positions to hand to mp_prefetch's workers

    def init(self) -> TFRecordPosition:
        return TFRecordPosition(0)

    def open(self, state: Any) -> Cursor:
        return TFRecordCursor(self, state.offset)

    def check_state(self, state: Any, path: str = "") -> None:
        records.check_record(state, TFRecordPosition, self.describe_stage(), path)
        size = check_regular_file(self.path, "TFRecord").st_size
        if state.offset > size:
            where = f"{path} " if path else ""
            raise ValueError(
                f"State {where}{state} is past the end of TFRecord file {self.path!r} "
                f"({size} bytes); it belongs to another file, or the file has changed."
            )

    def file_paths(self) -> dict[str, str]:
        """The file, for the fingerprint a saved state records."""
        return {self.path: self.path}

    def describe_stage(self) -> str:
        return f"tfrecord({self.path!r})"


class TFRecordCursor(BaseCursor):
    """Reads records from an offset on, through a buffer of up to 1 MiB (more for a long record).

    `buffer[at:]` holds the file's bytes from the next record on, and
    `start` is the file offset of `buffer[0]`. A `next` that raises moves
    nothing: the next `next` reads the same record again.
    """

    atomic = True

    def __init__(self, stream: TFRecordStream, offset: int) -> None:
        self.path = stream.path
        self.verify_data_crc = stream.verify_data_crc
        check_regular_file(self.path, "TFRecord")  # a FIFO would block the open
        self.file: Any = open(self.path, "rb", buffering=0)  # noqa: SIM115 (closed in close)
        self.file.seek(offset)
        # A cursor dropped without close() (an iterator left unfinished) closes its file too.
        self._closer = weakref.finalize(self, self.file.close)
        self.start = offset
        self.buffer = b""
        self.at = 0

    def next(self) -> bytes:
        at = self.at
        if len(self.buffer) - at < _HEADER.size:
            at = self._fill(_HEADER.size)
        length, length_crc = _HEADER.unpack_from(self.buffer, at)
        if length_crc != _length_crc(length):
            raise self._corrupt(f"its length field ({length})", length_crc, _length_crc(length))
        end = at + length + _FRAME
        if len(self.buffer) < end:
            at = self._fill(length + _FRAME, length)
            end = at + length + _FRAME
        data = self.buffer[at + _HEADER.size : end - _FOOTER.size]
        if self.verify_data_crc:
            (stored,) = _FOOTER.unpack_from(self.buffer, end - _FOOTER.size)
            computed = masked_crc32c(data)
            if stored != computed:
                raise self._corrupt(f"its {length} data bytes", stored, computed)
        self.at = end
        return data

    def _fill(self, need: int, length: int | None = None) -> int:
        """Reads until the buffer holds `need` bytes from the next record on; returns `at` (0).

        Raises StopIteration at the end of the file (no byte left before a
        header), ValueError if the file ends inside a record.
        """
        if self.file is None:
            raise ValueError(f"This TFRecord cursor over {self.path!r} is closed.")
        self.start += self.at
        self.buffer, self.at = self.buffer[self.at :], 0
        have = len(self.buffer)
        if have < need and length is not None:  # a whole record: is it all in the file?
            available = os.fstat(self.file.fileno()).st_size - self.start
            if available < need:
                raise self._truncated(f"a record of {length} data bytes", need, available)
        parts = [self.buffer]
        while have < need:
            part = self.file.read(max(_CHUNK, need - have))
            if not part:
                break
            parts.append(part)
            have += len(part)
        self.buffer = b"".join(parts)
        if have == 0:
            raise StopIteration
        if have < need:
            raise self._truncated("a record header", need, have)
        return 0

    def _truncated(self, what: str, need: int, have: int) -> ValueError:
        return truncated_error(self.path, self.start + self.at, what, need, have)

    def _corrupt(self, what: str, stored: int, computed: int) -> ValueError:
        return corrupt_error(self.path, self.start + self.at, what, stored, computed)

    def state(self) -> TFRecordPosition:
        return TFRecordPosition(self.start + self.at)

    def close(self) -> None:
        if self.file is not None:
            self._closer()
            self.file = None


def tfrecord(path: Any, *, verify_data_crc: bool = False) -> TFRecordStream:
    """The records of a TFRecord file, as `bytes`, in a stream whose state is a byte offset.

    The records are those Grain's `TFRecordIterDataset` yields. The state
    `TFRecordPosition(offset)` is where the next record starts, so resuming
    seeks there. The file is opened when a cursor is (a missing file is a
    FileNotFoundError then, and anything but a regular file, such as a FIFO,
    a ValueError); it is read in the parent process under `mp_prefetch`.

    Args:
        path: A local TFRecord file (`str` or `os.PathLike`), uncompressed.
        verify_data_crc: Also check each record's data checksum (the length's
            checksum is always checked).

    Returns:
        A `TFRecordStream`.

    Raises:
        TypeError: if `path` is not a str or os.PathLike, or `verify_data_crc`
            is not a bool.

    Examples:
        >>> import os, tempfile
        >>> from grainfn import fn
        >>> folder = tempfile.TemporaryDirectory()
        >>> file = write_tfrecords(os.path.join(folder.name, "x.tfrecord"), [b"a", b"bc", b"d"])
        >>> it = fn.iterate(tfrecord(file))
        >>> next(it), it.state
        (b'a', TFRecordPosition(offset=17))
        >>> list(fn.iterate(tfrecord(file), it.state))
        [b'bc', b'd']
        >>> folder.cleanup()
    """
    verify = validate.check_flag(verify_data_crc, "verify_data_crc")
    return TFRecordStream(validate.check_path(path, "TFRecord"), verify)

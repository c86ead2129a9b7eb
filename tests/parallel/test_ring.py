"""Tests for grainfn._src.parallel.ring: a worker's shared ring, without starting a worker."""

import os

from grainfn._src.parallel.ring import Ring, RingReader


def test_reserve_hands_out_bytes_in_order_until_the_ring_is_full() -> None:
    ring = Ring(size=64 + 100)
    assert ring.capacity == 100
    assert [ring.reserve(30), ring.reserve(30), ring.reserve(30)] == [0, 30, 60]
    assert ring.reserve(30) is None  # 10 bytes left, and nothing freed
    assert ring.reserve(101) is None  # never fits
    ring.close()


def test_a_block_never_wraps_it_starts_the_next_lap() -> None:
    ring = Ring(size=64 + 100)
    assert ring.reserve(60) == 0
    ring.free(60)
    assert ring.reserve(60) == 100  # 40 bytes before the end: the whole block goes to lap 2
    assert ring.head == 160
    ring.free(160)
    assert ring.reserve(60) == 200  # the gap before the end of lap 2 is skipped too
    assert ring.reserve(1) == 260  # the skipped gap was free: 40 bytes left in lap 3
    assert ring.reserve(40) is None  # 39 left before the end, and lap 4 is not free
    ring.close()


def test_a_worker_whose_blocks_are_all_freed_starts_again_at_the_front() -> None:
    ring = Ring(size=64 + 100)
    starts = []
    for _ in range(4):  # the parent keeps up: every block goes to the front of a lap
        starts.append(ring.reserve(30))
        ring.free(ring.head)
    assert starts == [0, 100, 200, 300]  # only the first 30 bytes are ever touched
    # The parent falls behind: blocks go on after the ones in flight, as far as the end.
    assert [ring.reserve(30), ring.reserve(30), ring.reserve(30)] == [400, 430, 460]
    ring.free(430)  # the first copied out, two still in flight
    assert ring.reserve(30) == 500  # 10 bytes before the end: the next lap, where 400 was
    assert ring.reserve(30) is None  # bytes 30 to 90 of the ring are still in flight
    ring.free(530)
    assert ring.reserve(30) == 600  # all freed: the front again
    ring.close()


def test_the_reader_sees_what_the_worker_wrote_and_frees_it() -> None:
    ring = Ring(size=64 + 64)
    reader = RingReader(os.dup(ring.descriptor))
    start = ring.reserve(40)
    ring.region(start, 6)[:] = b"abcdef"
    assert [bytes(b) for b in reader.buffers(start, [2, 4])] == [b"ab", b"cdef"]
    assert ring.reserve(40) is None  # the reader has not freed the first block
    reader.free(start + 40)
    assert ring.reserve(40) == 64  # freed by the reader: the worker reuses the bytes
    ring.region(64, 3)[:] = b"xyz"
    assert bytes(reader.buffers(64, [3])[0]) == b"xyz"
    reader.close()
    ring.close()


def test_handing_over_closes_the_workers_descriptor_once_and_keeps_the_mapping() -> None:
    ring = Ring(size=64 + 16)
    reader = RingReader(os.dup(ring.descriptor))  # what the parent does before the hand-over
    ring.handed_over()
    assert ring.descriptor is None
    ring.handed_over()  # a second call does nothing
    start = ring.reserve(4)
    ring.region(start, 4)[:] = b"1234"
    assert bytes(reader.buffers(start, [4])[0]) == b"1234"
    reader.close()
    ring.close()


def test_closing_with_a_view_alive_leaves_the_mapping_to_the_collector() -> None:
    ring = Ring(size=64 + 16)
    view = ring.region(ring.reserve(4), 4)
    ring.close()  # a BufferError, suppressed
    view[:] = b"ok!!"
    assert bytes(view) == b"ok!!"
    view.release()
    ring.close()

"""Nothing silent on the newer surfaces: flags are booleans, predicates return bools, a
StopIteration in worker_init_fn is an error, a crafted Grain state is refused at no cost.

Each case was seen giving a wrong result, no error, or a cost in proportion to a number a
state claims (a torture run of the public API); each test failed before its fix.
"""

from __future__ import annotations

import itertools
import json
import tracemalloc
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import grainfn as grain
from grainfn import fn
from grainfn._src.parallel.processes import WorkerError

from faults.faulty import Fault
from support.leaks import assert_nothing_left, workers

TEN = grain.MapDataset.range(10)
STREAM = fn.from_dataset(fn.range(10))

FLAGS: dict[str, Callable[[Any], Any]] = {
    "batch drop_remainder": lambda flag: fn.batch(4, fn.range(10), drop_remainder=flag),
    "batch sort_keys": lambda flag: fn.batch(4, STREAM, sort_keys=flag),
    "MapDataset.batch drop_remainder": lambda flag: TEN.batch(4, drop_remainder=flag),
    "IterDataset.batch drop_remainder": lambda flag: TEN.to_iter_dataset().batch(
        4, drop_remainder=flag
    ),
    "rebatch drop_remainder": lambda flag: fn.rebatch(3, STREAM, drop_remainder=flag),
    "zip strict": lambda flag: fn.zip([STREAM, STREAM], strict=flag),
    "repeat reseed_each_epoch": lambda flag: TEN.repeat(2, reseed_each_epoch=flag),
    "from_dataset allow_nones": lambda flag: fn.from_dataset(fn.range(3), allow_nones=flag),
    "to_iter_dataset allow_nones": lambda flag: TEN.to_iter_dataset(allow_nones=flag),
    "IndexSampler shuffle": lambda flag: grain.IndexSampler(10, shuffle=flag, seed=0),
    "Batch drop_remainder": lambda flag: grain.transforms.Batch(4, drop_remainder=flag),
    "load shuffle": lambda flag: grain.load(list(range(10)), shuffle=flag, seed=0),
    "load drop_remainder": lambda flag: grain.load(
        list(range(10)), batch_size=4, drop_remainder=flag
    ),
    "mp_prefetch grain_worker_order": lambda flag: TEN.to_iter_dataset().mp_prefetch(
        grain.MultiprocessingOptions(2), grain_worker_order=flag
    ),
    "mp_prefetch sequential_slice": lambda flag: TEN.to_iter_dataset().mp_prefetch(
        grain.MultiprocessingOptions(2), sequential_slice=flag
    ),
    "DataLoader grain_worker_order": lambda flag: grain.DataLoader(
        data_source=list(range(10)),
        sampler=grain.SequentialSampler(10),
        worker_count=2,
        grain_worker_order=flag,
    ),
    "DataLoader adaptive": lambda flag: grain.DataLoader(
        data_source=list(range(10)), sampler=grain.SequentialSampler(10), adaptive=flag
    ),
    "MultiprocessingOptions adaptive": lambda flag: grain.MultiprocessingOptions(2, adaptive=flag),
    "MultiprocessingOptions enable_profiling": lambda flag: grain.MultiprocessingOptions(
        2, 1, flag
    ),
    "mp_prefetch adaptive": lambda flag: fn.mp_prefetch(2, STREAM, adaptive=flag),
    "grain_worker_order sequential": lambda flag: fn.grain_worker_order(2, STREAM, sequential=flag),
}


@pytest.mark.parametrize("name", FLAGS)
@pytest.mark.parametrize("flag", ["False", "no", 0, None, np.array([True])])
def test_a_flag_that_is_not_a_bool_is_refused_naming_it(name: str, flag: Any) -> None:
    with pytest.raises(TypeError, match=r"must be True or False, got .* \(a "):
        FLAGS[name](flag)


@pytest.mark.parametrize("name", FLAGS)
def test_a_flag_given_as_a_bool_is_taken(name: str) -> None:
    for flag in (True, False, np.bool_(True)):
        FLAGS[name](flag)


def test_a_string_false_no_longer_means_true() -> None:
    # What `bool('False')` did: drop the short batch, and read Nones through.
    assert len(TEN.batch(4, drop_remainder=False)) == 3
    with pytest.raises(TypeError, match="drop_remainder"):
        TEN.batch(4, drop_remainder="False")


def forgotten_return(x: int) -> Any:
    if x % 2:
        pass  # meant: return True


def says_false(x: int) -> str:
    return "False"


PREDICATE_FACES: dict[str, Callable[[Callable[[Any], Any]], Any]] = {
    "MapDataset.filter": lambda keep: list(TEN.filter(keep)),
    "IterDataset.filter": lambda keep: list(TEN.to_iter_dataset().filter(keep)),
    "fn.filter, a block": lambda keep: fn.filter(keep, fn.range(10)).get_many(range(10)),
    "fn.filter of a stream": lambda keep: list(fn.iterate(fn.filter(keep, STREAM))),
    "fn.take_while": lambda keep: list(fn.iterate(fn.take_while(keep, STREAM))),
}


@pytest.mark.parametrize("face", PREDICATE_FACES)
@pytest.mark.parametrize(
    ("keep", "what"), [(forgotten_return, r"None \(a NoneType\)"), (says_false, "'False'")]
)
def test_a_predicate_that_returns_no_bool_is_refused(face: str, keep: Any, what: str) -> None:
    with pytest.raises(TypeError, match=rf"must return a bool; reading .* it returned {what}"):
        PREDICATE_FACES[face](keep)


@pytest.mark.parametrize("face", PREDICATE_FACES)
def test_predicates_returning_numpy_bools_and_integers_are_read_as_their_truth(face: str) -> None:
    for keep in (lambda x: np.int64(x) < 5, lambda x: (x + 1) % 6, lambda x: np.array(x < 5)):
        got = PREDICATE_FACES[face](keep)
        assert got == PREDICATE_FACES[face](lambda x, keep=keep: bool(keep(x)))


def next_many(stream: Any, count: int) -> list[Any]:
    cursor = stream.open(stream.init())
    try:
        return list(cursor.next_many(count))
    finally:
        cursor.close()


def no_return(x: int) -> None:
    x + 1  # meant: return x + 1


NONE_MAP_FACES: dict[str, Callable[[int], Any]] = {
    "to_iter_dataset": lambda n: list(grain.MapDataset.range(n).map(no_return).to_iter_dataset()),
    "iterating a MapDataset": lambda n: list(grain.MapDataset.range(n).map(no_return)),
    "fn.from_dataset": lambda n: list(fn.iterate(fn.from_dataset(fn.map(no_return, fn.range(n))))),
    "a cursor's next_many": lambda n: next_many(fn.from_dataset(fn.map(no_return, fn.range(n))), n),
    "with workers": lambda n: list(
        fn.iterate(fn.mp_prefetch(2, fn.from_dataset(fn.map(no_return, fn.range(n)))))
    ),
    "repeated forever": lambda n: list(
        itertools.islice(
            fn.iterate(fn.from_dataset(fn.repeat(None, fn.map(no_return, fn.range(n))))), 1
        )
    ),
}


@pytest.mark.parametrize("face", NONE_MAP_FACES)
@pytest.mark.parametrize("n", [10, 5_000])
def test_a_map_that_returns_none_everywhere_is_an_error_not_empty_data(face: str, n: int) -> None:
    with pytest.raises(ValueError, match=r"were all None, and there is no filter") as raised:
        NONE_MAP_FACES[face](n)
    assert "a missing `return`" in str(raised.value) and "allow_nones=True" in str(raised.value)


def test_a_map_that_drops_some_elements_with_none_reads_as_in_grain() -> None:
    def odd_only(x: int) -> int | None:
        return x if x % 2 else None

    ours = list(grain.MapDataset.range(3_000).map(odd_only).to_iter_dataset())
    assert ours == list(range(1, 3_000, 2))
    kept = fn.iterate(fn.from_dataset(fn.map(no_return, fn.range(5)), allow_nones=True))
    assert list(kept) == [None] * 5  # allowed: nothing is dropped, nothing raised


def stop_at_init(index: int, count: int) -> None:
    raise StopIteration


@pytest.mark.parametrize(
    "make",
    [
        lambda: TEN.to_iter_dataset().mp_prefetch(
            grain.MultiprocessingOptions(2), worker_init_fn=stop_at_init
        ),
        lambda: fn.iterate(fn.mp_prefetch(2, STREAM, worker_init_fn=stop_at_init)),
    ],
    ids=["facade", "fn.mp_prefetch"],
)
def test_a_stop_iteration_in_worker_init_fn_is_an_error_not_an_empty_run(make: Any) -> None:
    it = iter(make())
    with pytest.raises(grain.UserStopIterationError, match="worker_init_fn raised StopIteration"):
        next(it)
    it.close()
    assert_nothing_left()


def killed_at_7(directory: str, times: int | None) -> Any:
    stream = fn.from_dataset(fn.map(Fault(directory, frozenset({7}), "exit", times), fn.range(20)))
    return fn.iterate(fn.mp_prefetch(2, stream, adaptive=False))


def test_kept_worker_errors_keep_no_worker_process(tmp_path: Any) -> None:
    kept = []
    for _ in range(3):  # position 7 kills every worker that reads it
        it = killed_at_7(str(tmp_path), times=None)
        with pytest.raises(WorkerError, match="Reading position 7 kills grainfn workers") as raised:
            list(it)
        kept.append(raised.value)  # its traceback holds the iterator and its pool
    assert workers() == [], "a kept error keeps worker processes alive"
    assert all(error.__traceback__ is not None for error in kept)


def test_after_a_worker_error_the_next_read_starts_workers_again(tmp_path: Any) -> None:
    it = killed_at_7(str(tmp_path), times=1)  # one death at 7: not the position's doing
    got = list(itertools.islice(it, 3))
    with pytest.raises(WorkerError, match="did not cause it"):
        for element in it:
            got.append(element)
    assert workers() == []
    got += list(it)  # the reader stayed before the block, and reads on with new workers
    assert got == list(range(20))
    it.close()
    assert_nothing_left()


def loader(workers: int = 2) -> Any:
    return grain.DataLoader(
        data_source=list(range(30)),
        sampler=grain.SequentialSampler(30),
        worker_count=workers,
        adaptive=False,
    )


def grain_loader_state(it: Any, workers: int = 0) -> dict[str, Any]:
    return json.loads(it.grain_state(workers))


@pytest.mark.parametrize("workers", [0, 2])
def test_a_grain_loader_state_naming_an_index_below_the_first_is_refused(workers: int) -> None:
    with iter(loader(workers)) as it:
        for _ in range(4):
            next(it)
        state = grain_loader_state(it, workers)
        lowest = {"0": -1} if workers == 0 else {"0": -2, "1": -1}  # before each one's first
        it.set_state(json.dumps({**state, "last_seen_indices": lowest}).encode())
        assert next(it) == 0
        for key in lowest:
            changed = {**lowest, key: lowest[key] - max(1, workers)}  # "read" before the start
            with pytest.raises(ValueError, match=f"for worker {key} .* never returns"):
                it.set_state(json.dumps({**state, "last_seen_indices": changed}).encode())
    if workers:
        with iter(loader(workers)) as it:  # worker 0 returns the even records only
            state = {**grain_loader_state(it, workers), "last_seen_indices": {"0": 3, "1": 1}}
            with pytest.raises(ValueError, match="worker 0 of 2, which that worker never"):
                it.set_state(json.dumps(state).encode())


@pytest.mark.parametrize("claimed", [10**7, 10**12, 2**62])
def test_a_grain_loader_state_claiming_many_workers_costs_nothing(claimed: int) -> None:
    with iter(loader(0)) as it:
        state = {**grain_loader_state(it), "worker_count": claimed}
        words = f"not the state of a DataLoader with {claimed}"
        tracemalloc.start()
        try:
            with pytest.raises(ValueError, match=words) as e:
                it.set_state(json.dumps(state).encode())
            _, peak = tracemalloc.get_traced_memory()
        finally:
            tracemalloc.stop()
    assert peak < 2**20, f"refusing it peaked at {peak} bytes"
    assert len(str(e.value)) < 1_000


def saved_folder(tmp_path: Any) -> tuple[Any, Any]:
    """A folder holding a saved iterator's state, and the iterator."""
    from grainfn._src.checkpoint import files

    it = iter(TEN.to_iter_dataset())
    next(it)
    folder = tmp_path / "checkpoint"
    folder.mkdir()
    files.write_state(folder, it.get_state(), (0, 1))
    return folder, it


def test_a_state_file_linking_out_of_the_folder_is_refused_unread(tmp_path: Any) -> None:
    from grainfn._src.checkpoint import files

    folder, it = saved_folder(tmp_path)
    secret = tmp_path / "secret.txt"
    secret.write_text("API_KEY=do-not-print-me")
    state = folder / "process_0-of-1.json"
    saved = state.read_bytes()
    state.unlink()
    state.symlink_to(secret)
    with pytest.raises(ValueError, match="link out of the checkpoint folder") as refused:
        files.restore(it, folder)
    assert "do-not-print-me" not in str(refused.value)
    inside = folder / "kept.json"  # a link inside the folder is fine
    inside.write_bytes(saved)
    state.unlink()
    state.symlink_to(inside)
    files.restore(it, folder)


def test_the_names_a_missing_state_file_error_lists_are_printable_and_few(tmp_path: Any) -> None:
    from grainfn._src.checkpoint import files

    folder, it = saved_folder(tmp_path)
    (folder / "process_0-of-1.json").unlink()
    (folder / "evil\x1b[2Jname").write_text("")
    for k in range(2_000):
        (folder / f"file-{k:05d}").write_text("")
    for read in (lambda: files.restore(it, folder), lambda: files.read_all_states(folder)):
        with pytest.raises(ValueError, match="and 1993 more") as refused:
            read()
        message = str(refused.value)
        assert "\x1b" not in message and "'evil\\x1b[2Jname'" in message
        assert len(message) < 1_000

"""Tests for grainfn._src.parallel.ray_reads: a session's timings and judgements, without Ray.

Reads on a real cluster are tested in test_ray_prefetch.py and test_ray_faults.py;
here the pool is a stand-in with what a session reads of one.
"""

import warnings
from types import SimpleNamespace

import pytest

from grainfn import fn
from grainfn._src.parallel import ray_reads
from grainfn._src.parallel.ray_reads import CHEAP_BLOCKS, RaySession, too_cheap


def session(actors: int = 2, call: float | None = 0.001, pinned: bool = True) -> RaySession:
    pool = SimpleNamespace(slots=[object()] * actors, call_seconds=call)
    return RaySession(pool, [fn.range(4)], pinned=pinned)  # type: ignore[arg-type]


def test_costly_elements_pay_for_ray_and_cheap_ones_are_named() -> None:
    assert too_cheap([(100, 0.5, 0.001)], call=0.001) is None  # 5 ms an element
    message = too_cheap([(1000, 0.0002, 0.004), (1000, 0.0002, 0.004)], call=0.001)
    assert message is not None
    assert message.startswith(
        "ray_prefetch: an element takes 0.2 µs to compute on an actor, and 4 µs to bring back; "
        "a call costs 1 ms."
    )
    assert "Read it in this process (drop ray_prefetch), or with mp_prefetch" in message


def test_work_too_cheap_for_ray_warns_once_after_the_judging_blocks() -> None:
    reads = session()
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for _ in range(CHEAP_BLOCKS - 1):
            reads.record(100, 1e-5, 1e-5, 1e-3)
        assert not reads.measured() and caught == []
        reads.record(100, 1e-5, 1e-5, 1e-3)
        assert reads.measured() and reads.warned
        reads.record(100, 1e-5, 1e-5, 1e-3)
    assert [str(w.message)[:13] for w in caught] == ["ray_prefetch:"]
    assert caught[0].category is RuntimeWarning


def test_costly_work_gives_no_warning_and_unpinned_sessions_never_judge() -> None:
    reads = session()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        for _ in range(CHEAP_BLOCKS + 2):
            reads.record(10, 0.5, 0.5, 1e-4)
    assert reads.measured() and not reads.warned
    unpinned = session(pinned=False)
    assert unpinned.measured()
    unpinned.record(10, 1e-6, 1e-6, 1.0)
    assert unpinned.costs == []


def test_a_slow_block_goes_to_a_second_actor_after_four_medians() -> None:
    reads = session(actors=2)
    for seconds in (0.2, 0.3, 0.4):
        reads.record(10, seconds, 0.0, 0.0)
    assert reads.slow_after() is None  # too few blocks timed
    reads.record(10, 0.1, 0.5, 0.0)  # waited longer than it computed: the wait counts
    assert reads.slow_after() == pytest.approx(ray_reads.SLOW_FACTOR * 0.35)
    fast = session(actors=2)
    for _ in range(4):
        fast.record(10, 0.01, 0.0, 0.0)
    assert fast.slow_after() == ray_reads.SLOW_FLOOR
    alone = session(actors=1)
    for _ in range(4):
        alone.record(10, 1.0, 0.0, 0.0)
    assert alone.slow_after() is None  # no second actor to send it to


def test_sessions_name_their_leaves_and_check_their_timeout() -> None:
    pool = SimpleNamespace(slots=[], call_seconds=None)
    two = RaySession(pool, [fn.range(2), fn.range(3)])  # type: ignore[arg-type]
    assert two.of_leaf(1) == " of dataset 1 of the pipeline"
    assert session().of_leaf(0) == ""
    with pytest.raises(ValueError, match="worker_timeout must be None"):
        RaySession(pool, [fn.range(2)], worker_timeout=0)  # type: ignore[arg-type]


def test_deadlines_bound_the_waits() -> None:
    assert ray_reads._deadline(None) is None
    assert not ray_reads._passed(None)
    assert ray_reads._passed(ray_reads._deadline(-1.0))
    assert ray_reads._sooner(0.5, None) == 0.5
    assert ray_reads._sooner(None, ray_reads._deadline(-1.0)) == 0.0
    assert ray_reads._sooner(0.5, ray_reads._deadline(-1.0)) == 0.0


def test_an_actors_death_is_told_in_rays_words() -> None:
    text = "The actor died.\n\tpid: 12\nIt was killed by `ray.kill`. Some common causes are..."
    assert ray_reads._cause(Exception(text)) == "It was killed by `ray.kill`."
    assert ray_reads._cause(Exception("only one line")) == "only one line"
    assert ray_reads._cause(KeyError()) == "KeyError"
    assert len(ray_reads._cause(Exception("x" * 400))) == 300
    death = ray_reads._death(SimpleNamespace(index=2, pid=77), Exception(text))  # type: ignore[arg-type]
    assert death.who == "Ray actor 2 (pid 77)"
    assert death.how == "died (It was killed by `ray.kill`.)"
    assert death.ready

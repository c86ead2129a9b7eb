"""Instruments are a value an iterator passes: `instrumented(stream, instruments)`."""

from __future__ import annotations

from typing import Any

import grainfn
from grainfn import fn
from grainfn._src.core.instrument import instrumented
from grainfn._src.core.stream import Stream
from grainfn._src.facade.config import Config


def test_instruments_apply_in_order_and_none_leave_the_stream() -> None:
    stream = fn.from_dataset(fn.range(3))
    calls: list[str] = []

    def first(s: Stream[Any]) -> Stream[Any]:
        calls.append("first")
        return fn.limit(2, s)

    def second(s: Stream[Any]) -> Stream[Any]:
        calls.append(f"second of {s.describe_stage()}")
        return s

    assert instrumented(stream, ()) is stream
    assert list(fn.iterate(instrumented(stream, [first, second]))) == [0, 1]
    assert calls == ["first", "second of limit(2)"]


def test_the_config_holds_the_instruments_of_its_options() -> None:
    config = Config()
    assert config.instruments == ()
    config.update("py_debug_mode", True)
    assert [i.__name__ for i in config.instruments] == ["timed"]
    assert grainfn.config.instruments == ()  # another config's options are its own
    config.update("py_debug_mode", False)
    assert config.instruments == ()


def test_the_global_config_times_the_iterators_made_while_on() -> None:
    ds = grainfn.MapDataset.range(4).to_iter_dataset()
    grainfn.config.update("py_debug_mode", True)
    try:
        assert len(grainfn.config.instruments) == 1
        timed = iter(ds)
    finally:
        grainfn.config.update("py_debug_mode", False)
    untimed = iter(ds)
    assert list(timed) == list(untimed) == [0, 1, 2, 3]
    assert grainfn.stage_stats(timed) and grainfn.config.instruments == ()

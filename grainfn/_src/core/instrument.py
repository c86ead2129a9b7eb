"""The one point where iterators can be watched: instruments applied to a stream as it opens.

An instrument is a function from stream to stream: it may look at the
pipeline (write its graph somewhere) or return a copy that measures it (time
every stage). It must not change elements or states. The facade's iterators
open their streams through `instrumented`; `grainfn.config` sets the
instruments from its options, so the iterators need not know about
inspection. With none set, `instrumented` returns the stream itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from grainfn._src.core.stream import Stream

Instrument = Callable[[Stream[Any]], Stream[Any]]

_instruments: tuple[Instrument, ...] = ()


def set_instruments(instruments: Sequence[Instrument]) -> None:
    """Makes `instruments` (applied in this order) the ones every new iterator goes through."""
    global _instruments
    _instruments = tuple(instruments)


def instrumented(stream: Stream[Any]) -> Stream[Any]:
    """`stream` passed through the instruments set now, in order.

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.from_dataset(fn.range(3))
        >>> instrumented(stream) is stream
        True
    """
    for instrument in _instruments:
        stream = instrument(stream)
    return stream

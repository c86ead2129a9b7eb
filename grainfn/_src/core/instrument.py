"""The one point where iterators can be watched: instruments applied to a stream as it opens.

An instrument is a function from stream to stream: it may look at the
pipeline (write its graph somewhere) or return a copy that measures it (time
every stage). It must not change elements or states. An iterator opens its
stream through `instrumented(stream, instruments)`, with the instruments of
the options it reads: the Grain API's iterators pass `grainfn.config`'s
(`Config.instruments`), so they need not know about inspection. With none,
`instrumented` returns the stream itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from grainfn._src.core.stream import Stream

Instrument = Callable[[Stream[Any]], Stream[Any]]

_instruments: tuple[Instrument, ...] = ()
"""Transitional: what `instrumented(stream)` applies. Remove with `set_instruments`."""


def set_instruments(instruments: Sequence[Instrument]) -> None:
    """Transitional: makes `instruments` what `instrumented(stream)`, without any, applies.

    Only for the iterators that do not pass their instruments yet; it goes
    once every caller of `instrumented` passes them.
    """
    global _instruments
    _instruments = tuple(instruments)


def instrumented(
    stream: Stream[Any], instruments: Sequence[Instrument] | None = None
) -> Stream[Any]:
    """`stream` passed through `instruments`, in order.

    Args:
        stream: The stream an iterator is about to open.
        instruments: Functions from stream to stream that keep elements and
            states (`grainfn.config.instruments` for the Grain API's
            iterators). None (transitional): those `set_instruments` set last.

    Returns:
        The stream the last instrument returned (`stream` itself for none).

    Examples:
        >>> from grainfn import fn
        >>> stream = fn.from_dataset(fn.range(3))
        >>> instrumented(stream, ()) is stream
        True
        >>> seen = []
        >>> instrumented(stream, [lambda s: seen.append(s.describe_stage()) or s]) is stream
        True
        >>> seen
        ['from_dataset()']
    """
    for instrument in _instruments if instruments is None else instruments:
        stream = instrument(stream)
    return stream

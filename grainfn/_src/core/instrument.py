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


def instrumented(stream: Stream[Any], instruments: Sequence[Instrument]) -> Stream[Any]:
    """`stream` passed through `instruments`, in order.

    Args:
        stream: The stream an iterator is about to open.
        instruments: Functions from stream to stream that keep elements and
            states (`grainfn.config.instruments` for the Grain API's
            iterators).

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
    for instrument in instruments:
        stream = instrument(stream)
    return stream

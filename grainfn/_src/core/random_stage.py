"""How random pipelines hold a stage: a declaration a stage module makes for property tests.

A stream stage that declares `random_stage` on its class joins the random
pipelines of `grainfn.testing` (`stream_specs`, `testing.streams()`) with
nothing else edited: a spec of it is `(function, *arguments)`, and its
pipeline is `getattr(grainfn.fn, function)(*arguments, data)` with each
argument drawn and resolved by its kind (`grainfn._src.testing.specs.ARGUMENTS`).
"""

from __future__ import annotations

import dataclasses


@dataclasses.dataclass(frozen=True)
class RandomStage:
    """A stage's function in `grainfn.fn` and the kinds of its arguments before the data.

    Attributes:
        function: The stage's function in `grainfn.fn`.
        arguments: The kinds of its arguments, in order: keys of
            `grainfn._src.testing.specs.ARGUMENTS` ("predicate", "map", "seed",
            "count").

    Examples:
        >>> RandomStage("take_while", ("predicate",)).function
        'take_while'
    """

    function: str
    arguments: tuple[str, ...]

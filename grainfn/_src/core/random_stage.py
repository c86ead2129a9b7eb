"""How random pipelines hold a stage: a declaration a stage module makes for property tests.

Every stage that the random pipelines of `grainfn.testing` draw declares
`random_stage` on its own class (a Dataset stage or a Stream stage), and
nothing else lists it: `grainfn._src.testing.specs` finds the declarations
(`declared_kinds`) and draws from them. A spec of a stage is
`(name, *values)`, and its pipeline is
`getattr(grainfn.fn, function)(*arguments, data, **keywords)`, each argument
drawn and resolved by its kind (`grainfn._src.testing.specs.ARGUMENTS`).

A stage that combines several pipelines (mix, concatenate) declares a
`COMPONENTS` argument: it is drawn as the head of a spec, not over a parent,
its components being specs of its own level, and its pipeline is
`getattr(grainfn.fn, function)(*arguments, **keywords)` with the built
components in the place of `COMPONENTS`.

A stage that Grain has too (`in_grain`) is built from the same declaration
with Grain's API, which grainfn's facade shares: its Grain twin, the oracle
of the differential tests (`tests/support/pipelines.py`).
"""

from __future__ import annotations

import dataclasses
import enum
from collections.abc import Callable
from typing import Any


class ArgumentKind(enum.Enum):
    """A kind of argument a random pipeline draws for a stage, and what it becomes.

    Most kinds hold one value in a spec; `SLICE` holds three (start, stop,
    step), and `INDEX_MAP`, `KEY_MAP` and `JAX_RNG` none (they are one value).
    `COMPONENTS` makes a stage a head (`RandomStage.combines`); `OPTIONAL_WEIGHTS`
    and `SELECTION_MAP` are drawn from its components.
    """

    PREDICATE = "predicate"
    """A predicate, named in the spec: one of the `filters` of the pipeline's functions."""
    MAP = "map"
    """An element function `f(x)`, named in the spec: one of the `maps`."""
    RANDOM_MAP = "random_map"
    """A function `f(x, rng)` of a numpy Generator, named in the spec: one of the `random_maps`."""
    KEY_MAP = "key_map"
    """`f(x, key)` of a `jax.random` key (the device's draws), where the functions allow it."""
    INDEX_MAP = "index_map"
    """`f(index, x)` on integers, where the functions allow it."""
    SEED = "seed"
    """A seed in [0, 2**32)."""
    OPTIONAL_SEED = "optional_seed"
    """A seed in [0, 2**32), or None (the pipeline's seed)."""
    COUNT = "count"
    """A number of elements, 1 to 30."""
    EPOCHS = "epochs"
    """A number of epochs, 1 to 3."""
    OPTIONAL_EPOCHS = "optional_epochs"
    """A number of epochs, 1 to 3, or None (endless)."""
    WINDOW = "window"
    """A window size, 1 to 12."""
    BATCH_SIZE = "batch_size"
    """A batch size, 1 to 5."""
    FLAG = "flag"
    """True or False."""
    DROP_REMAINDER = "drop_remainder"
    """Whether a batch drops its short last one: True or False; True in device pipelines,
    whose elements keep one shape."""
    SLICE = "slice"
    """A `slice`, held in the spec as its start, stop and step (each may be None)."""
    POSITIONS = "positions"
    """Positions to read, 1 to 6 of them, taken modulo the data's length."""
    JAX_RNG = "jax_rng"
    """The name "jax": draws from `jax.random` keys (`random_map`'s `rng`)."""
    COMPONENTS = "components"
    """The pipelines a head combines: 1 to 3 specs of its level, held in the spec as a tuple."""
    OPTIONAL_WEIGHTS = "optional_weights"
    """One weight in [0.1, 5] per component (a tuple), or None (uniform); after COMPONENTS."""
    SELECTION_MAP = "selection_map"
    """1 to 6 pairs (component, position in it), a tuple; after COMPONENTS."""


_OF_COMPONENTS = frozenset({ArgumentKind.OPTIONAL_WEIGHTS, ArgumentKind.SELECTION_MAP})
"""The kinds drawn from a head's components, which come after its `COMPONENTS`."""


@dataclasses.dataclass(frozen=True)
class RandomStage:
    """How the random pipelines of `grainfn.testing` draw a stage, declared on its class.

    The stage is built as `getattr(grainfn.fn, function)(*arguments, data,
    **keywords)`; a head, which combines pipelines (`combines`), as
    `getattr(grainfn.fn, function)(*arguments, **keywords)`, its components
    in the place of its `COMPONENTS` argument. Its level (a map-level or a
    stream stage) is its class's: a Dataset stage's declaration is drawn in
    dataset pipelines, a Stream stage's in streams. A class declares one, or
    a tuple of them where it is drawn in several forms (`random_map` with
    numpy draws, and with jax keys).

    Its Grain twin, where it is `in_grain`, is built with Grain's API (Grain's
    module, or grainfn's facade of it) from the same arguments:
    `data.<function>(*arguments, **keywords)`, a head
    `MapDataset.<function>(*arguments, **keywords)` (`IterDataset` for
    streams), unless it declares a `grain_twin`.

    Attributes:
        function: The stage's function in `grainfn.fn`.
        arguments: The kinds of its arguments before the data, in order.
        keywords: Pairs `(keyword, kind)` of its keyword arguments after the data.
        in_grain: Whether Grain has the stage and gives the same elements: the
            differential tests build every stage drawn with `grain_only=True`
            with Grain too.
        name: The stage's name in a spec, `function` unless given (two forms
            of one function need two names).
        grain_twin: Where Grain's API has no call of the function's name that
            takes its arguments: `grain_twin(grain, *arguments, data,
            **keywords)` builds it with `grain` (a head's takes no data).
        drawn: Whether the random pipelines draw it. A stage they leave out
            (`zip`, whose tuples no element function takes) is still in the
            registry: tests that enumerate stages build it from its declaration.
        leads: Whether the strategies also put it first in a pipeline, half
            the time (`seed`: the pipeline's seed), besides drawing it among
            the stages.

    Examples:
        >>> stage = RandomStage("take_while", (ArgumentKind.PREDICATE,))
        >>> stage.name, stage.kinds(), stage.in_grain
        ('take_while', (<ArgumentKind.PREDICATE: 'predicate'>,), False)
        >>> RandomStage("shuffle", keywords=(("seed", ArgumentKind.OPTIONAL_SEED),)).kinds()
        (<ArgumentKind.OPTIONAL_SEED: 'optional_seed'>,)
        >>> RandomStage("mix", (ArgumentKind.COMPONENTS, ArgumentKind.OPTIONAL_WEIGHTS)).combines
        True
    """

    function: str
    arguments: tuple[ArgumentKind, ...] = ()
    keywords: tuple[tuple[str, ArgumentKind], ...] = ()
    in_grain: bool = False
    name: str = ""
    grain_twin: Callable[..., Any] | None = None
    drawn: bool = True
    leads: bool = False

    def __post_init__(self) -> None:
        if not isinstance(self.function, str) or not self.function.isidentifier():
            raise ValueError(
                f"RandomStage function must be the name of a function of grainfn.fn, "
                f"got {self.function!r}."
            )
        bad = [kind for kind in self.arguments if not isinstance(kind, ArgumentKind)]
        if bad or not isinstance(self.arguments, tuple):
            raise TypeError(
                f"RandomStage {self.function!r} arguments must be a tuple of ArgumentKind "
                f"(one of {[kind.name for kind in ArgumentKind]}), got {self.arguments!r}."
            )
        for pair in self.keywords:
            if not (
                isinstance(pair, tuple)
                and len(pair) == 2
                and isinstance(pair[0], str)
                and pair[0].isidentifier()
                and isinstance(pair[1], ArgumentKind)
            ):
                raise TypeError(
                    f"RandomStage {self.function!r} keywords must be pairs (keyword, "
                    f"ArgumentKind), got {pair!r}."
                )
        kinds = self.kinds()
        components = [at for at, kind in enumerate(kinds) if kind is ArgumentKind.COMPONENTS]
        of_them = [at for at, kind in enumerate(kinds) if kind in _OF_COMPONENTS]
        if len(components) > 1 or any(not components or at < components[0] for at in of_them):
            raise ValueError(
                f"RandomStage {self.function!r} may take COMPONENTS once, and OPTIONAL_WEIGHTS "
                f"(one per component) or SELECTION_MAP only after it, got "
                f"{[kind.name for kind in kinds]}."
            )
        if self.grain_twin is not None and not (self.in_grain and callable(self.grain_twin)):
            raise ValueError(
                f"RandomStage {self.function!r} grain_twin must be a function, of a stage "
                f"in_grain, got {self.grain_twin!r} with in_grain={self.in_grain}."
            )
        if not self.name:
            object.__setattr__(self, "name", self.function)

    def kinds(self) -> tuple[ArgumentKind, ...]:
        """The kinds of all its arguments, in the order a spec holds their values."""
        return (*self.arguments, *(kind for _, kind in self.keywords))

    @property
    def combines(self) -> bool:
        """Whether it combines pipelines (a `COMPONENTS` argument): drawn as a spec's head."""
        return ArgumentKind.COMPONENTS in self.kinds()

    @property
    def stacks(self) -> bool:
        """Whether it stacks elements into batches, so changes their shape (a `BATCH_SIZE`)."""
        return ArgumentKind.BATCH_SIZE in self.kinds()


def random_stages(kind: type[Any]) -> tuple[RandomStage, ...]:
    """The declarations `kind` makes itself (not those it inherits), as a tuple.

    Its type is checked when a stage class is made (`grainfn._src.core.declarations`).

    Examples:
        >>> class Stage:
        ...     random_stage = RandomStage("limit", (ArgumentKind.COUNT,), in_grain=True)
        >>> class Child(Stage):
        ...     pass
        >>> [stage.name for stage in random_stages(Stage)], random_stages(Child)
        (['limit'], ())
    """
    declared = vars(kind).get("random_stage")
    return declared if isinstance(declared, tuple) else (() if declared is None else (declared,))

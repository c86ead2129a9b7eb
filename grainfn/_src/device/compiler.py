"""Compiling a map-level pipeline into one jax function of a position.

Each supported stage has a rule: given the stage and the largest position it
will be asked for, the rule compiles its parents and returns a `Program`, a
pure function `(arrays, Split) -> element` that jax traces. Arrays a program
reads (sources, index tables) are not baked into it: the compiler collects them,
so they travel as the leaves of the `JaxDataset` pytree.

The index math itself is the host's: the rules call the functions of
`grainfn._src.index` on jax values, or tabulate them on the host once.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import Any

from grainfn._src.core.dataset import Dataset
from grainfn._src.device.ints import IntMode, Split, offset_bound, require, wide_offsets

Program = Callable[[Sequence[Any], Split], Any]
"""A compiled stage: the element at a position, from the collected arrays."""

Rule = Callable[["Compiler", Any, int], Program]
"""Compiles one stage kind: `(compiler, stage, bound) -> Program`."""


class NotOnDeviceError(TypeError):
    """A stage that has no device form: the message names it and says why."""


REASONS = {
    "FilteredDataset": (
        "a filter leaves empty positions (None), so a position no longer names an element "
        "of a fixed shape. Keep the predicate as data instead: fn.map(lambda x: (x, keep(x)), "
        "ds) runs on device, and the step can mask what keep rejects"
    ),
    "FlatMappedDataset": (
        "flat_map makes a varying number of elements per position, and leaves empty "
        "positions (None) where it makes fewer than max_fan_out"
    ),
    "ObjectDataset": (
        "its elements come from a Python object's __getitem__, which jax cannot trace"
    ),
    "ZippedDataset": "zip has no device form yet; map over one dataset that holds both",
}
"""Why a stage kind cannot run on device, by class name."""


@dataclasses.dataclass
class Compiler:
    """Compiles one pipeline in one integer mode, collecting the arrays its programs read."""

    mode: IntMode
    rules: dict[type, Rule]
    arrays: list[Any] = dataclasses.field(default_factory=list)

    def add(self, array: Any) -> int:
        """Keeps `array` as a leaf of the compiled dataset; returns its place in `arrays`.

        An array kept already (the same object: a source compiled again for
        another bound) is kept once.
        """
        for place, kept in enumerate(self.arrays):
            if kept is array:
                return place
        self.arrays.append(array)
        return len(self.arrays) - 1

    def compile(self, ds: Dataset[Any], bound: int) -> Program:
        """The program of `ds`, asked for positions up to `bound`.

        Raises:
            NotOnDeviceError: naming the first stage without a device form.
            UnrepresentableError: where the integer mode cannot be exact.
        """
        if ds.transparent:  # timing and other wrappers that change nothing
            return self.compile(ds.parents[0], bound)
        rule = self._rule(ds)
        if ds.length == 0:
            raise NotOnDeviceError(
                f"to_jax cannot run the empty dataset {ds.describe_stage()!r}: there is "
                "no element to give at any position."
            )
        require(
            not self.wide(ds, bound) or getattr(rule, "takes_wide_offsets", False),
            ds.describe_stage(),
            f"its positions within an epoch reach {offset_bound(ds.length, bound)}",
            self.mode,
        )
        return rule(self, ds, bound)

    def wide(self, ds: Dataset[Any], bound: int) -> bool:
        """Whether `ds`'s offsets, asked up to `bound`, are `Wide` pairs (see `wide_offsets`)."""
        return wide_offsets(self.mode, ds.length, bound)

    def _rule(self, ds: Dataset[Any]) -> Rule:
        for kind in type(ds).__mro__:
            rule = self.rules.get(kind)
            if rule is not None:
                return rule
        name = type(ds).__name__
        reason = REASONS.get(name, "this stage kind has no device form")
        raise NotOnDeviceError(
            f"to_jax cannot run the stage {ds.describe_stage()!r} ({name}): {reason}."
        )

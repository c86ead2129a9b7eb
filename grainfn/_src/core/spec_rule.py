"""How `grainfn.fn.element_spec` infers a stage's elements: a declaration a stage makes.

A stage class names its rule in its class attribute `spec_rule`, a member of
`SpecRule`; `grainfn._src.inspect.element_spec.RULES` holds what each rule
does. A rule is a member, never a string: a misspelt rule fails when its
class is made (`grainfn._src.core.declarations`), not later as "unsupported".
"""

from __future__ import annotations

import enum


class SpecRule(enum.Enum):
    """The rules by which `fn.element_spec` infers a stage's elements from its parents.

    Attributes:
        UNKNOWN: It cannot: the elements are known only by reading them (the default).
        PARENT: The first parent's spec (stages that move, drop or route elements).
        RANGE: A scalar int64 (`range`).
        OBJECT: The `_element_spec` of the wrapped object, if its class has one.
        FIRST_DATASET: The spec of the first dataset an interleave reads.
        ZIPPED: The tuple of the parents' specs.
        MAPPED: What the transformation's `output_spec` says of the parent's spec.
        BATCHED: A leading batch axis on every leaf, or what a custom `batch_fn` says.
        REBATCHED: The parent's leaves, with their leading axis the new batch size.

    Examples:
        >>> SpecRule.PARENT.infers, SpecRule.UNKNOWN.infers
        (True, False)
    """

    UNKNOWN = "unknown"
    PARENT = "parent"
    RANGE = "range"
    OBJECT = "object"
    FIRST_DATASET = "first_dataset"
    ZIPPED = "zipped"
    MAPPED = "mapped"
    BATCHED = "batched"
    REBATCHED = "rebatched"

    @property
    def infers(self) -> bool:
        """Whether the rule infers a spec: every rule but UNKNOWN has its inference."""
        return self is not SpecRule.UNKNOWN

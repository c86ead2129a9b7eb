"""The options of a packing stage, checked once and kept in a frozen record.

`PackSpec` holds everything that decides what a packing stage yields: the
features and their packed lengths, the number of bins, the placement rule, the
row shuffle, meta features, alignment, padding and the limit on sequences per
bin. `pack_spec` builds one from Grain's arguments and says clearly what is
wrong with a bad one. A top-level feature may be a tree (a dict, list or
tuple nesting of packed lengths): each of its leaves is packed on its own, in
JAX's leaf order (`grainfn._src.packing.trees`).
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from grainfn._src.core import validate
from grainfn._src.packing.trees import leaf_paths, positive_leaves, rebuild, where

if TYPE_CHECKING:  # Unpack is in typing from Python 3.11 on
    from typing_extensions import Unpack

STRATEGIES = ("first_fit", "best_fit")
"""The placement rules: the first bin with room, or the fullest bin with room."""

SEGMENT_IDS, POSITIONS = "_segment_ids", "_positions"
"""Suffixes of the two integer features each packed (non-meta) feature gains."""


@dataclasses.dataclass(frozen=True)
class PackSpec:
    """What a packing stage packs and how. Build one with `pack_spec`.

    Each leaf of a packed feature is packed on its own: it has its own
    capacity in a bin, alignment and padding. A flat feature is one leaf; a
    nested feature (a tree in `length_struct`) has one leaf per int of its
    tree. Leaves come feature by feature, in the order of `features`, and
    within a feature in JAX's order (`paths`).

    Attributes:
        strategy: "first_fit" or "best_fit".
        features: The features that are packed into bins, sorted by name.
        lengths: Each leaf's packed length, the capacity of a bin.
        num_bins: How many bins one block packs into.
        seed: Seeds the row shuffle; block b's rows use `seed + rows emitted before b`.
        shuffle_bins: Whether the rows of a block come out shuffled.
        group_by: The output feature whose per-row mean of distinct nonzero
            values orders the shuffled rows, or None.
        meta_features: Features that get no segment ids and positions, in the
            order given. Those in `features` are packed and padded; the others
            come out as the list of values of the elements in each row.
        alignments: Each leaf's alignment: the next element in a bin starts
            at a multiple of it.
        paddings: Each leaf's padding value, or None for zeros.
        max_sequences_per_bin: The most elements one bin takes, or None.
        trees: The tree of each nested feature (dicts' keys sorted, each leaf
            its packed length); None when no feature is nested.
    """

    strategy: str
    features: tuple[str, ...]
    lengths: tuple[int, ...]
    num_bins: int
    seed: int = 0
    shuffle_bins: bool = True
    group_by: str | None = None
    meta_features: tuple[str, ...] = ()
    alignments: tuple[int, ...] | None = None
    paddings: tuple[Any, ...] | None = None
    max_sequences_per_bin: int | None = None
    trees: Mapping[str, Any] | None = dataclasses.field(default=None, hash=False)

    @property
    def segmented(self) -> tuple[str, ...]:
        """The packed features that gain `_segment_ids` and `_positions`."""
        return tuple(f for f in self.features if f not in self.meta_features)

    @property
    def listed(self) -> tuple[str, ...]:
        """The meta features that are not packed: one list of values per row."""
        return tuple(f for f in self.meta_features if f not in self.features)

    @property
    def output_keys(self) -> tuple[str, ...]:
        """The keys of a packed element, sorted."""
        extra = [f + suffix for f in self.segmented for suffix in (SEGMENT_IDS, POSITIONS)]
        return tuple(sorted((*self.features, *self.listed, *extra)))

    @property
    def tree_keys(self) -> frozenset[str]:
        """The keys of a packed element whose values are trees: a nested feature's outputs."""
        trees = self.trees or {}
        made = ("", SEGMENT_IDS, POSITIONS)
        return frozenset(
            f + suffix for f in trees for suffix in (made if f in self.segmented else ("",))
        )

    @functools.cached_property
    def paths(self) -> tuple[tuple[Any, ...], ...]:
        """Each leaf's path: `(feature,)` for a flat feature, `(feature, key, ...)` in a tree."""
        trees = self.trees or {}
        return tuple(
            path
            for f in self.features
            for path in ([p for p, _ in leaf_paths(trees[f], (f,))] if f in trees else [(f,)])
        )

    def by_feature(self, leaves: Sequence[Any]) -> dict[str, Any]:
        """Per-leaf values as a dict from feature to its value, or to a tree for a nested one.

        Examples:
            >>> spec = pack_spec("first_fit", {"b": 4, "a": {"y": 3, "x": 2}}, 2)
            >>> spec.lengths, spec.by_feature(spec.lengths)
            ((2, 3, 4), {'a': {'x': 2, 'y': 3}, 'b': 4})
        """
        trees, values = self.trees or {}, iter(leaves)
        return {f: rebuild(trees[f], values) if f in trees else next(values) for f in self.features}

    def stage_line(self) -> str:
        """The stage this spec configures, as one line, naming every option not at its default."""
        parts = [
            repr(self.by_feature(self.lengths)),
            f"num_packing_bins={self.num_bins}",
            f"seed={self.seed}",
        ]
        if not self.shuffle_bins:
            parts.append("shuffle_bins=False")
        if self.group_by is not None:
            parts.append(f"shuffle_bins_group_by_feature={self.group_by!r}")
        if self.meta_features:
            parts.append(f"meta_features={list(self.meta_features)!r}")
        if self.alignments is not None:
            parts.append(f"pack_alignment_struct={self.by_feature(self.alignments)!r}")
        if self.paddings is not None:
            parts.append(f"padding_struct={self.by_feature(self.paddings)!r}")
        if self.max_sequences_per_bin is not None:
            parts.append(f"max_sequences_per_bin={self.max_sequences_per_bin}")
        return f"{self.strategy}_pack({', '.join(parts)})"


class PackOptions(TypedDict, total=False):
    """The optional arguments of every packing stage, named as in Grain.

    Attributes:
        seed: Seeds the row shuffle (an integer >= 0; default 0).
        shuffle_bins: Whether a block's rows come out shuffled (default True).
        shuffle_bins_group_by_feature: An output feature; the shuffled rows are
            sorted by its per-row mean of distinct nonzero values first.
        meta_features: Features without segment ids and positions: packed and
            padded if in `length_struct`, else the list of the row's values.
        pack_alignment_struct: With `length_struct`'s structure (its keys, and a
            nested feature's tree), the elements of a row start at multiples of
            each leaf; None for 1.
        padding_struct: With `length_struct`'s structure, each leaf's padding
            value (a scalar, or None for zeros); None for zeros.
        max_sequences_per_bin: The most elements one row takes; None for no limit.
    """

    seed: int
    shuffle_bins: bool
    shuffle_bins_group_by_feature: str | None
    meta_features: Sequence[str]
    pack_alignment_struct: Mapping[str, Any] | None
    padding_struct: Mapping[str, Any] | None
    max_sequences_per_bin: int | None


DEFAULT_OPTIONS: PackOptions = {
    "seed": 0,
    "shuffle_bins": True,
    "shuffle_bins_group_by_feature": None,
    "meta_features": (),
    "pack_alignment_struct": None,
    "padding_struct": None,
    "max_sequences_per_bin": None,
}
"""The value of each `PackOptions` option left out."""


def pack_spec(
    strategy: str,
    length_struct: Mapping[str, Any],
    num_packing_bins: int,
    **options: Unpack[PackOptions],
) -> PackSpec:
    """Checks Grain's packing arguments and returns them as a `PackSpec`.

    Args:
        strategy: "first_fit" or "best_fit".
        length_struct: A dict from each feature to pack to its packed length,
            or to a tree (a dict, list or tuple nesting) of packed lengths.
        num_packing_bins: How many bins a block packs into (>= 1).
        **options: The `PackOptions`.

    Returns:
        The checked options.

    Raises:
        TypeError, ValueError: naming the bad argument and what is allowed.

    Examples:
        >>> spec = pack_spec("first_fit", {"targets": 8, "inputs": 8}, 4)
        >>> spec.features, spec.lengths
        (('inputs', 'targets'), (8, 8))
        >>> pack_spec("first_fit", {"inputs": 0}, 4)
        Traceback (most recent call last):
        ...
        ValueError: length_struct['inputs'] must be a positive integer, got 0.
        >>> nested = pack_spec("best_fit", {"a": {"y": 4, "x": [2, 3]}}, 4, meta_features=["a"])
        >>> nested.paths, nested.lengths
        ((('a', 'x', 0), ('a', 'x', 1), ('a', 'y')), (2, 3, 4))
    """
    if strategy not in STRATEGIES:
        raise ValueError(f"strategy must be one of {STRATEGIES}, got {strategy!r}.")
    unknown = sorted(set(options) - set(DEFAULT_OPTIONS))
    if unknown:
        raise TypeError(
            f"{strategy}_pack got an unknown option {unknown[0]!r}; the options are "
            f"length_struct, num_packing_bins and {', '.join(DEFAULT_OPTIONS)}."
        )
    given: PackOptions = {**DEFAULT_OPTIONS, **options}
    pack_alignment_struct = given["pack_alignment_struct"]
    padding_struct = given["padding_struct"]
    max_sequences_per_bin = given["max_sequences_per_bin"]
    features, lengths, trees = _lengths(length_struct)
    bins = validate.check_positive_int(num_packing_bins, "num_packing_bins", validate.INT64_MAX)
    alignments = paddings = None
    if pack_alignment_struct is not None:
        struct, check = pack_alignment_struct, validate.check_positive_int
        alignments = _per_leaf(struct, "pack_alignment_struct", features, trees, check)
    if padding_struct is not None:
        paddings = _per_leaf(padding_struct, "padding_struct", features, trees, _padding)
    if max_sequences_per_bin is not None:
        max_sequences_per_bin = validate.check_positive_int(
            max_sequences_per_bin, "max_sequences_per_bin"
        )
    spec = PackSpec(
        strategy=strategy,
        features=features,
        lengths=lengths,
        num_bins=bins,
        seed=validate.check_nonnegative_int(given["seed"], "seed"),
        shuffle_bins=validate.check_flag(given["shuffle_bins"], "shuffle_bins"),
        group_by=given["shuffle_bins_group_by_feature"],
        meta_features=_meta_features(given["meta_features"]),
        alignments=alignments,
        paddings=paddings,
        max_sequences_per_bin=max_sequences_per_bin,
        trees=trees or None,
    )
    _check_names(spec)
    return spec


_TREES = "a dict, list or tuple nesting of positive ints"
"""What a feature of `length_struct` may be besides one positive int."""


def _lengths(
    length_struct: Any,
) -> tuple[tuple[str, ...], tuple[int, ...], dict[str, Any]]:
    """The sorted features, each leaf's packed length, and the tree of each nested feature."""
    if not isinstance(length_struct, Mapping):
        raise TypeError(
            "length_struct must be a dict from feature name to its packed length (a positive "
            f"int, or {_TREES}), got {validate.short_repr(length_struct)} of type "
            f"{type(length_struct).__name__}."
        )
    mapping = _feature_map(length_struct, "length_struct", None)
    features = tuple(sorted(mapping))
    lengths: list[int] = []
    trees: dict[str, Any] = {}
    for name in features:
        value = mapping[name]
        if not isinstance(value, (dict, list, tuple)):
            what = f"length_struct[{name!r}]"
            lengths.append(validate.check_positive_int(value, what, validate.INT32_MAX))
            continue
        leaves = positive_leaves(
            value, (name,), f"a feature of length_struct is a positive int or {_TREES}."
        )
        if not leaves:
            raise ValueError(
                f"length_struct[{name!r}] is {value!r}, a tree without leaves: a feature must "
                f"have something to pack, a positive int or {_TREES}."
            )
        lengths.extend(length for _, length in leaves)
        trees[name] = rebuild(value, iter(length for _, length in leaves))
    return features, tuple(lengths), trees


def _feature_map(value: Any, what: str, keys: tuple[str, ...] | None) -> dict[str, Any]:
    """`value` as a dict from feature name; with `keys`, exactly those names."""
    if not isinstance(value, Mapping):
        raise TypeError(
            f"{what} must be a dict from feature name to a value, got {value!r} of type "
            f"{type(value).__name__}."
        )
    if not value:
        raise ValueError(f"{what} must name at least one feature, got an empty dict.")
    for name in value:
        if not isinstance(name, str):
            raise TypeError(f"{what} keys must be feature names (str), got {name!r}.")
    if keys is not None and sorted(value) != list(keys):
        raise ValueError(
            f"{what} must have the keys of length_struct, {list(keys)}; got {sorted(value)}."
        )
    return dict(value)


def _per_leaf(
    value: Any,
    what: str,
    features: tuple[str, ...],
    trees: Mapping[str, Any],
    check: Callable[[Any, str], Any],
) -> tuple[Any, ...]:
    """`value`, a struct like `length_struct` (alignments, paddings), as one value per leaf.

    A flat feature takes one value; a nested feature a tree of its structure.
    """
    mapping = _feature_map(value, what, features)
    out = []
    for name in features:
        item = mapping[name]
        if name not in trees:
            if isinstance(item, (Mapping, list, tuple)):
                raise TypeError(
                    f"{what}[{name!r}] must be a single value (length_struct[{name!r}] is one "
                    f"length), got {item!r}."
                )
            out.append(check(item, f"{what}[{name!r}]"))
            continue
        wanted = [path for path, _ in leaf_paths(trees[name], (name,))]
        leaves = leaf_paths(item, (name,), what) if isinstance(item, (dict, list, tuple)) else []
        if [path for path, _ in leaves] != wanted:
            raise ValueError(
                f"{what}[{name!r}] must have the structure of length_struct[{name!r}], "
                f"{trees[name]!r}, with one value per leaf; got {item!r}."
            )
        out.extend(check(leaf, f"{what}{where(path)}") for path, leaf in leaves)
    return tuple(out)


def _meta_features(meta_features: Any) -> tuple[str, ...]:
    if isinstance(meta_features, str) or not isinstance(meta_features, Sequence):
        raise TypeError(
            f"meta_features must be a list of feature names, got {meta_features!r}; "
            "for one feature write [name]."
        )
    for name in meta_features:
        if not isinstance(name, str):
            raise TypeError(f"meta_features must hold feature names (str), got {name!r}.")
    if len(set(meta_features)) != len(meta_features):
        raise ValueError(f"meta_features names a feature twice: {list(meta_features)!r}.")
    return tuple(meta_features)


def _padding(value: Any, what: str) -> Any:
    if value is not None and (isinstance(value, Mapping) or np.ndim(value) != 0):
        raise TypeError(f"{what} must be a scalar or None (zeros), got {value!r}.")
    return value


def _check_names(spec: PackSpec) -> None:
    """Refuses output keys that clash, and a group-by feature that is not one flat output key."""
    made = [f + suffix for f in spec.segmented for suffix in (SEGMENT_IDS, POSITIONS)]
    clash = sorted(set(made) & {*spec.features, *spec.listed})
    if clash:
        raise ValueError(
            f"The packed feature {clash[0]!r} clashes with the segment ids or positions "
            "packing adds for another feature; rename it, or mark it as a meta feature."
        )
    if spec.group_by is not None and spec.group_by not in spec.output_keys:
        raise ValueError(
            f"shuffle_bins_group_by_feature must be a feature of the packed elements, one of "
            f"{list(spec.output_keys)}; got {spec.group_by!r}."
        )
    if spec.group_by in spec.tree_keys:
        trees = spec.trees or {}
        outputs = {f + suffix: f for f in trees for suffix in ("", SEGMENT_IDS, POSITIONS)}
        feature = outputs[spec.group_by]
        raise ValueError(
            f"shuffle_bins_group_by_feature is {spec.group_by!r}, which is a tree: "
            f"length_struct[{feature!r}] is nested, {trees[feature]!r}. "
            "Group by a feature whose packed value is one array (a flat feature of "
            "length_struct, or its segment ids or positions) or a meta feature not in "
            "length_struct."
        )

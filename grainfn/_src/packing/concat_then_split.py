"""concat_then_split: sequences laid end to end and cut into fixed-length rows.

Rows are made in rounds, exactly as in Grain: a round starts an empty row with
the part of an element carried from the last round, adds elements until one
does not fit, cuts that one and carries its rest on. With
`split_full_length_features=False`, an element that fills a row by itself is
queued as its own row behind the round's row instead. The state is where the
round started (the parent's state before the carried element, and how many of
its tokens were packed) and how many of the round's rows were returned:
resuming reads the round again, never data from the state.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping
from typing import Any, ClassVar, Generic, NamedTuple

import numpy as np
import toolz

from grainfn._src.core import state as records
from grainfn._src.core import validate
from grainfn._src.core.dataset import Dataset
from grainfn._src.core.grain_state import Beneath, GrainState, OwnGrainState, read_count, read_field
from grainfn._src.core.reading import as_stream
from grainfn._src.core.stream import BaseCursor, Cursor, OneParentStream, Stream

# What of an element fits a row, and the argument checks: the stage's pure parts.

Features = tuple[np.ndarray, ...]
"""One element's features in `length_struct` order, each at least 1-d (a scalar has length 1)."""

Piece = tuple[Features, tuple[int, ...], tuple[int, ...]]
"""A part of an element in a row: its features, where each part starts, and its length."""


def check_length_struct(length_struct: Any) -> tuple[tuple[str, int], ...]:
    """`length_struct` as `(feature, row length)` pairs in its order, after checking it."""
    if not isinstance(length_struct, Mapping) or not length_struct:
        raise TypeError(
            "length_struct must be a non-empty dict from feature name to row length, "
            f"got {length_struct!r}."
        )
    out = []
    for name, length in length_struct.items():
        if not isinstance(name, str):
            raise TypeError(f"length_struct keys must be feature names (str), got {name!r}.")
        name_of = f"length_struct[{name!r}]"
        out.append((name, validate.check_positive_int(length, name_of, validate.INT32_MAX)))
    return tuple(out)


def check_names(
    names: Any, what: str, length_struct: tuple[tuple[str, int], ...]
) -> tuple[str, ...]:
    """`names` in `length_struct` order, after checking each is one of its features."""
    if isinstance(names, (str, bytes)) or not isinstance(names, Collection):
        raise TypeError(f"{what} must be a collection of feature names, got {names!r}.")
    known = [name for name, _ in length_struct]
    unknown = sorted(map(repr, set(names) - set(known)))
    if unknown:
        raise ValueError(
            f"{what} names {', '.join(unknown)}, not a feature of length_struct; "
            f"the features are {known}."
        )
    return tuple(name for name in known if name in names)


def fit(
    lengths: tuple[int, ...],
    offsets: tuple[int, ...],
    free: list[int],
    meta: tuple[bool, ...],
) -> tuple[tuple[int, ...], tuple[int, ...] | None] | None:
    """What of an element goes into a row with `free` slots per feature.

    A token feature takes what is left of it from `offsets` on, at most its
    free slots; a meta feature goes in whole or not at all.

    Returns:
        None if the element cannot go into the row (a meta feature does not
        fit, or it would be cut with no token in it); otherwise the tokens
        taken per feature, and the offsets of its rest (0 for meta features),
        None if all of it fits.

    Examples:
        >>> fit((5, 1), (0, 0), [3, 2], (False, True))
        ((3, 1), (3, 0))
        >>> fit((2, 1), (0, 0), [3, 2], (False, True))
        ((2, 1), None)
        >>> fit((5, 3), (0, 0), [3, 2], (False, True)) is None
        True
    """
    takes, rest, cut = [], [], False
    for length, offset, slots, is_meta in zip(lengths, offsets, free, meta):
        left = length - offset
        if left <= slots:
            takes.append(left)
            rest.append(0 if is_meta else length)
        elif is_meta:
            return None  # a meta feature does not fit
        else:
            cut = True
            takes.append(slots)
            rest.append(offset + slots)
    if not cut:
        return tuple(takes), None
    if not any(take for take, is_meta in zip(takes, meta) if not is_meta):
        return None  # no token of it fits
    return tuple(takes), tuple(rest)


def is_full_length(lengths: tuple[int, ...], targets: tuple[int, ...]) -> bool:
    """Whether an element fills a row by itself: no feature too long, one exactly long enough.

    Examples:
        >>> is_full_length((4, 1), (4, 2)), is_full_length((4, 3), (4, 2))
        (True, False)
    """
    return all(n <= t for n, t in zip(lengths, targets)) and any(
        n == t for n, t in zip(lengths, targets)
    )


def features_of(element: Any, names: tuple[str, ...]) -> Features:
    """The element's features in `names` order; ValueError unless it has exactly those.

    Examples:
        >>> features_of({"b": 7, "a": [1, 2]}, ("a", "b"))
        (array([1, 2]), array([7]))
    """
    if (type(element) is dict or isinstance(element, Mapping)) and len(element) == len(names):
        try:
            values = [element[name] for name in names]
        except KeyError:
            pass
        else:
            return tuple(
                v if type(v) is np.ndarray and v.ndim else np.atleast_1d(np.asarray(v))
                for v in values
            )
    keys = f"a dict with keys {sorted(map(str, element))}" if isinstance(element, Mapping) else ""
    raise ValueError(
        f"concat_then_split needs flat dicts with exactly the features of length_struct "
        f"{sorted(names)}, got {keys or records.describe_value(element)}."
    )


@records.register
class ConcatThenSplitState(NamedTuple, Generic[records.Parent]):
    """State of `concat_then_split`: where the current round started, and its rows returned.

    Attributes:
        emitted: How many rows of the round were returned.
        offsets: Per token feature (in `length_struct` order), how many tokens of
            the element carried into the round were packed before it; all 0
            when the round starts with a new element.
        parent: The parent's state before the carried element (or before the
            round's first element).
    """

    emitted: int
    offsets: tuple[int, ...]
    parent: records.Parent


_NO_REMAINDER = [-1, -1]
"""Grain's slice of a token feature in `remainder_slices` when no element is being cut."""


def _read_grain_state(
    stream: Any, grains: Any, path: str, beneath: Beneath
) -> ConcatThenSplitState[Any]:
    """Grain's state, taken where a round starts, as grainfn's.

    The parent before the element being cut, then `n` rows of the round
    returned. A cut element's slice of a token feature is (tokens packed
    before, its length): the start is grainfn's offset. Only read: Grain's
    slices name the cut element's length, which grainfn's state does not hold.
    """
    slices = read_field(grains, "remainder_slices", path)
    features = stream.token_features
    if not isinstance(slices, dict) or sorted(slices) != sorted(features):
        raise ValueError(
            f"Grain's {path}.remainder_slices must map the token features {list(features)} "
            f"to slices, got {records.describe_value(slices)}: it is the state of another "
            "pipeline."
        )
    offsets = tuple(
        _slice_start(slices[name], f"{path}.remainder_slices[{name!r}]") for name in features
    )
    emitted = read_count(grains, "elements_from_buffer_after_checkpoint", path)
    parent = beneath(
        stream.parent, read_field(grains, "parent_state", path), f"{path}.parent_state"
    )
    return ConcatThenSplitState(emitted, offsets, parent)


def _slice_start(value: Any, where: str) -> int:
    if isinstance(value, (list, tuple)) and len(value) == 2:
        if list(value) == _NO_REMAINDER:
            return 0
        start, stop = value
        if records.is_saved_count(start) and records.is_saved_count(stop) and start <= stop:
            return start
    raise ValueError(
        f"Grain's {where} must be a slice [start, stop] with 0 <= start <= stop, or [-1, -1] "
        f"for no remainder, got {records.describe_value(value)}."
    )


@dataclasses.dataclass(frozen=True, repr=False)
class ConcatThenSplitStream(OneParentStream[Any, ConcatThenSplitState[Any]]):
    """Elements concatenated feature by feature and split into rows of fixed lengths.

    Build one with `concat_then_split`, which checks the arguments.
    """

    grain_state: ClassVar[GrainState | None] = OwnGrainState(
        "ConcatThenSplitIterDataset", _read_grain_state
    )

    length_struct: tuple[tuple[str, int], ...]
    meta_features: tuple[str, ...] = ()
    split_full_length_features: bool = True
    bos_features: tuple[str, ...] = ()
    bos_token_id: int | None = None

    @property
    def names(self) -> tuple[str, ...]:
        """The feature names, in `length_struct` order."""
        return tuple(name for name, _ in self.length_struct)

    @property
    def token_features(self) -> tuple[str, ...]:
        """The features that are cut and get segment ids and positions (not meta)."""
        return tuple(name for name in self.names if name not in self.meta_features)

    def init(self) -> ConcatThenSplitState:
        return ConcatThenSplitState(0, (0,) * len(self.token_features), self.parent.init())

    def open(self, state: Any) -> Cursor:
        return _ConcatThenSplitCursor(self, self.parent.open(state.parent), state)

    def check_state(self, state: Any, path: str = "") -> None:
        if not isinstance(state, ConcatThenSplitState):  # check_record names what it got
            records.check_record(state, ConcatThenSplitState, self.describe_stage(), path)
        where, count = f"{path}." if path else "", len(self.token_features)
        if not _is_count(state.emitted):
            raise ValueError(
                f"State field {where}emitted must be an integer >= 0, got "
                f"{records.describe_value(state.emitted)}."
            )
        offsets = state.offsets
        if not (
            isinstance(offsets, tuple) and len(offsets) == count and all(map(_is_count, offsets))
        ):
            raise ValueError(
                f"State field {where}offsets must be {count} integers >= 0 (one per token "
                f"feature {list(self.token_features)}), got {records.describe_value(offsets)}."
            )
        self.parent.check_state(state.parent, f"{where}parent")

    def describe_stage(self) -> str:
        options = [
            f"meta_features={list(self.meta_features)}" if self.meta_features else "",
            "" if self.split_full_length_features else "split_full_length_features=False",
            f"bos_features={list(self.bos_features)}" if self.bos_features else "",
            "" if self.bos_token_id is None else f"bos_token_id={self.bos_token_id}",
        ]
        arguments = [repr(dict(self.length_struct)), *filter(None, options)]
        return f"concat_then_split({', '.join(arguments)})"


@toolz.curry
def concat_then_split(
    length_struct: Mapping[str, int],
    data: Stream[Any] | Dataset[Any],
    *,
    meta_features: Collection[str] = (),
    split_full_length_features: bool = True,
    bos_features: Collection[str] = (),
    bos_token_id: int | None = None,
) -> Stream[dict[str, np.ndarray]]:
    """Elements laid end to end per feature and cut into rows of `length_struct` slots.

    A row is filled with consecutive elements; the element that does not fit
    is cut and its rest starts the next row, so no slot is wasted but at the
    end. Each token feature `name` also gets `name_segment_ids` (the part's
    number in the row, from 1; 0 for padding) and `name_positions` (the
    index within the part), both int32. The output is Grain's
    `ConcatThenSplitIterDataset`.

    Args:
        length_struct: Row length per feature; elements must have exactly
            these features (a scalar counts as a sequence of length 1).
        data: A stream of flat dicts of sequences (numpy arrays, lists); a
            dataset is read in order.
        meta_features: Features that are never cut: each part of an element
            repeats them, and a row ends where one does not fit. They get no
            segment ids or positions.
        split_full_length_features: If False, an element with a feature of
            exactly its row length (none longer) is not cut but becomes its
            own row, queued behind the row being filled.
        bos_features: Token features whose first token in each part (also the
            rest of a cut element) becomes `bos_token_id`.
        bos_token_id: The BOS token; needs `bos_features`.

    Returns:
        A stream of dicts of arrays of fixed shapes. Its state holds only
        positions and counters.

    Examples:
        >>> from grainfn import fn
        >>> docs = fn.source([{"tokens": [1, 2, 3]}, {"tokens": [4, 5, 6, 7]}, {"tokens": [8]}])
        >>> rows = list(fn.iterate(concat_then_split({"tokens": 5}, docs)))
        >>> [row["tokens"].tolist() for row in rows]
        [[1, 2, 3, 4, 5], [6, 7, 8, 0, 0]]
        >>> [row["tokens_segment_ids"].tolist() for row in rows]
        [[1, 1, 1, 2, 2], [1, 1, 2, 0, 0]]
        >>> [row["tokens_positions"].tolist() for row in rows]
        [[0, 1, 2, 0, 1], [0, 1, 0, 0, 0]]
    """
    stream = as_stream(data, "concat_then_split")
    lengths = check_length_struct(length_struct)
    meta = check_names(meta_features, "meta_features", lengths)
    bos = check_names(bos_features, "bos_features", lengths)
    if set(meta) & set(bos):
        raise ValueError(
            f"bos_features and meta_features must not overlap: {sorted(set(meta) & set(bos))} "
            "are in both. A meta feature is never cut, so it has no first token per part."
        )
    if bos_token_id is not None:
        bos_token_id = validate.check_integer(bos_token_id, "bos_token_id")
        if not -validate.INT64_MAX - 1 <= bos_token_id <= validate.INT64_MAX:
            raise ValueError(
                f"bos_token_id must be an integer in [-2**63, 2**63 - 1] (and fit the dtype of "
                f"the features it goes into), got {bos_token_id}."
            )
    if bool(bos) != (bos_token_id is not None):
        raise ValueError(
            f"bos_features={list(bos)} and bos_token_id={bos_token_id} go together: the token "
            "replaces the first token of each part of those features. Give both or neither."
        )
    split = validate.check_flag(split_full_length_features, "split_full_length_features")
    return ConcatThenSplitStream(stream, lengths, meta, split, bos, bos_token_id)


def _is_count(value: Any) -> bool:
    return isinstance(value, (int, np.integer)) and not isinstance(value, bool) and bool(value >= 0)


class _Carry(NamedTuple):
    """An element to add to a row: its features, the parent's state before it, what was packed."""

    features: Features
    lengths: tuple[int, ...]
    before: Any
    offsets: tuple[int, ...]


class _ConcatThenSplitCursor(BaseCursor):
    def __init__(self, stage: ConcatThenSplitStream, parent: Cursor, state: Any) -> None:
        self.stage, self.parent = stage, parent
        self.names = stage.names
        self.targets = tuple(length for _, length in stage.length_struct)
        self.meta = tuple(name in stage.meta_features for name in self.names)
        self.bos = tuple(name in stage.bos_features for name in self.names)
        self.tokens = [j for j, is_meta in enumerate(self.meta) if not is_meta]
        self.zeros = (0,) * len(self.names)
        self.arange = np.arange(max(self.targets), dtype=np.int32)
        self.rows: list[dict[str, np.ndarray]] = []
        self.index = 0  # rows of the round returned
        self.stopped = False
        self.carry: _Carry | None = None
        # The parent's state and the offsets (per feature) the current round started from.
        self.round_start: tuple[Any, tuple[int, ...]] = (state.parent, self.zeros)
        if any(state.offsets):
            self.carry = self._restore_carry(state)
        if state.emitted:
            self._round()
            if state.emitted > len(self.rows):
                raise ValueError(
                    f"State field emitted is {state.emitted}, but the round at this position "
                    f"makes {len(self.rows)} rows: the state belongs to another pipeline or the "
                    "data changed."
                )
            self.index = state.emitted

    def _restore_carry(self, state: Any) -> _Carry:
        try:
            features = features_of(self.parent.next(), self.names)
        except StopIteration:
            features = ()
        offsets = list(self.zeros)
        for j, offset in zip(self.tokens, state.offsets):
            if not features or offset > len(features[j]):
                raise ValueError(
                    f"State offsets {list(state.offsets)} point past the element at this "
                    "position: the state belongs to another pipeline or the data changed."
                )
            offsets[j] = offset
        return _Carry(features, tuple(map(len, features)), state.parent, tuple(offsets))

    def next(self) -> dict[str, np.ndarray]:
        while self.index >= len(self.rows):
            if self.stopped:
                raise StopIteration
            self._round()
        self.index += 1
        return self.rows[self.index - 1]

    def state(self) -> ConcatThenSplitState:
        if self.index < len(self.rows):
            before, offsets = self.round_start
            emitted = self.index
        elif self.carry is not None:
            before, offsets, emitted = self.carry.before, self.carry.offsets, 0
        else:
            before, offsets, emitted = self.parent.state(), self.zeros, 0
        return ConcatThenSplitState(emitted, tuple(offsets[j] for j in self.tokens), before)

    def children(self) -> tuple[Cursor, ...]:
        return (self.parent,)

    def _round(self) -> None:
        """Makes the next round's rows: one from consecutive elements, then any queued whole."""
        pieces: list[Piece] = []
        whole: list[dict[str, np.ndarray]] = []
        free = list(self.targets)
        carry, self.carry = self.carry, None
        if carry is None:
            self.round_start = (self.parent.state(), self.zeros)
        else:
            self.round_start = (carry.before, carry.offsets)
            self.carry = self._add(pieces, free, *carry)
        parent, names = self.parent, self.names
        keep_whole = not self.stage.split_full_length_features
        while self.carry is None:
            before = parent.state()
            try:
                features = features_of(parent.next(), names)
            except StopIteration:
                self.stopped = True
                break
            lengths = tuple(map(len, features))
            if keep_whole and is_full_length(lengths, self.targets):
                whole.append(self._pack([(features, self.zeros, lengths)]))
                continue
            self.carry = self._add(pieces, free, features, lengths, before, self.zeros)
        self.rows = ([self._pack(pieces)] if pieces else []) + whole
        self.index = 0

    def _add(
        self,
        pieces: list[Piece],
        free: list[int],
        features: Features,
        lengths: tuple[int, ...],
        before: Any,
        offsets: tuple[int, ...],
    ) -> _Carry | None:
        """Adds what fits of an element to the row; returns the rest, or None if all fit."""
        fitted = fit(lengths, offsets, free, self.meta)
        if fitted is None:  # the element starts the next row
            for name, length, target in zip(self.names, lengths, self.targets):
                if not pieces and name in self.stage.meta_features and length > target:
                    raise ValueError(
                        f"Meta feature {name!r} has length {length}, more than its row length "
                        f"length_struct[{name!r}]={target}. Meta features are never cut: raise "
                        "its length in length_struct, or drop it from meta_features."
                    )
            return _Carry(features, lengths, before, offsets)
        takes, rest = fitted
        pieces.append((features, offsets, takes))
        for j, take in enumerate(takes):
            free[j] -= take
        return None if rest is None else _Carry(features, lengths, before, rest)

    def _pack(self, pieces: list[Piece]) -> dict[str, np.ndarray]:
        """The row of `pieces` one after another, zero-padded, with segment ids and positions."""
        row: dict[str, np.ndarray] = {}
        for j, name in enumerate(self.names):
            try:
                row.update(self._pack_feature(j, pieces))
            except ValueError as error:
                shape = pieces[0][0][j].shape[1:]
                raise ValueError(
                    f"Feature {name!r} cannot be packed: {error}. Every element's {name!r} must "
                    f"have the shape of the row's first one after the first axis, {shape}."
                ) from error
        return row

    def _pack_feature(self, j: int, pieces: list[Piece]) -> dict[str, np.ndarray]:
        name, length, first = self.names[j], self.targets[j], pieces[0][0][j]
        values = np.zeros((length, *first.shape[1:]), first.dtype)
        end = 0
        if self.meta[j]:
            for features, _, takes in pieces:
                values[end : end + takes[j]] = features[j]
                end += takes[j]
            return {name: values}
        segment_ids = np.zeros(length, np.int32)
        positions = np.zeros(length, np.int32)
        for segment_id, (features, starts, takes) in enumerate(pieces, 1):
            take = takes[j]
            if take:
                values[end : end + take] = features[j][starts[j] : starts[j] + take]
                segment_ids[end : end + take] = segment_id
                positions[end : end + take] = self.arange[:take]
                if self.bos[j]:
                    values[end] = self.stage.bos_token_id
                end += take
        return {name: values, f"{name}_segment_ids": segment_ids, f"{name}_positions": positions}

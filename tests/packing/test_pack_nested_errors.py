"""Nested features in first-fit and best-fit packing: refusals name the path and what is allowed.

Options are refused when the stage is built (in the core and the facade
alike), elements of another structure while reading.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from packing.test_stream import STRATEGIES, grain_packed, ours

import grainfn as grain
from grainfn import fn
from grainfn._src.packing import best_fit_pack, first_fit_pack

NESTED = {"a": {"x": 4, "y": 4}, "b": 4}


@pytest.mark.parametrize(
    ("options", "error", "message"),
    [
        (
            {"length_struct": ({"x": 5}, 4)},
            TypeError,
            r"length_struct must be a dict from feature name to its packed length \(a positive "
            r"int, or a dict, list or tuple nesting of positive ints\), got \(\{'x': 5\}, 4\) of "
            r"type tuple\.",
        ),
        (
            {"length_struct": {"a": {1: 4, "1": 4}}},
            TypeError,
            r"length_struct\['a'\] has keys that cannot be sorted, \[1, '1'\]; use keys of one",
        ),
        (
            {"length_struct": {"a": {"x": 0}}},
            ValueError,
            r"length_struct\['a'\]\['x'\] must be a positive integer, got 0\.",
        ),
        (
            {"length_struct": {"a": {"x": [4, None]}}},
            TypeError,
            r"length_struct\['a'\]\['x'\]\[1\] must be a positive int, got None \(NoneType\); a "
            r"feature of length_struct is a positive int or a dict, list or tuple nesting",
        ),
        (
            {"length_struct": {"a": (4, True)}},
            TypeError,
            r"length_struct\['a'\]\[1\] must be a positive int, got True \(bool\)",
        ),
        (
            {"length_struct": {"a": {"x": {}}}},
            ValueError,
            r"length_struct\['a'\] is \{'x': \{\}\}, a tree without leaves",
        ),
        (
            {"length_struct": NESTED, "shuffle_bins_group_by_feature": "a"},
            ValueError,
            r"shuffle_bins_group_by_feature is 'a', which is a tree: length_struct\['a'\] is "
            r"nested, \{'x': 4, 'y': 4\}\. Group by a feature whose packed value is one array",
        ),
        (
            {"length_struct": NESTED, "shuffle_bins_group_by_feature": "a_segment_ids"},
            ValueError,
            r"shuffle_bins_group_by_feature is 'a_segment_ids', which is a tree",
        ),
        (
            {"length_struct": NESTED, "pack_alignment_struct": {"a": 2, "b": 1}},
            ValueError,
            r"pack_alignment_struct\['a'\] must have the structure of length_struct\['a'\], "
            r"\{'x': 4, 'y': 4\}, with one value per leaf; got 2\.",
        ),
        (
            {"length_struct": NESTED, "pack_alignment_struct": {"a": {"x": 2, "y": 0}, "b": 1}},
            ValueError,
            r"pack_alignment_struct\['a'\]\['y'\] must be a positive integer, got 0\.",
        ),
        (
            {"length_struct": NESTED, "padding_struct": {"a": {"x": 1, "z": 0}, "b": 1}},
            ValueError,
            r"padding_struct\['a'\] must have the structure of length_struct\['a'\]",
        ),
        (
            {"length_struct": NESTED, "padding_struct": {"a": {"x": np.ones(2), "y": 0}, "b": 1}},
            TypeError,
            r"padding_struct\['a'\]\['x'\] must be a scalar or None \(zeros\), got array",
        ),
        (
            {"length_struct": NESTED, "padding_struct": {"a": {"x": 1, "y": 0}, "b": {"c": 1}}},
            TypeError,
            r"padding_struct\['b'\] must be a single value \(length_struct\['b'\] is one length\)",
        ),
    ],
)
def test_bad_nested_options_are_refused_naming_the_path(
    options: dict[str, Any], error: type[Exception], message: str
) -> None:
    element = {"a": {"x": np.arange(2), "y": np.arange(1)}, "b": np.arange(2)}
    length_struct = options.pop("length_struct")
    with pytest.raises(error, match=message):
        first_fit_pack(length_struct, fn.source([element]), num_packing_bins=2, **options)
    with pytest.raises(error, match=message):
        grain.experimental.BestFitPackIterDataset(
            grain.MapDataset.source([element]).to_iter_dataset(),
            length_struct=length_struct,
            num_packing_bins=2,
            **options,
        )


@pytest.mark.parametrize(
    ("a", "message"),
    [
        (
            {"x": np.arange(2)},
            r"Elements must have the structure of length_struct: at element\['a'\] expected a "
            r"dict with keys \['x', 'y'\], got a dict with keys \['x'\]\.",
        ),
        (
            np.arange(2),
            r"at element\['a'\] expected a dict with keys \['x', 'y'\], got array\(\[0, 1\]\) "
            r"\(ndarray\)\.",
        ),
        (
            {"x": np.arange(2), "y": None},
            r"at element\['a'\]\['y'\] expected an array, got None \(NoneType\)\.",
        ),
        (
            {"x": np.arange(2), "y": {"z": np.arange(1)}},
            r"at element\['a'\]\['y'\] expected an array, got a dict with keys \['z'\]\.",
        ),
        (
            {"x": np.arange(7), "y": np.arange(1)},
            r"An element's feature a\['x'\] has length 7, more than its packed length 4 "
            r"\(length_struct\['a'\]\['x'\]\)\. Truncate elements before packing, to "
            r"element\['a'\]\['x'\]\[:4\] with a map\.",
        ),
    ],
)
@pytest.mark.parametrize("strategy", STRATEGIES)
def test_elements_that_differ_from_the_tree_are_refused_naming_the_path(
    strategy: str, a: Any, message: str
) -> None:
    good = {"a": {"x": np.arange(1), "y": np.arange(1)}, "b": np.arange(1)}
    combinator = first_fit_pack if strategy == "first_fit" else best_fit_pack
    stream = combinator(NESTED, fn.source([good, {"a": a, "b": np.arange(1)}]), num_packing_bins=2)
    with pytest.raises(ValueError, match=message):
        list(fn.iterate(stream))


@pytest.mark.grain
def test_sequences_of_another_length_are_refused_where_grain_drops_items() -> None:
    # Grain zips an element's tuple with length_struct's: it drops a longer tuple's extra items.
    elements = [{"a": (np.arange(2), np.arange(1), np.arange(3))}]
    options = {"length_struct": {"a": (4, 4)}, "num_packing_bins": 1, "meta_features": ["a"]}
    assert len(grain_packed("first_fit", elements, **options)) == 1
    with pytest.raises(ValueError, match=r"at element\['a'\] expected a sequence of 2, got \("):
        ours("first_fit", elements, **options)
    with pytest.raises(ValueError, match=r"at element\['a'\] expected a sequence of 2, got \["):
        ours("best_fit", [{"a": [np.arange(2)]}], **options)

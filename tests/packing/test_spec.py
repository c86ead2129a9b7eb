"""Tests for grainfn._src.packing.spec: packing options checked once into a frozen PackSpec."""

import dataclasses

import numpy as np
import pytest

from grainfn._src.packing.spec import PackSpec, pack_spec


def test_features_are_sorted_and_each_leaf_has_its_length() -> None:
    spec = pack_spec("first_fit", {"targets": 8, "inputs": 6}, 4)
    assert (spec.features, spec.lengths, spec.num_bins) == (("inputs", "targets"), (6, 8), 4)
    assert (spec.seed, spec.shuffle_bins, spec.trees) == (0, True, None)
    assert spec.paths == (("inputs",), ("targets",))
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.seed = 3  # type: ignore[misc]


def test_nested_features_have_one_leaf_per_int_in_jax_order() -> None:
    spec = pack_spec("best_fit", {"b": 4, "a": {"y": 3, "x": [2, 1]}}, 2)
    assert spec.paths == (("a", "x", 0), ("a", "x", 1), ("a", "y"), ("b",))
    assert spec.lengths == (2, 1, 3, 4)
    assert spec.by_feature(spec.lengths) == {"a": {"x": [2, 1], "y": 3}, "b": 4}
    assert spec.tree_keys == frozenset({"a", "a_segment_ids", "a_positions"})


def test_output_keys_add_segment_ids_and_positions_except_for_meta_features() -> None:
    spec = pack_spec("first_fit", {"x": 4, "m": 4}, 2, meta_features=["m", "doc_id"])
    assert spec.segmented == ("x",)
    assert spec.listed == ("doc_id",)
    assert spec.output_keys == ("doc_id", "m", "x", "x_positions", "x_segment_ids")


def test_per_leaf_options_follow_the_length_struct() -> None:
    spec = pack_spec(
        "first_fit",
        {"a": {"y": 4, "x": 4}, "b": 8},
        2,
        pack_alignment_struct={"a": {"x": 2, "y": 1}, "b": 4},
        padding_struct={"a": {"x": -1, "y": None}, "b": 0},
    )
    assert spec.alignments == (2, 1, 4)
    assert spec.paddings == (-1, None, 0)


def test_stage_line_names_every_option_that_is_not_its_default() -> None:
    plain = pack_spec("first_fit", {"x": 4}, 2)
    assert plain.stage_line() == "first_fit_pack({'x': 4}, num_packing_bins=2, seed=0)"
    spec = pack_spec(
        "best_fit",
        {"x": 4},
        2,
        seed=3,
        shuffle_bins=False,
        meta_features=["x"],
        pack_alignment_struct={"x": 2},
        padding_struct={"x": 9},
        max_sequences_per_bin=5,
    )
    assert spec.stage_line() == (
        "best_fit_pack({'x': 4}, num_packing_bins=2, seed=3, shuffle_bins=False, "
        "meta_features=['x'], pack_alignment_struct={'x': 2}, padding_struct={'x': 9}, "
        "max_sequences_per_bin=5)"
    )
    grouped = pack_spec("first_fit", {"x": 4}, 2, shuffle_bins_group_by_feature="x_segment_ids")
    assert "shuffle_bins_group_by_feature='x_segment_ids'" in grouped.stage_line()


@pytest.mark.parametrize(
    ("args", "options", "error", "message"),
    [
        (("any_fit", {"x": 4}, 2), {}, ValueError, r"strategy must be one of \('first_fit'"),
        (("first_fit", {"x": 4}, 2), {"sed": 1}, TypeError, "unknown option 'sed'; the options"),
        (("first_fit", [4], 2), {}, TypeError, "length_struct must be a dict from feature name"),
        (("first_fit", {}, 2), {}, ValueError, "must name at least one feature"),
        (("first_fit", {1: 4}, 2), {}, TypeError, r"keys must be feature names \(str\), got 1"),
        (("first_fit", {"x": 0}, 2), {}, ValueError, r"length_struct\['x'\] must be a positive"),
        (("first_fit", {"x": {}}, 2), {}, ValueError, "a tree without leaves"),
        (("first_fit", {"x": 4}, 0), {}, ValueError, "num_packing_bins must be"),
        (("first_fit", {"x": 4}, 2), {"seed": -1}, ValueError, "seed must be"),
        (("first_fit", {"x": 4}, 2), {"meta_features": "x"}, TypeError, r"write \[name\]"),
        (("first_fit", {"x": 4}, 2), {"meta_features": ["x", "x"]}, ValueError, "twice"),
        (("first_fit", {"x": 4}, 2), {"meta_features": [3]}, TypeError, "names \\(str\\), got 3"),
        (
            ("first_fit", {"x": 4}, 2),
            {"padding_struct": {"y": 0}},
            ValueError,
            r"padding_struct must have the keys of length_struct, \['x'\]; got \['y'\]",
        ),
        (
            ("first_fit", {"x": 4}, 2),
            {"padding_struct": {"x": [0]}},
            TypeError,
            r"padding_struct\['x'\] must be a single value",
        ),
        (
            ("first_fit", {"x": {"a": 4}}, 2),
            {"padding_struct": {"x": {"a": np.zeros(2)}}},
            TypeError,
            r"padding_struct\['x'\]\['a'\] must be a scalar or None",
        ),
        (
            ("first_fit", {"x": {"a": 4}}, 2),
            {"pack_alignment_struct": {"x": {"b": 1}}},
            ValueError,
            r"must have the structure of length_struct\['x'\], \{'a': 4\}",
        ),
        (
            ("first_fit", {"x": 4, "x_positions": 4}, 2),
            {},
            ValueError,
            "The packed feature 'x_positions' clashes with the segment ids or positions",
        ),
        (
            ("first_fit", {"x": 4}, 2),
            {"shuffle_bins_group_by_feature": "y"},
            ValueError,
            r"one of \['x', 'x_positions', 'x_segment_ids'\]; got 'y'",
        ),
        (
            ("first_fit", {"x": {"a": 4}}, 2),
            {"shuffle_bins_group_by_feature": "x"},
            ValueError,
            r"is 'x', which is a tree: length_struct\['x'\] is nested",
        ),
    ],
)
def test_bad_options_name_the_argument_and_what_is_allowed(
    args: tuple, options: dict, error: type[Exception], message: str
) -> None:
    with pytest.raises(error, match=message):
        pack_spec(*args, **options)


def test_specs_with_equal_options_are_equal() -> None:
    assert pack_spec("first_fit", {"x": 4}, 2) == pack_spec("first_fit", {"x": 4}, 2)
    assert isinstance(pack_spec("first_fit", {"x": 4}, 2), PackSpec)

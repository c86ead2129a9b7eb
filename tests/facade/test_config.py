"""grainfn.config: Grain's global options object, its errors, and the visualization option."""

from __future__ import annotations

from pathlib import Path

import pytest

import grainfn as grain


def test_config_errors_name_the_options() -> None:
    with pytest.raises(ValueError, match=r"Unknown config option 'py_debug'.*'py_debug_mode'"):
        grain.config.update("py_debug", True)
    with pytest.raises(ValueError, match="Unknown config option 'nope'"):
        grain.config.get_or_default("nope")
    with pytest.raises(ValueError, match="Unknown config option"):
        _ = grain.config.interleaved_shuffle
    with pytest.raises(TypeError, match="takes a bool, got 'yes' of type str"):
        grain.config.update("py_debug_mode", "yes")
    with pytest.raises(AttributeError, match=r"config\.update"):
        grain.config.py_debug_mode = True
    assert grain.config.get_or_default("py_debug_mode") is False
    assert repr(grain.config) == (
        "Config(py_debug_mode=False, py_dataset_visualization_output_dir=None)"
    )


def test_the_visualization_option_saves_each_new_iterator(tmp_path: Path) -> None:
    ds = grain.MapDataset.range(6).seed(1).shuffle().to_iter_dataset().batch(2)
    grain.config.update("py_dataset_visualization_output_dir", tmp_path / "graphs")
    try:
        assert grain.config.py_dataset_visualization_output_dir == str(tmp_path / "graphs")
        batches = [b.tolist() for b in iter(ds)]
        iter(ds)
    finally:
        grain.config.update("py_dataset_visualization_output_dir", None)
    iter(ds)  # the option is off again: nothing more is written
    folder = tmp_path / "graphs"
    assert sorted(p.name for p in folder.iterdir()) == [
        "pipeline-0.dot",
        "pipeline-0.txt",
        "pipeline-1.dot",
        "pipeline-1.txt",
    ]
    assert (folder / "pipeline-0.txt").read_text() == grain.describe_text(ds) + "\n"
    assert (folder / "pipeline-1.dot").read_text() == grain.to_dot(ds)
    assert batches == [b.tolist() for b in ds]


def test_the_visualization_option_takes_a_folder_or_none() -> None:
    with pytest.raises(TypeError, match="takes a str or None, got 3 of type int"):
        grain.config.update("py_dataset_visualization_output_dir", 3)
    assert grain.config.py_dataset_visualization_output_dir is None


def test_the_visualization_option_never_writes_through_a_planted_link(tmp_path: Path) -> None:
    """The iterators the config option saves: a link planted at a name is a taken name."""
    folder, elsewhere = tmp_path / "graphs", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (elsewhere / "victim").write_text("keep me")
    (folder / "pipeline-0.txt").symlink_to(elsewhere / "victim")
    (folder / "pipeline-1.txt").symlink_to(elsewhere / "made-through-a-link")
    grain.config.update("py_dataset_visualization_output_dir", str(folder))
    try:
        batches = [b.tolist() for b in grain.MapDataset.range(10).batch(5).to_iter_dataset()]
    finally:
        grain.config.update("py_dataset_visualization_output_dir", None)
    assert batches == [[0, 1, 2, 3, 4], [5, 6, 7, 8, 9]]
    assert (elsewhere / "victim").read_text() == "keep me"
    assert not (elsewhere / "made-through-a-link").exists()
    assert (folder / "pipeline-0.txt").is_symlink() and (folder / "pipeline-1.txt").is_symlink()
    assert "batch(5, sort_keys=True)" in (folder / "pipeline-2.txt").read_text()
    assert (folder / "pipeline-2.dot").read_text().startswith("digraph")

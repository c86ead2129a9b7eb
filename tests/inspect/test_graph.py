"""to_dot and draw: the pipeline graph as Graphviz text and as an image."""

from __future__ import annotations

import os
import stat
from pathlib import Path

import pytest

import grainfn as grain
from grainfn import fn
from grainfn._src.inspect.graph import save_pipeline


def test_dot_text_has_a_node_per_stage_and_edges_along_the_data() -> None:
    shared = fn.shuffle(fn.range(4), seed=2)
    ds = fn.mix([shared, fn.map(str, shared)], [1, 1])
    assert fn.to_dot(ds) == "\n".join(
        [
            "digraph pipeline {",
            "  rankdir=TB;",
            '  node [shape=box, fontname="monospace"];',
            '  s0 [label="mix(weights=[1.0, 1.0])\\nlength 8"];',
            '  s1 [label="shuffle(seed=2)\\nlength 4"];',
            '  s2 [label="range(0, 4, 1)\\nlength 4"];',
            '  s3 [label="map(str)\\nlength 4"];',
            "  s2 -> s1;",
            "  s1 -> s0;",
            "  s1 -> s3;",
            "  s3 -> s0;",
            "}",
        ]
    )


class Quoted:
    display_name = 'say "hi" \\o/'

    def __call__(self, x: object) -> object:
        return x


def test_labels_are_escaped_and_show_seeds_and_timing() -> None:
    ds = fn.map(Quoted(), fn.shuffle(fn.seed(1, fn.range(3))))
    stream = fn.timed(fn.from_dataset(ds))
    list(fn.iterate(stream))
    text = grain.to_dot(stream)
    assert 's1 [label="map(say \\"hi\\" \\\\o/)\\nlength 3\\n' in text
    assert "\\nseed from seed(1)\\n" in text
    assert text.count("elements, total") == 5
    assert text.count("->") == 4


def test_draw_without_graphviz_says_what_to_do(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    with pytest.raises(RuntimeError, match=r"Install Graphviz.*to_dot"):
        fn.draw(fn.range(3), tmp_path / "graph.png")
    with pytest.raises(ValueError, match=r"suffix such as \.png"):
        fn.draw(fn.range(3), tmp_path / "graph")


def fake_dot(directory: Path, exit_status: int = 0) -> None:
    """A `dot` program that records its arguments and input, and writes the output file."""
    script = directory / "dot"
    script.write_text(
        "#!/bin/sh\n"
        f'cat > "{directory}/input.dot"\n'
        f'echo "$@" > "{directory}/args"\n'
        f"if [ {exit_status} -ne 0 ]; then echo 'bad format' >&2; exit {exit_status}; fi\n"
        'echo image > "$3"\n'
    )
    script.chmod(script.stat().st_mode | stat.S_IXUSR)


def test_draw_runs_dot_on_the_dot_text(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dot(tmp_path)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    ds = grain.MapDataset.range(5).batch(2)
    out = grain.draw(ds, tmp_path / "pipeline.svg")
    assert out == tmp_path / "pipeline.svg" and out.read_text() == "image\n"
    assert (tmp_path / "input.dot").read_text() == grain.to_dot(ds)
    assert (tmp_path / "args").read_text().split() == ["-Tsvg", "-o", str(out)]
    grain.draw(ds, tmp_path / "other", format="png")
    assert (tmp_path / "args").read_text().split()[0] == "-Tpng"


def test_a_failing_dot_is_reported(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    fake_dot(tmp_path, exit_status=1)
    monkeypatch.setenv("PATH", f"{tmp_path}{os.pathsep}{os.environ['PATH']}")
    with pytest.raises(RuntimeError, match=r"dot failed.*exit status 1\): bad format"):
        fn.draw(fn.range(2), tmp_path / "graph.xyz")


def test_save_pipeline_never_writes_through_a_planted_symbolic_link(tmp_path: Path) -> None:
    """A shared output folder: links planted at the next names (one to a file, one dangling)
    are taken as used names, and their targets are never created or written."""
    folder, elsewhere = tmp_path / "shared", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    (elsewhere / "victim").write_text("keep me")
    (folder / "pipeline-0.txt").symlink_to(elsewhere / "victim")
    (folder / "pipeline-1.dot").symlink_to(elsewhere / "created-through-a-link")
    path = save_pipeline(fn.batch(2, fn.range(4)), folder)
    assert path.name == "pipeline-2.txt" and not path.is_symlink()
    assert (folder / "pipeline-2.dot").read_text().startswith("digraph")
    assert (elsewhere / "victim").read_text() == "keep me"
    assert not (elsewhere / "created-through-a-link").exists()
    assert not (folder / "pipeline-1.txt").exists()  # its pair's name was taken: not left half

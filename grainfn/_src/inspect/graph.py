"""The pipeline as a graph: Graphviz DOT text, and an image where Graphviz is installed.

`to_dot` needs nothing but Python; `draw` runs Graphviz's `dot` program on
that text. Nodes are the stages `describe` prints (a stage two branches share
is drawn once), and edges point the way data flows, from sources to the last
stage.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

from grainfn._src.inspect import stats, tree
from grainfn._src.inspect.view import StageView, as_pipeline, view


def to_dot(pipeline: Any) -> str:
    r"""The pipeline as a Graphviz DOT graph: one box per stage, edges from source to output.

    Each box holds what `describe` prints for the stage (length, seed, timing).

    Args:
        pipeline: A grainfn Dataset, Stream, or StreamIterator (its stream).

    Examples:
        >>> from grainfn import fn
        >>> print(to_dot(fn.map(str, fn.range(3))))
        digraph pipeline {
          rankdir=TB;
          node [shape=box, fontname="monospace"];
          s0 [label="map(str)\nlength 3"];
          s1 [label="range(0, 3, 1)\nlength 3"];
          s1 -> s0;
        }
    """
    root = view(as_pipeline(pipeline, "to_dot"))
    names: dict[int, str] = {}
    nodes: list[str] = []
    edges: list[str] = []

    def visit(node: StageView) -> str:
        if id(node) in names:
            return names[id(node)]
        name = names[id(node)] = f"s{len(names)}"
        nodes.append(f'  {name} [label="{_escape(_label(node))}"];')
        for parent in node.parents:
            edges.append(f"  {visit(parent)} -> {name};")
        return name

    visit(root)
    header = ["digraph pipeline {", "  rankdir=TB;", '  node [shape=box, fontname="monospace"];']
    return "\n".join([*header, *nodes, *edges, "}"])


def draw(pipeline: Any, path: str | os.PathLike[str], *, format: str | None = None) -> Path:
    """Renders the pipeline graph to an image file with Graphviz's `dot` program.

    Args:
        pipeline: A grainfn Dataset, Stream, or StreamIterator (its stream).
        path: The image to write.
        format: A Graphviz output format (`png`, `svg`, `pdf`, ...); by
            default the suffix of `path`.

    Returns:
        `path`, as a Path.

    Raises:
        RuntimeError: if `dot` is not installed, or fails.
        ValueError: if no format is given and `path` has no suffix.
    """
    text = to_dot(pipeline)
    path = Path(path)
    format = format or path.suffix.lstrip(".")
    if not format:
        raise ValueError(
            f"draw needs an image format: give the path a suffix such as .png or .svg, or pass "
            f"format=..., got the path {str(path)!r}."
        )
    program = shutil.which("dot")
    if program is None:
        raise RuntimeError(
            "draw needs Graphviz's `dot` program, which is not on PATH. Install Graphviz "
            "(apt install graphviz, brew install graphviz or conda install graphviz), or "
            "save to_dot(pipeline) to a .dot file and render it with any Graphviz viewer."
        )
    result = subprocess.run(
        [program, f"-T{format}", "-o", str(path)],
        input=text,
        capture_output=True,
        text=True,
        check=False,
    )
    if result.returncode != 0:
        raise RuntimeError(
            f"Graphviz's dot failed to draw {str(path)!r} as {format!r} (exit status "
            f"{result.returncode}): {result.stderr.strip()}"
        )
    return path


def save_pipeline(pipeline: Any, directory: str | os.PathLike[str]) -> Path:
    """Writes the pipeline's tree and graph to `directory`, beside those written before.

    The files are `pipeline-<n>.txt` (the `describe` tree) and
    `pipeline-<n>.dot` (the `to_dot` text), `n` the first number not yet used
    there; the directory is made if missing. With Grain's config option
    `py_dataset_visualization_output_dir` set, each new iterator is saved so.

    Args:
        pipeline: A grainfn Dataset, Stream, or StreamIterator (its stream).
        directory: The folder to write into.

    Returns:
        The path of the `.txt` file.

    Examples:
        >>> import tempfile
        >>> from grainfn import fn
        >>> with tempfile.TemporaryDirectory() as folder:
        ...     path = save_pipeline(fn.batch(2, fn.range(4)), folder)
        ...     print(path.name, path.read_text(), end="")
        pipeline-0.txt batch(2)  [length 2]
        └─ range(0, 4, 1)  [length 4]
    """
    folder = Path(directory)
    folder.mkdir(parents=True, exist_ok=True)
    number = 0
    while True:
        text, dot = folder / f"pipeline-{number}.txt", folder / f"pipeline-{number}.dot"
        if _write_new(text, tree.describe_text(pipeline) + "\n"):
            if _write_new(dot, to_dot(pipeline)):
                return text
            text.unlink()
        number += 1


def _write_new(path: Path, content: str) -> bool:
    """Writes a new file at `path`; False if anything is there already.

    Created exclusively and without following a symbolic link, so that a
    link planted in a shared folder (by another user, say) is never written
    through: it counts as taken.
    """
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    try:
        descriptor = os.open(path, flags, 0o644)
    except FileExistsError:
        return False
    with os.fdopen(descriptor, "w", encoding="utf-8") as file:
        file.write(content)
    return True


def _label(node: StageView) -> str:
    parts = [node.label, *tree.stage_facts(node)]
    if node.counter is not None:
        parts.append(tree.timing_text(stats.stats_of(node)))
    return "\n".join(parts)


def _escape(text: str) -> str:
    return text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")

"""The README's code runs as written."""

from __future__ import annotations

import re
import textwrap
from pathlib import Path

import numpy as np

README = Path(__file__).resolve().parents[1] / "README.md"


def test_readme_python_blocks_run_and_resume_exactly() -> None:
    blocks = re.findall(r"```python\n(.*?)```", README.read_text(), re.S)
    assert len(blocks) >= 2
    namespace: dict = {}
    for block in blocks:
        exec(textwrap.dedent(block), namespace)
    rest = list(namespace["it"])
    resumed = list(namespace["resumed"])
    assert len(resumed) == len(rest) > 0
    for a, b in zip(rest, resumed):
        np.testing.assert_array_equal(a, b)
    again = iter(namespace["ds"])
    again.set_state(namespace["state"])
    facade_rest = list(namespace["iterator"])
    assert len(facade_rest) > 0
    for a, b in zip(facade_rest, again, strict=True):
        np.testing.assert_array_equal(a, b)


def test_readme_opens_with_the_two_quickstart_commands() -> None:
    text = README.read_text()
    quickstart = re.search(r"## Quickstart\n\n```bash\n(.*?)```", text, re.S)
    assert quickstart is not None
    assert quickstart.group(1).splitlines() == [
        'pip install -e ".[test]" && python -m grainfn demo',
        "python -m pytest",
    ]

"""The documentation site builds strictly, documents the public API, and every example runs."""

from __future__ import annotations

import fnmatch
import importlib
import os
import re
import subprocess
import sys
import types
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ROOT / "docs"

# API page (docs/api/<page>.md) -> the module it documents.
API_PAGES = {
    "grainfn": "grainfn",
    "fn": "grainfn.fn",
    "experimental": "grainfn.experimental",
    "transforms": "grainfn.transforms",
    "samplers": "grainfn.samplers",
    "sharding": "grainfn.sharding",
    "sources": "grainfn.sources",
    "checkpoint": "grainfn.checkpoint",
    "testing": "grainfn.testing",
    "multiprocessing": "grainfn.multiprocessing",
    "constants": "grainfn.constants",
    "python": "grainfn.python",
}


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("site")
    env = {**os.environ, "NO_MKDOCS_2_WARNING": "1"}  # mkdocs-material's banner about MkDocs 2
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(out)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert result.returncode == 0, f"mkdocs build --strict failed:\n{result.stderr}"
    assert "WARNING" not in result.stderr, result.stderr
    return out


def _ids(site: Path, page: str) -> set[str]:
    return set(re.findall(r'id="([^"]+)"', (site / "api" / page / "index.html").read_text()))


def _nav_pages(nav: object) -> list[str]:
    if isinstance(nav, str):
        return [nav]
    if isinstance(nav, list):
        return [page for item in nav for page in _nav_pages(item)]
    if isinstance(nav, dict):
        return [page for value in nav.values() for page in _nav_pages(value)]
    return []


def _mkdocs_config() -> dict:
    # mkdocs.yml holds no custom tags, so the safe loader reads it.
    return yaml.safe_load((ROOT / "mkdocs.yml").read_text())


@pytest.mark.slow
@pytest.mark.parametrize(("page", "module"), sorted(API_PAGES.items()))
def test_api_page_documents_every_public_name(site: Path, page: str, module: str) -> None:
    mod = importlib.import_module(module)
    ids = _ids(site, page)
    names = [n for n in mod.__all__ if not isinstance(getattr(mod, n), types.ModuleType)]
    missing = [n for n in names if f"{module}.{n}" not in ids]
    assert not missing, f"docs/api/{page}.md does not document {missing}"


def test_api_pages_name_the_core_and_facade_entry_points(site: Path) -> None:
    assert {"grainfn.fn.first_fit_pack", "grainfn.fn.shuffle", "grainfn.fn.iterate"} <= _ids(
        site, "fn"
    )
    assert {"grainfn.MapDataset", "grainfn.MapDataset.shuffle", "grainfn.DataLoader"} <= _ids(
        site, "grainfn"
    )


def test_curried_functions_render_with_signature_docstring_and_label(site: Path) -> None:
    from grainfn import fn

    html = (site / "api" / "fn" / "index.html").read_text()
    for name, parameter in [("batch", "drop_remainder"), ("first_fit_pack", "length_struct")]:
        start = html.index(f'id="grainfn.fn.{name}"')
        section = html[start : html.index('<div class="doc doc-object', start)]
        # A function heading (griffe reads the source, so the decorator does not hide the def).
        assert "doc-symbol-function" in section, name
        assert "doc-label-curried" in section, name
        assert f'<span class="n">{parameter}</span>' in section, name  # the signature
        summary = getattr(fn, name).__doc__.split()[:3]  # the docstring
        assert " ".join(summary) in re.sub(r"<[^>]+>", "", section), name
    assert "Parameters:" in section  # first_fit_pack's Args, as a table


def test_every_docs_page_is_in_the_nav() -> None:
    nav = set(_nav_pages(_mkdocs_config()["nav"]))
    pages = {p.relative_to(DOCS).as_posix() for p in DOCS.rglob("*.md")}
    assert pages - nav == set(), "pages missing from the nav in mkdocs.yml"
    assert nav - pages == set(), "nav entries without a page"


def test_every_docs_page_is_collected_as_a_doctest(request: pytest.FixtureRequest) -> None:
    globs = request.config.getoption("doctestglob")
    assert "docs" in request.config.getini("testpaths")
    for page in DOCS.glob("*.md"):
        relative = page.relative_to(ROOT).as_posix()
        assert any(fnmatch.fnmatch(relative, glob) for glob in globs), relative


def test_api_pages_hold_no_code() -> None:
    for page in (DOCS / "api").glob("*.md"):
        assert "```" not in page.read_text(), page


def test_every_python_block_in_the_docs_runs() -> None:
    """A block runs as a doctest (`>>>`), or as a script in a test that names its marker.

    A block without `>>>` is run by no doctest, so it needs an HTML comment
    `<!-- marker -->` on the line before it, and a test under tests/ that
    finds the block by that marker and runs it (docs/dataloader.md's
    multi-host recipe runs in tests/loader/test_multihost.py).
    """
    tests = "".join(p.read_text() for p in (ROOT / "tests").rglob("*.py"))
    escaped = []
    for page in sorted(DOCS.rglob("*.md")):
        lines = page.read_text().splitlines()
        for number, line in enumerate(lines):
            if line.strip() != "```python":
                continue
            body = []
            for following in lines[number + 1 :]:
                if following.strip() == "```":
                    break
                body.append(following)
            if any(b.lstrip().startswith(">>>") for b in body):
                continue
            marker = re.fullmatch(r"<!-- \S+ -->", lines[number - 1].strip())
            if marker is None or marker.group(0) not in tests:
                escaped.append(f"{page.relative_to(ROOT)}:{number + 1}")
    assert escaped == [], f"python blocks that no test runs: {escaped}"


def test_the_fn_page_lists_combinators_before_records(site: Path) -> None:
    import grainfn.fn

    html = (site / "api" / "fn" / "index.html").read_text()
    order = list(dict.fromkeys(re.findall(r'id="grainfn\.fn\.([A-Za-z_]+)"', html)))
    kinds = [isinstance(getattr(grainfn.fn, name), type) for name in order]
    assert "to_jax" in order and "shuffle" in order
    assert kinds == sorted(kinds), f"a class comes before a function: {order}"

"""The demo's shared files: the synthetic images written once for the demo's tests."""

from __future__ import annotations

import pytest

from grainfn._src.demo import data


@pytest.fixture(scope="package")
def files(tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[str]]:
    """The demo's two sources (cats in 4 shards, dogs in 2) of 120 images each."""
    return data.write_sources(tmp_path_factory.mktemp("demo"), size=120)

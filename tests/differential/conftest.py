"""Fixtures of the differential tests, which run Grain beside grainfn."""

from __future__ import annotations

import pytest
from absl import flags


@pytest.fixture
def absl_flags_parsed() -> None:
    """Grain's worker processes read absl flags: marked parsed, as an absl main would."""
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()

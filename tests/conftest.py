"""Test configuration: hypothesis profiles and shared fixtures."""

import os

from hypothesis import HealthCheck, settings

# "ci" is fully deterministic so that a red CI run is reproducible bit for bit;
# "dev" explores more and draws fresh examples each run.
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci" if os.environ.get("CI") else "dev"))

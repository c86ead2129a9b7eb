"""Test configuration: hypothesis profiles and shared fixtures."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from grainfn.sources import write_array_records

from support.grain_workers import fork_grain_workers
from support.leaks import assert_nothing_left, workers
from support.module_sizes import NOTE_LINES, long_modules

# "ci" is fully deterministic so that a red run is reproducible bit for bit, and it is
# the default: `python -m pytest` on a clean clone gives the same verdict every time.
# "dev" explores more and draws fresh examples each run (HYPOTHESIS_PROFILE=dev): a
# search for new failures, run on purpose, whose finds are kept as @example cases.
settings.register_profile(
    "ci",
    derandomize=True,
    max_examples=40,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile("dev", max_examples=100, deadline=None, print_blob=True)
settings.load_profile(os.environ.get("HYPOTHESIS_PROFILE", "ci"))

# A Ray driver otherwise replaces the builtin `print` with Ray's own for good (ray's
# tqdm_ray), and the test process goes on to run other tests after the Ray ones.
os.environ.setdefault("RAY_TQDM_PATCH_PRINT", "0")


# Shared ArrayRecord files, written once per session and read by many tests
# (tests/array_record/ and the differential tests in tests/differential/).
RECORDS = [f"record {i:03d} ".encode() * (1 + i % 5) for i in range(203)]
"""Records of varying sizes, every one distinct, so a misplaced read shows."""


@pytest.fixture(scope="session")
def three_shards(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`RECORDS` in three shard files of 68, 68 and 67 records."""
    folder = tmp_path_factory.mktemp("three")
    return write_array_records(RECORDS, folder / "data", num_shards=3)


@pytest.fixture(scope="session")
def one_shard(tmp_path_factory: pytest.TempPathFactory) -> list[str]:
    """`RECORDS` in one file."""
    folder = tmp_path_factory.mktemp("one")
    return write_array_records(RECORDS, folder / "single.array_record")


@pytest.fixture(scope="session")
def records() -> list[bytes]:
    """The records the shared files hold, in order."""
    return list(RECORDS)


def pytest_xdist_auto_num_workers(config: pytest.Config) -> int:
    """How many test processes `-n auto` (the default, see pyproject.toml) starts.

    One per core this run may use: the suite is CPU-bound (its tests start
    worker processes, jax compiles), so a third process on two cores made the
    whole suite slower (752 s against 696 s with two, on this project's 2-core
    machine). At most `MAX_TEST_PROCESSES`: each holds jax, Grain and Ray.
    """
    return max(1, min(len(os.sched_getaffinity(0)), MAX_TEST_PROCESSES))


MAX_TEST_PROCESSES = 8
"""The most test processes `-n auto` starts, whatever the cores (each takes 1 to 3 GB)."""


STARTS_RAY = ("tests/parallel/test_ray_", "docs/distributed.md")
"""Where the tests that start Ray live (path prefixes): the Ray cluster's and the others."""


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The tests that start Ray run first, one after another, in one test process.

    `ray.init()` without an address joins a Ray already running on the
    machine, so two tests starting Ray at once would meet: they are one xdist
    group. The Ray cluster's (the `cluster` fixture, tests/parallel/conftest.py)
    come first in it; the cluster stops as soon as the next test does not take
    it. The group is the first handed out (`--no-loadscope-reorder` keeps this
    order): much of its time is spent waiting on Ray's processes, which the
    other test processes fill, and left to the end it would leave them idle.
    The tests that share a module's fixture are a group too (see
    `shared_fixture_home`).
    """

    def place(item: pytest.Item) -> int:
        if "cluster" in getattr(item, "fixturenames", ()):
            return 0
        return 1 if item.nodeid.startswith(STARTS_RAY) else 2

    items.sort(key=place)
    for item in items:
        if place(item) < 2:
            item.add_marker(pytest.mark.xdist_group("ray"))
        elif home := shared_fixture_home(item):
            item.add_marker(pytest.mark.xdist_group(home))


def shared_fixture_home(item: pytest.Item) -> str | None:
    """Where the module-, class- or package-scoped fixture `item` takes is shared, if any.

    Such a fixture (a docs site built, processes run once for a module's
    checks) is set up once per test process that runs a test taking it: the
    tests that share it are one xdist group, so it is set up once, not once
    in each test process.
    """
    info = getattr(item, "_fixtureinfo", None)
    fixtures = [definitions[-1] for definitions in info.name2fixturedefs.values()] if info else []
    for fixture in fixtures:  # a package fixture first: its group spans modules
        if fixture.scope == "package":
            return f"package {fixture.baseid}"
    if any(fixture.scope in ("module", "class") for fixture in fixtures):
        return f"module {item.nodeid.split('::')[0]}"
    return None


@pytest.fixture(scope="session", autouse=True)
def grain_workers_from_a_fork_server() -> None:
    """Grain's workers start forked from a server that has imported Grain (see the module)."""
    fork_grain_workers()


@pytest.fixture(autouse=True)
def no_workers_outlive_the_test() -> Iterator[None]:
    """After each test, its worker processes are gone once its garbage is collected.

    An iterator a test drops may still be held by a reference cycle (an
    exception's traceback holds the frames that hold it), which only the
    garbage collector frees, and it runs at times nobody chooses. Collected
    here, such an iterator closes its workers now; otherwise they would live
    on into later tests, which count worker processes (tests/faults/), and
    fail there. A worker left after the collection is this test's leak.
    """
    yield
    if workers():
        gc.collect()
        assert_nothing_left()


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    """Names the modules past `NOTE_LINES` lines: a prompt, never a failure."""
    package = Path(__file__).resolve().parents[1] / "grainfn"
    for module, lines in long_modules(package):
        terminalreporter.write_line(
            f"note: {module} has {lines} lines (over {NOTE_LINES}): one concept, or two?"
        )

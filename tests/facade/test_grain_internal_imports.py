"""Grain-internal import paths that published code uses, served by grainfn (grainfn._src.python).

The tests here run the clients' import statements verbatim in a fresh
interpreter where `grain` resolves to grainfn (an import hook maps `grain.X` to
`grainfn.X`, the setup of issue 32's report), and check that `import grainfn`
loads none of these modules. What each module does, against Grain 0.2.18 doing
the same, is tested at its own path under tests/python/.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from typing import Any

import pytest

pytestmark = pytest.mark.grain


# --- The clients' import statements, with `grain` resolving to grainfn ------------------

ALIAS = textwrap.dedent(
    '''
    import importlib, importlib.abc, importlib.util, json, sys

    class GrainIsGrainfn(importlib.abc.MetaPathFinder, importlib.abc.Loader):
        """Serves the module `grain.X` as the module `grainfn.X`."""

        def __init__(self):
            self.specs = {}

        def find_spec(self, name, path=None, target=None):
            if name == "grain" or name.startswith("grain."):
                return importlib.util.spec_from_loader(name, self)
            return None

        def create_module(self, spec):
            module = importlib.import_module("grainfn" + spec.name[len("grain"):])
            self.specs[spec.name] = module.__spec__
            return module

        def exec_module(self, module):
            for name, spec in self.specs.items():
                if spec.name == module.__name__:
                    module.__spec__ = spec  # the import system put the alias's spec there

    sys.meta_path.insert(0, GrainIsGrainfn())
    '''
)

CLIENT_IMPORTS = {
    # MaxText, src/maxtext/input_pipeline/input_pipeline_utils.py (issue 32).
    "maxtext": (
        "import grain.python as grain\n"
        "from grain._src.python.dataset.sources.tfrecord_dataset import _TFRecordReader, "
        "_TFRecordDatasetIterator\n"
        "from grain.experimental import FlatMapTransform, TFRecordIterDataset",
        {
            "_TFRecordReader": "grainfn._src.formats.tfrecord_reader.TFRecordReader",
            "_TFRecordDatasetIterator": "grainfn._src.facade.tfrecord_dataset.TFRecordFileIterator",
            "TFRecordIterDataset": "grainfn.experimental.TFRecordIterDataset",
            "grain.DatasetIterator": "grainfn.DatasetIterator",
        },
    ),
    # A MaxText fork's _grain_data_processing.py.
    "options": (
        "from grain._src.python import options as grain_options",
        {"grain_options.MultiprocessingOptions": "grainfn.MultiprocessingOptions"},
    ),
    # axlearn, axlearn/common/input_grain.py.
    "axlearn": (
        "from grain._src.python.data_loader import _determine_worker_count\n"
        "from grain._src.python.dataset import dataset as dataset_base",
        {
            "_determine_worker_count": "grainfn._src.facade.options.determine_worker_count",
            "dataset_base.MapDataset": "grainfn.MapDataset",
        },
    ),
    # axlearn's earlier input_grain_lm.py.
    "flatmap": (
        "from grain._src.python.dataset.transformations import flatmap",
        {"flatmap.FlatMapMapDataset": "grainfn.experimental.FlatMapMapDataset"},
    ),
    "dataset": (
        "from grain._src.python.dataset.dataset import DatasetIterator",
        {"DatasetIterator": "grainfn.DatasetIterator"},
    ),
    "samplers": (
        "from grain._src.python.samplers import IndexSampler",
        {"IndexSampler": "grainfn.IndexSampler"},
    ),
    "prefetch": (
        "from grain._src.python.dataset.transformations.prefetch import ThreadPrefetchIterDataset",
        {"ThreadPrefetchIterDataset": "grainfn.experimental.ThreadPrefetchIterDataset"},
    ),
    "zip": (
        "from grain._src.python.dataset.transformations.zip import ZipIterDataset",
        {"ZipIterDataset": "grainfn.experimental.ZipIterDataset"},
    ),
    # axlearn, axlearn/common/input_fake.py (fake_grain_source, for its tests).
    "source": (
        "from grain._src.python.dataset.transformations import source",
        {
            "source.SourceMapDataset": "grainfn._src.facade.dataset.SourceMapDataset",
            "source.RangeMapDataset": "grainfn._src.facade.dataset.RangeMapDataset",
        },
    ),
    "index_shuffle": (
        "from grain._src.python.experimental.index_shuffle.python import "
        "index_shuffle_module as index_shuffle",
        {"index_shuffle.index_shuffle": "grainfn.experimental.index_shuffle"},
    ),
    # Orbax imports the handler by the path it recorded in the checkpoint's metadata.
    "checkpoint": (
        "import importlib\n"
        "handler = importlib.import_module('grain._src.python.checkpoint.handler')",
        {"handler.CheckpointHandler": "grainfn.checkpoint.CheckpointHandler"},
    ),
}

CHECK = textwrap.dedent(
    """
    import grainfn, grainfn.experimental, grainfn.checkpoint
    import grainfn._src.formats.tfrecord_reader, grainfn._src.facade.tfrecord_dataset
    import grainfn._src.facade.options

    def value(expression, names):
        head, *rest = expression.split(".")
        found = names[head] if head in names else importlib.import_module(head)
        for part in rest:
            found = getattr(found, part)
        return found

    results = {}
    for client, (statement, expected) in json.loads(sys.argv[1]).items():
        names = {}
        try:
            exec(statement, names)
        except Exception as error:
            results[client] = f"{type(error).__name__}: {error}"
            continue
        results[client] = [e for e, want in expected.items()
                           if value(e, names) is not value(want, {})]
    results["grain is grainfn"] = sys.modules["grain"] is grainfn
    print(json.dumps(results))
    """
)


@pytest.fixture(scope="module")
def aliased_imports() -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-c", ALIAS + CHECK, json.dumps(CLIENT_IMPORTS)],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert result.returncode == 0, result.stderr
    results: dict[str, Any] = json.loads(result.stdout)
    assert results.pop("grain is grainfn") is True
    return results


@pytest.mark.slow
@pytest.mark.parametrize("client", sorted(CLIENT_IMPORTS))
def test_client_imports_run_with_grain_resolving_to_grainfn(
    client: str, aliased_imports: dict[str, Any]
) -> None:
    assert aliased_imports[client] == []  # every imported name is the grainfn object


def test_import_grainfn_loads_no_grain_internal_path() -> None:
    code = (
        "import sys, grainfn, grainfn.python, grainfn.experimental\n"
        "ds = grainfn.MapDataset.range(3).to_iter_dataset()\n"
        "print(list(ds), sorted(m for m in sys.modules if m.startswith('grainfn._src.python')))"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.stdout.split() == ["[0,", "1,", "2]", "[]"], result.stderr

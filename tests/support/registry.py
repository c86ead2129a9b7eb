"""The stage kinds of the registry, for tests that must cover every stage.

`stage_kinds()` and `dataset_kinds()` (and the declarations read from them)
hold the classes of the modules imported so far; importing this module
imports every module of grainfn, so the kinds a test enumerates do not depend
on what it, or another test, happened to import. `leaf_kinds` keeps the
classes that are no other stage's base (the stages a pipeline is built of).
"""

from __future__ import annotations

import importlib
import pkgutil
from collections.abc import Callable
from typing import Any, Literal

from hypothesis import Phase, find, settings
from hypothesis import strategies as st

import grainfn._src
from grainfn import fn
from grainfn._src.core.arguments import core_of
from grainfn._src.core.dataset import Dataset, dataset_kinds
from grainfn._src.core.random_stage import ArgumentKind, RandomStage, random_stages
from grainfn._src.core.stream import stage_kinds
from grainfn._src.testing.specs import (
    Functions,
    Level,
    apply_op,
    declared_kinds,
    declared_stages,
    sample_op,
)


def import_every_module() -> None:
    """Imports every module of grainfn, so that the registry holds every stage class."""
    for module in pkgutil.walk_packages(grainfn._src.__path__, "grainfn._src."):
        importlib.import_module(module.name)


import_every_module()


def leaf_kinds(level: Literal["dataset", "stream"]) -> set[type[Any]]:
    """Every stage class of grainfn at `level` that no other stage class derives from."""
    kinds = dataset_kinds() if level == "dataset" else stage_kinds()
    return {kind for kind in kinds if not any(k is not kind and issubclass(k, kind) for k in kinds)}


def kinds_in(pipeline: Any) -> set[type[Any]]:
    """The class of every stage of `pipeline` (a core value or a Grain-API dataset) and above.

    Its parents are walked, not the pipelines its elements are (an interleave's datasets).
    """
    found, todo = set(), [core_of(pipeline)]
    while todo:
        stage = todo.pop()
        found.add(type(stage))
        todo.extend(core_of(parent) for parent in stage.parents)
    return found


def undeclared(level: Literal["dataset", "stream"]) -> set[type[Any]]:
    """The leaf stage classes at `level` that declare no `random_stage`."""
    return {kind for kind in leaf_kinds(level) if not random_stages(kind)}


def names(kinds: set[type[Any]]) -> list[str]:
    """The kinds' names, sorted: what a failed completeness check prints."""
    return sorted(kind.__qualname__ for kind in kinds)


LEVELS: tuple[Level, ...] = ("dataset", "stream")

USER_FUNCTIONS = frozenset(
    {
        ArgumentKind.PREDICATE,
        ArgumentKind.MAP,
        ArgumentKind.RANDOM_MAP,
        ArgumentKind.INDEX_MAP,
        ArgumentKind.KEY_MAP,
    }
)
"""The kinds of argument that are a user's function."""


def calls_a_user_function(stage: RandomStage) -> bool:
    """Whether a declared stage takes a user's function."""
    return bool(USER_FUNCTIONS & set(stage.kinds()))


def user_function_stages(functions: Functions) -> dict[tuple[Level, str], RandomStage]:
    """The declared stages that take a user's function, by level and name, that `functions` allow.

    A stage whose declaration fixes its function (`with_index`, `add_key_draw`)
    is left out unless `functions` allow that function.
    """
    return {
        (level, name): stage
        for level in LEVELS
        for name, stage in declared_kinds(functions, level).items()
        if calls_a_user_function(stage)
    }


FIXED_FUNCTIONS: dict[tuple[Level, str], str] = {
    ("dataset", "map_with_index"): "its declaration fixes its function (with_index)",
    ("stream", "map_with_index"): "its declaration fixes its function (with_index)",
    ("dataset", "random_map_jax"): "its declaration fixes its function (add_key_draw)",
}
"""The declared stages calling a user's function that a test's own functions cannot replace.

Each is drawn with the function its declaration names, so a test that needs
the function to fail covers these stages some other way (random_map_jax calls
a user's function as random_map does, which is drawn).
"""


def user_function_kinds() -> set[tuple[Level, str]]:
    """Every declared stage that calls a user's function, by level and name."""
    return {
        (level, stage.name)
        for level in LEVELS
        for _, stage in declared_stages(level)
        if calls_a_user_function(stage)
    }


def simplest_op(
    stage: RandomStage,
    functions: Functions,
    condition: Callable[[tuple[Any, ...]], bool] = bool,
) -> tuple[Any, ...]:
    """The simplest spec of a declared stage (the first hypothesis draws) that meets `condition`."""
    ops = st.composite(lambda draw: sample_op(draw, {stage.name: stage}, functions))()
    return find(ops, condition, settings=settings(database=None, phases=[Phase.generate]))


def simplest_stage(
    level: Level, stage: RandomStage, functions: Functions, data: Dataset[Any]
) -> Any:
    """The stage of its simplest spec (the first hypothesis draws) over `data`, at `level`.

    At stream level the stage reads `fn.from_dataset(data)`.
    """
    op = simplest_op(stage, functions)
    return apply_op(op, data if level == "dataset" else fn.from_dataset(data), functions)

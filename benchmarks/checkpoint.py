"""Checkpoint benchmarks: how long saving an iterator holds the training loop, grainfn and Grain.

P1 (a batched range) and P2 (a mix of three): the blocking part of `get_state()`, `it.save(dir)`,
`handler.async_save` and `CheckpointManager.save`, medians per call. See docs/performance.md.
"""

from __future__ import annotations

import dataclasses
import functools
import tempfile
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

import grain
import orbax.checkpoint as ocp

import grainfn
import grainfn.checkpoint
from benchmarks import harness as h
from benchmarks.run import run_suite

BATCH = 32
THEIRS, PLAIN = "Grain", "plain"
CALLS = {
    "get_state": "get_state()",
    "it.save": "it.save(dir) until it returns",
    "handler": "handler.async_save, sync part",
    "manager": "CheckpointManager.save (async)",
}
"""The blocking calls timed per pipeline: case labels' prefix -> the row's title."""


@dataclasses.dataclass(frozen=True)
class Config(h.Config):
    """`timer` times the cheap calls; the manager saves run `saves` times within `saves_budget`."""

    saves: int = 300
    saves_budget: float = 8.0
    records: int = 1_000_000  # records of each range
    advance: int = 20  # batches read before measuring


DEFAULT = Config(h.Timer(repeats=500, min_time=1.0, max_repeats=10_000, budget=8.0, burst=0.1))
QUICK = Config(
    h.Timer(repeats=100, min_time=0.2, max_repeats=2_000, budget=2.0, burst=0.1),
    saves=40,
    saves_budget=2.0,
    records=100_000,
    advance=5,
)


def add_one(x: int) -> int:
    return x + 1


def keep(x: int) -> bool:
    return x % 3 != 0


def p1(lib: Any, n: int) -> Any:
    """`range(n).seed(0).shuffle().map(x + 1).filter(x % 3 != 0).to_iter_dataset().batch(32)`"""
    ds = lib.MapDataset.range(n).seed(0).shuffle().map(add_one).filter(keep)
    return ds.to_iter_dataset().batch(BATCH)


def p2(lib: Any, n: int) -> Any:
    """`IterDataset.mix` of three P1-like components (weights 3:2:1), then batch(32)."""
    parts = [
        lib.MapDataset.range(n).seed(s).shuffle().map(add_one).filter(keep).to_iter_dataset()
        for s in (1, 2, 3)
    ]
    return lib.IterDataset.mix(parts, weights=[3, 2, 1]).batch(BATCH)


def until_it_waits(coroutine: Coroutine[Any, Any, Any]) -> Any:
    """Runs `coroutine` as an event loop would; returns its result (one that waits fails)."""
    try:
        coroutine.send(None)
    except StopIteration as done:
        return done.value
    raise AssertionError(f"{getattr(coroutine, '__qualname__', coroutine)} waited")


def save_case(it: Any, directory: Path) -> h.Case:
    """Timed `it.save(dir)` calls (to its returned background write); the setup drops those."""
    directory.mkdir()
    writes: list[Coroutine[Any, Any, None]] = []

    def drop() -> None:
        for write in writes:
            write.close()
        writes.clear()

    return h.Case(lambda: writes.append(until_it_waits(it.save(directory))), setup=drop)


def handler_case(handler: Any, directory: Path, make_args: Callable[[], Any]) -> h.Case:
    """Timed synchronous parts of `handler.async_save`; the setup awaits its commits, untimed."""
    directory.mkdir()
    commits: list[Any] = []

    def wait() -> None:
        for commit in commits:
            commit.result()
        commits.clear()

    def save() -> None:
        commits.extend(until_it_waits(handler.async_save(directory, args=make_args())))

    return h.Case(save, setup=wait)


class ManagerSaves:
    """Timed `manager.save(step, args=make_args())` calls, one new step each; waits untimed."""

    def __init__(self, directory: Path, make_args: Callable[[], Any]) -> None:
        self.manager, self.make_args, self.step = ocp.CheckpointManager(directory), make_args, 0

    def run(self) -> bool:
        self.step += 1
        return self.manager.save(self.step, args=self.make_args())

    def wait(self) -> None:
        self.manager.wait_until_finished()


def pipeline(c: Config, name: str, build: Callable[[Any, int], Any]) -> list[h.Row]:
    """The blocking times of one pipeline's calls, grainfn and Grain."""
    with tempfile.TemporaryDirectory() as folder:
        return measure_calls(c, name, build, Path(folder))


def measure_calls(
    c: Config, name: str, build: Callable[[Any, int], Any], root: Path
) -> list[h.Row]:
    ours, theirs = iter(build(grainfn, c.records)), iter(build(grain, c.records))
    for it in (ours, theirs):
        for _ in range(c.advance):
            next(it)
    state = ours.get_state()
    ours_save = lambda: grainfn.checkpoint.CheckpointSave(ours)  # noqa: E731
    plain_save = lambda: ocp.args.JsonSave(state)  # noqa: E731
    theirs_save = lambda: grain.checkpoint.CheckpointSave(theirs)  # noqa: E731
    ours_handler, json_handler = grainfn.checkpoint.CheckpointHandler(), ocp.JsonCheckpointHandler()
    calls = {
        f"get_state {h.GRAINFN}": h.Case(ours.get_state),
        f"get_state {THEIRS}": h.Case(theirs.get_state),
        f"it.save {h.GRAINFN}": save_case(ours, root / f"{name}-v1-grainfn"),
        f"it.save {THEIRS}": save_case(theirs, root / f"{name}-v1-grain"),
        f"handler {h.GRAINFN}": handler_case(
            ours_handler, root / f"{name}-handler-grainfn", ours_save
        ),
        f"handler {PLAIN}": handler_case(json_handler, root / f"{name}-handler-json", plain_save),
    }
    managers = {
        h.GRAINFN: ManagerSaves(root / f"{name}-grainfn", ours_save),
        THEIRS: ManagerSaves(root / f"{name}-grain", theirs_save),
        PLAIN: ManagerSaves(root / f"{name}-json", plain_save),
    }
    t = h.measure(calls, c.timer)
    # Manager saves alternate one by one, so that a slow phase of the machine hits all alike.
    saves = {f"manager {k}": h.Case(m.run, setup=m.wait) for k, m in managers.items()}
    t |= h.measure(saves, h.Timer(c.saves, max_repeats=c.saves, budget=c.saves_budget, burst=0.0))
    for case in calls.values():  # drop the writes, await the commits
        if case.setup is not None:
            case.setup()
    for m in managers.values():
        m.wait()
    check_restores(c, name, build, managers, state)
    for m in managers.values():
        m.manager.close()
    return rows(name, t)


def check_restores(
    c: Config, name: str, build: Any, managers: dict[str, ManagerSaves], state: Any
) -> None:
    """The last steps saved restore: grainfn's and Grain's to the same batches, JsonSave as is."""
    batches = {}
    for key, lib in ((h.GRAINFN, grainfn), (THEIRS, grain)):
        fresh, saved = iter(build(lib, c.records)), managers[key]
        saved.manager.restore(saved.step, args=lib.checkpoint.CheckpointRestore(fresh))
        batches[key] = [next(fresh).tolist() for _ in range(3)]
    h.require(batches[h.GRAINFN] == batches[THEIRS], f"{name}: restored grainfn != restored Grain")
    plain = managers[PLAIN]
    saved = plain.manager.restore(plain.step, args=ocp.args.JsonRestore())
    h.require(saved == state, f"{name}: JsonSave restored {saved}")


def rows(name: str, t: dict[str, h.Timing]) -> list[h.Row]:
    """A row per blocking call: the median of each implementation, per call."""
    median = {label: timing.median for label, timing in t.items()}
    added = {
        "handler": median[f"handler {h.GRAINFN}"] - median[f"handler {PLAIN}"],
        "manager": median[f"manager {h.GRAINFN}"] - median[f"manager {PLAIN}"],
        "Grain's manager": median[f"manager {THEIRS}"] - median[f"manager {PLAIN}"],
    }
    out = []
    for call, title in CALLS.items():
        labels = {k: f"{call} {k}" for k in (h.GRAINFN, THEIRS, PLAIN) if f"{call} {k}" in t}
        best = ", ".join(f"{k} {h.fmt_seconds(t[label].best)}" for k, label in labels.items())
        detail = f"median of {len(t[labels[h.GRAINFN]].runs)} calls; best: {best}."
        if call == "manager":
            detail += " What the iterator adds to a save (median - plain's): "
            detail += "; ".join(f"{k} {signed(v)}" for k, v in added.items())
        figures = {k: median[label] for k, label in labels.items()}
        out.append(h.Row(f"{name} {title}", "", figures, unit="us", detail=detail))
    return out


def signed(seconds: float | None) -> str:
    if seconds is None:
        return h.MISSING
    return ("-" if seconds < 0 else "") + h.fmt_seconds(abs(seconds))


def steps(c: Config) -> list[h.Step]:
    pipelines = {"P1": p1, "P2": p2}
    return [h.Step(key, functools.partial(pipeline, c, key, p)) for key, p in pipelines.items()]


def targets(rows: dict[str, h.Row]) -> list[h.Target]:
    out = []
    for name in ("P1", "P2"):
        get_state, save, handler, manager = (rows[f"{name} {t}"].per_item for t in CALLS.values())
        extra = h.difference(handler[h.GRAINFN], get_state[h.GRAINFN])
        text = f"{name}: the handler's synchronous part <= get_state() + 50 µs"
        text += " (no thread start, no I/O)"
        out.append(h.Target.at_most(text, extra, 50e-6, signed))
        text = f"{name}: it.save(dir) blocks <= 2x get_state()"
        out.append(h.Target.at_most(text, h.ratio(save[h.GRAINFN], get_state[h.GRAINFN]), 2.0))
        text = f"{name}: a manager save blocks <= 1.2x a plain item's"
        out.append(h.Target.at_most(text, h.ratio(manager[h.GRAINFN], manager[PLAIN]), 1.2))
        text = f"{name}: a manager save blocks no longer than with Grain's CheckpointSave"
        out.append(h.Target.at_least(text, h.ratio(manager[THEIRS], manager[h.GRAINFN]), 1.0))
    return out


if __name__ == "__main__":
    run_suite("checkpoint", __doc__ or "", steps, targets, DEFAULT, QUICK)

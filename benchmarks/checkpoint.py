"""Checkpoint benchmarks: how long saving an iterator holds the training loop, grainfn and Grain.

Run from the project root:

    python -m benchmarks.checkpoint [--quick] [--markdown PATH]

Two pipelines are written once and built with grainfn and with Grain (`P1`: a
shuffled, mapped, filtered, batched range; `P2`: a stream mix of three such
components, whose state is larger); their iterators read a few batches, then
the calls that block the caller are timed in one process:

- `get_state()`;
- `it.save(dir)`: Orbax v1's checkpointable save, until it returns the
  coroutine that writes in the background (the coroutine is then discarded);
- `handler.async_save(dir, args=...)`: the synchronous part of the Orbax
  handler, until it returns its commit futures (grainfn's handler, and Orbax's
  `JsonCheckpointHandler` on the grainfn state dict for reference; Grain's
  handler has no asynchronous save);
- `CheckpointManager.save(step, args=CheckpointSave(it))` with asynchronous
  checkpointing (Orbax's default), until it returns, with each library's own
  `CheckpointSave`, and the same for `ocp.args.JsonSave(d)` with `d` the
  grainfn iterator's state dict: a plain item of identical content, whose
  blocking time is Orbax's own part. What the iterator adds to a save is the
  difference.

Every manager is waited for (`wait_until_finished()`, untimed) before each
timed save, so no save waits for the previous one; manager saves of the three
kinds alternate one by one. Times are per call, median and best of R runs,
the implementations' runs interleaved (see `benchmarks.common.measure_all`).
Afterwards the last steps are restored and checked: grainfn's and Grain's
checkpoints resume to the same batches.
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
from benchmarks.common import (
    MISSING,
    Case,
    Timing,
    fmt_micros,
    fmt_ratio,
    measure_all,
    ratio,
    require,
)
from benchmarks.report import GRAINFN, Row, Run, Targets, markdown_table

BATCH = 32
GRAIN, PLAIN = "Grain", "plain"
BLOCKING_CALLS = (
    ("get_state()", "get_state"),
    ("it.save(dir), until it returns the write", "it.save"),
    ("handler.async_save, synchronous part", "handler"),
    ("CheckpointManager.save (async)", "manager"),
)
"""The blocking calls timed per pipeline: the table's label and the case labels' prefix."""


@dataclasses.dataclass(frozen=True)
class Config:
    """Sizes and timing parameters (`QUICK` for a smoke run)."""

    records: int  # records of each range
    advance: int  # batches read before measuring
    repeats: int  # timed calls per implementation, at least (the cheap calls)
    min_time: float  # seconds of timed calls per implementation, at least
    manager_repeats: int  # timed CheckpointManager saves per implementation
    budget: float  # seconds per implementation at most


DEFAULT = Config(
    records=1_000_000, advance=20, repeats=500, min_time=1.0, manager_repeats=300, budget=8.0
)
QUICK = Config(
    records=100_000, advance=5, repeats=100, min_time=0.2, manager_repeats=40, budget=2.0
)


def add_one(x: int) -> int:
    return x + 1


def keep(x: int) -> bool:
    return x % 3 != 0


def p1(g: Any, n: int) -> Any:
    """P1: `range(n).seed(0).shuffle().map(x + 1).filter(x % 3 != 0).to_iter_dataset().batch(32)`"""
    ds = g.MapDataset.range(n).seed(0).shuffle().map(add_one).filter(keep)
    return ds.to_iter_dataset().batch(BATCH)


def p2(g: Any, n: int) -> Any:
    """P2: `IterDataset.mix` of three P1-like components (weights 3:2:1), then batch(32)."""
    parts = [
        g.MapDataset.range(n).seed(s).shuffle().map(add_one).filter(keep).to_iter_dataset()
        for s in (1, 2, 3)
    ]
    return g.IterDataset.mix(parts, weights=[3, 2, 1]).batch(BATCH)


PIPELINES: dict[str, Callable[[Any, int], Any]] = {"P1": p1, "P2": p2}


def blocking_part(it: Any, directory: Path) -> Coroutine[Any, Any, None]:
    """Runs `it.save(directory)` as Orbax v1 awaits it; returns the background write it gives."""
    outer = it.save(directory)
    try:
        outer.send(None)
    except StopIteration as done:
        coroutine: Coroutine[Any, Any, None] = done.value
        return coroutine
    raise AssertionError("DatasetIterator.save must return without waiting")


class Saves:
    """Timed `it.save(dir)` calls; the background coroutines are closed untimed."""

    def __init__(self, it: Any, directory: Path) -> None:
        self.it, self.directory = it, directory
        self.pending: list[Coroutine[Any, Any, None]] = []

    def run(self) -> None:
        self.pending.append(blocking_part(self.it, self.directory))

    def close(self) -> None:
        for coroutine in self.pending:
            coroutine.close()
        self.pending.clear()


class HandlerSaves:
    """Timed synchronous parts of `handler.async_save`; the commits are awaited untimed.

    Outside a manager no directory has to be awaited, so each commit writes into
    `directory` at once, in its own thread.
    """

    def __init__(self, handler: Any, directory: Path, make_args: Callable[[], Any]) -> None:
        directory.mkdir()
        self.handler, self.directory, self.make_args = handler, directory, make_args
        self.pending: list[Any] = []

    def run(self) -> None:
        coroutine = self.handler.async_save(self.directory, args=self.make_args())
        try:
            coroutine.send(None)
        except StopIteration as done:
            self.pending.extend(done.value)
            return
        raise AssertionError("async_save must not await")

    def wait(self) -> None:
        for commit in self.pending:
            commit.result()
        self.pending.clear()


class ManagerSaves:
    """Timed `mgr.save(step, args=make())` calls, one new step each; waits are untimed."""

    def __init__(self, directory: Path, make_args: Callable[[], Any]) -> None:
        self.manager = ocp.CheckpointManager(directory)
        self.make_args, self.step = make_args, 0

    def run(self) -> bool:
        self.step += 1
        return self.manager.save(self.step, args=self.make_args())

    def wait(self) -> None:
        self.manager.wait_until_finished()


def measure_pipeline(config: Config, name: str, root: Path) -> dict[str, Timing]:
    """The blocking times of one pipeline's calls, grainfn and Grain, keyed by case label."""
    build = PIPELINES[name]
    print(first_line(build), flush=True)
    ours, theirs = iter(build(grainfn, config.records)), iter(build(grain, config.records))
    for it in (ours, theirs):
        for _ in range(config.advance):
            next(it)
    state_dict = ours.get_state()
    saves = [Saves(ours, root / f"{name}-v1-grainfn"), Saves(theirs, root / f"{name}-v1-grain")]
    handlers = {
        GRAINFN: HandlerSaves(
            grainfn.checkpoint.CheckpointHandler(),
            root / f"{name}-handler-grainfn",
            lambda: grainfn.checkpoint.CheckpointSave(ours),
        ),
        PLAIN: HandlerSaves(
            ocp.JsonCheckpointHandler(),
            root / f"{name}-handler-json",
            lambda: ocp.args.JsonSave(state_dict),
        ),
    }
    managers = {
        GRAINFN: ManagerSaves(
            root / f"{name}-grainfn", lambda: grainfn.checkpoint.CheckpointSave(ours)
        ),
        GRAIN: ManagerSaves(
            root / f"{name}-grain", lambda: grain.checkpoint.CheckpointSave(theirs)
        ),
        PLAIN: ManagerSaves(root / f"{name}-json", lambda: ocp.args.JsonSave(state_dict)),
    }
    for s in saves:
        s.directory.mkdir()
    quick_calls = measure_all(
        [
            Case(f"get_state {GRAINFN}", ours.get_state),
            Case(f"get_state {GRAIN}", theirs.get_state),
            Case(f"it.save {GRAINFN}", saves[0].run, setup=saves[0].close),
            Case(f"it.save {GRAIN}", saves[1].run, setup=saves[1].close),
            *(Case(f"handler {k}", h.run, setup=h.wait) for k, h in handlers.items()),
        ],
        repeats=config.repeats,
        min_time=config.min_time,
        max_repeats=20 * config.repeats,
        budget=config.budget,
        burst=0.1,
    )
    # Manager saves alternate one by one, so that a slow phase of the machine hits all alike.
    manager_calls = measure_all(
        [Case(f"manager {k}", m.run, setup=m.wait) for k, m in managers.items()],
        repeats=config.manager_repeats,
        max_repeats=config.manager_repeats,
        budget=config.budget,
        burst=0.0,
    )
    for s in saves:
        s.close()
    for h in handlers.values():
        h.wait()
    for m in managers.values():
        m.wait()
    check_restores(config, name, managers, state_dict)
    for m in managers.values():
        m.manager.close()
    return {t.label: t for t in quick_calls + manager_calls}


def check_restores(
    config: Config, name: str, managers: dict[str, ManagerSaves], state_dict: dict[str, Any]
) -> None:
    """The last steps saved restore: grainfn's and Grain's to the same batches, JsonSave as is."""
    build = PIPELINES[name]
    nexts = {}
    for key, module in ((GRAINFN, grainfn), (GRAIN, grain)):
        fresh = iter(build(module, config.records))
        manager = managers[key]
        manager.manager.restore(manager.step, args=module.checkpoint.CheckpointRestore(fresh))
        nexts[key] = [next(fresh).tolist() for _ in range(3)]
    require(nexts[GRAINFN] == nexts[GRAIN], f"{name}: restored grainfn != restored Grain")
    plain = managers[PLAIN]
    saved = plain.manager.restore(plain.step, args=ocp.args.JsonRestore())
    require(saved == state_dict, f"{name}: JsonSave restored {saved}")


def first_line(build: Callable[..., Any]) -> str:
    return (build.__doc__ or "").splitlines()[0]


def cell(timing: Timing | None) -> str:
    """'median (best)' of a timing."""
    if timing is None:
        return MISSING
    return f"{fmt_micros(timing.median)} ({fmt_micros(timing.best)})"


def median(results: dict[str, Timing], label: str) -> float:
    return results[label].median


def report_tables(results: dict[str, dict[str, Timing]]) -> tuple[str, str, dict[str, Any]]:
    """The blocking-time table, the iterator's-share table, and the figures the targets judge."""
    rows, shares, figures = [], [], {}
    for name, t in results.items():
        for label, key in BLOCKING_CALLS:
            ours, theirs, plain = (t.get(f"{key} {k}") for k in (GRAINFN, GRAIN, PLAIN))
            assert ours is not None
            rows.append(
                [
                    f"{name} {label}",
                    cell(ours),
                    cell(theirs),
                    cell(plain),
                    fmt_ratio(ratio(plain.median, ours.median) if plain else None),
                    fmt_ratio(ratio(theirs.median, ours.median) if theirs else None),
                ]
            )
        get_state = median(t, f"get_state {GRAINFN}")
        handler_share = median(t, f"handler {GRAINFN}") - median(t, f"handler {PLAIN}")
        manager_share = median(t, f"manager {GRAINFN}") - median(t, f"manager {PLAIN}")
        grain_share = median(t, f"manager {GRAIN}") - median(t, f"manager {PLAIN}")
        shares.append(
            [
                name,
                fmt_micros(get_state),
                fmt_signed(handler_share),
                fmt_signed(manager_share),
                fmt_signed(grain_share),
            ]
        )
        figures[name] = {
            "handler - get_state": median(t, f"handler {GRAINFN}") - get_state,
            "save / get_state": ratio(median(t, f"it.save {GRAINFN}"), get_state),
            "manager / plain": ratio(
                median(t, f"manager {GRAINFN}"), median(t, f"manager {PLAIN}")
            ),
            "Grain manager / grainfn": ratio(
                median(t, f"manager {GRAIN}"), median(t, f"manager {GRAINFN}")
            ),
        }
    blocking = markdown_table(
        [
            "Blocking call: median (best)",
            GRAINFN,
            GRAIN,
            "plain item (JsonSave)",
            "plain / grainfn",
            "Grain / grainfn",
        ],
        rows,
    )
    share = markdown_table(
        [
            "Pipeline",
            "get_state()",
            "handler: grainfn - plain",
            "manager: grainfn - plain",
            "manager: Grain - plain",
        ],
        shares,
    )
    return blocking, share, figures


def result_rows(results: dict[str, dict[str, Timing]]) -> list[Row]:
    """The blocking-time table's lines that time Grain too, as `Row`s (medians, per call).

    For the JSON summary only (`benchmarks.suite`'s combined table): the
    blocking-time table shows the same medians.
    """
    rows = []
    for name, t in results.items():
        for label, key in BLOCKING_CALLS:
            ours, theirs, plain = (t.get(f"{key} {k}") for k in (GRAINFN, GRAIN, PLAIN))
            if ours is None or theirs is None:
                continue  # the handler: Grain's has no asynchronous save
            per_call: dict[str, float | None] = {GRAINFN: ours.median, GRAIN: theirs.median}
            if plain is not None:
                per_call[PLAIN] = plain.median
            rows.append(Row(f"{name} {label}", per_call, unit="us"))
    return rows


def fmt_signed(seconds: float) -> str:
    return ("-" if seconds < 0 else "") + fmt_micros(abs(seconds))


def main(argv: list[str] | None = None) -> None:
    run = Run("benchmarks.checkpoint", __doc__, "grainfn checkpoint benchmarks", argv)
    config = run.choose(default=DEFAULT, quick=QUICK)
    with tempfile.TemporaryDirectory() as tmp:
        results = {
            name: run.section(name, functools.partial(measure_pipeline, config, name, Path(tmp)))
            for name in PIPELINES
        }
    run.stop_clock()
    blocking, share, figures = report_tables(results)
    add = run.report.add
    add("### Blocking time of saving an iterator, per call")
    add()
    add(blocking)
    add()
    add(
        "Medians of the timed calls, best in parentheses. 'plain item' saves the grainfn "
        "iterator's state dict with Orbax's own `JsonCheckpointHandler`/`JsonSave`, through "
        "the same path: what Orbax costs without any iterator. Grain's handler is "
        "synchronous (no `async_save`): its manager save waits for the directory and "
        "writes the file before returning. Ratios above 1: grainfn blocks for less."
    )
    add()
    add("### What the iterator adds to a save (difference of medians)")
    add()
    add(share)
    add()
    run.report.add_rows(result_rows(results))
    targets = Targets()
    for name, f in figures.items():
        targets.at_most(
            f"{name}: the handler's synchronous part <= get_state() + 50 µs "
            "(no thread start, no I/O)",
            f["handler - get_state"],
            50e-6,
            fmt=fmt_signed_or_missing,
        )
        targets.at_most(
            f"{name}: it.save(dir) blocks <= 2x get_state()", f["save / get_state"], 2.0
        )
        targets.at_most(
            f"{name}: a manager save blocks <= 1.2x a plain item's", f["manager / plain"], 1.2
        )
        targets.at_least(
            f"{name}: a manager save blocks no longer than with Grain's CheckpointSave",
            f["Grain manager / grainfn"],
            1.0,
        )
    run.finish(targets)


def fmt_signed_or_missing(seconds: float | None) -> str:
    return MISSING if seconds is None else fmt_signed(seconds)


if __name__ == "__main__":
    main()

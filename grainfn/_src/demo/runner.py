"""The demo from start to end: train, checkpoint, preempt, resume, and compare with a clean run.

1. Write two synthetic image sets to ArrayRecord files (`data.write_sources`).
2. Read the pipeline alone once, for its throughput.
3. Reference run: train for `steps` steps without interruption, in this process.
4. Preempted run: the same training in a child process (`preempted`), which
   saves an Orbax checkpoint (parameters and data iterator) midway and is
   killed with SIGKILL some steps later, so the work after the checkpoint is
   lost; its worker processes must go away by themselves.
5. Resumed run: a new pipeline and a new model in this process, restored from
   the latest checkpoint, train to the end.
6. Check that the resumed run saw exactly the reference run's batches from the
   checkpoint on and ended with bitwise the same parameters; print the timings.
"""

from __future__ import annotations

import dataclasses
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import jax

from grainfn._src.demo import data, train
from grainfn._src.demo.preemption import cleanup_text, preempt
from grainfn._src.demo.train import Log, Step


@dataclasses.dataclass(frozen=True)
class Plan:
    """When the demo checkpoints and when it kills the training job.

    Examples:
        >>> Plan.of(416)
        Plan(steps=416, checkpoint_step=208, kill_step=312)
        >>> Plan.of(4)
        Plan(steps=4, checkpoint_step=2, kill_step=3)
        >>> Plan.of(3)
        Traceback (most recent call last):
        ...
        ValueError: steps must be at least 4 (checkpoint, then steps lost to the kill, then ...
    """

    steps: int
    checkpoint_step: int
    kill_step: int

    @staticmethod
    def of(steps: int) -> Plan:
        """Checkpoint halfway, kill halfway between the checkpoint and the end."""
        if steps < 4:
            raise ValueError(
                "steps must be at least 4 (checkpoint, then steps lost to the kill, then steps "
                f"left to resume), got {steps}."
            )
        checkpoint = steps // 2
        return Plan(steps, checkpoint, checkpoint + (steps - checkpoint) // 2)


def run(
    size: int = 20_000,
    batch_size: int = 64,
    seed: int = 0,
    progress: bool = True,
    steps: int | None = None,
    workers: int = 2,
) -> bool:
    """Runs the demo and prints what happens; returns whether the resumed run was identical.

    Args:
        size: Examples in the larger source ("cats"); the other has `size // 3`.
        batch_size: Examples per batch (per training step).
        seed: The seed of the data (shuffles, augmentation) and of the model.
        progress: Whether to show progress bars (on stderr).
        steps: Training steps; None: one epoch of the mix.
        workers: Worker processes of `mp_prefetch` (0: read in the training process).

    The files and checkpoints live in a temporary directory, removed at the end.
    """
    plan = check_options(size, batch_size, seed, steps, workers)
    with tempfile.TemporaryDirectory(prefix="grainfn-demo-") as folder:
        return _run_in(Path(folder), plan, size, batch_size, seed, progress, workers)


def check_options(size: int, batch_size: int, seed: int, steps: int | None, workers: int) -> Plan:
    """The plan of a demo run with these options; ValueError says which option is wrong.

    Examples:
        >>> check_options(20_000, 64, 0, None, 2)
        Plan(steps=416, checkpoint_step=208, kill_step=312)
        >>> check_options(30, 64, 0, None, 2)
        Traceback (most recent call last):
        ...
        ValueError: One epoch of size 30 holds only 0 batches of 64; the demo needs at least 4. ...
    """
    for name, value, least in [("size", size, 3), ("batch_size", batch_size, 1)]:
        if value < least:
            raise ValueError(f"{name} must be at least {least}, got {value}.")
    if not 0 <= seed < 2**32 - 1:
        raise ValueError(
            f"seed must be in [0, 2**32 - 1) (the next one seeds a source), got {seed}."
        )
    if workers < 0:
        raise ValueError(f"workers must be >= 0 (0: no worker processes), got {workers}.")
    if steps is None:
        steps = data.epoch_batches(size, batch_size)
        if steps < 4:
            raise ValueError(
                f"One epoch of size {size} holds only {steps} batches of {batch_size}; the demo "
                "needs at least 4. Pass a larger size, a smaller batch size, or steps."
            )
    return Plan.of(steps)


class StepBar:
    """A progress bar of training steps that starts at the first step.

    The first step of a run waits for its worker processes to start and for
    jax to compile the step, which is seconds against milliseconds for the
    others. The bar appears when it is done, so its rate and time estimate
    count only steady steps.
    """

    def __init__(self, name: str, total: int, enabled: bool) -> None:
        self.name, self.total, self.enabled = name, total, enabled
        self.bar: Any = None

    def update(self, steps: int = 1) -> None:
        if self.bar is None:
            from tqdm import tqdm

            self.bar = tqdm(
                total=self.total,
                initial=steps,
                desc=self.name,
                unit="step",
                disable=not self.enabled,
                leave=True,
            )
        else:
            self.bar.update(steps)

    def __enter__(self) -> StepBar:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.bar is not None:
            self.bar.close()


def _run_in(
    folder: Path, plan: Plan, size: int, batch_size: int, seed: int, progress: bool, workers: int
) -> bool:
    def bar(name: str, total: int) -> StepBar:
        return StepBar(name, total, progress)

    print(
        "grainfn demo: train a small JAX model on a Grain-style pipeline, preempt the training "
        "process with SIGKILL after a checkpoint, resume, and compare with an uninterrupted run.\n"
    )
    started = time.perf_counter()
    files = data.write_sources(folder, size)
    total = size + size // 3
    print(
        f"Wrote {total:,} synthetic 16x16x3 images with labels to 6 ArrayRecord files "
        f"in {time.perf_counter() - started:.2f} s."
    )

    def build() -> Any:
        return data.pipeline(files, batch_size, seed, workers)

    print(f"Pipeline ({workers} worker processes):")
    print(repr(build()).replace(str(folder), "$TMP"))
    epoch = data.epoch_batches(size, batch_size)
    print(
        f"\nModel: MLP {train.HIDDEN} hidden units, plain SGD (learning rate "
        f"{train.LEARNING_RATE}), jax.jit on {jax.default_backend()}.\n"
        f"Plan: {plan.steps} steps of {batch_size} examples ({_epochs(plan.steps, epoch)}), "
        f"checkpoint at step {plan.checkpoint_step}, SIGKILL at step {plan.kill_step}.\n",
        flush=True,
    )

    print("[1/4] The pipeline alone, no training", flush=True)
    alone = Log("pipeline alone")
    with bar("pipeline", plan.steps) as progress_bar, iter(build()) as batches:
        for _ in range(plan.steps):
            fetched = time.perf_counter()
            next(batches)
            alone.steps.append(Step(0, "", 0.0, time.perf_counter() - fetched, 0.0))
            progress_bar.update()

    print("[2/4] Reference run: uninterrupted, in this process", flush=True)
    reference = Log("reference")
    with bar("reference", plan.steps) as progress_bar, iter(build()) as batches:
        on_step = _recorder(reference, progress_bar.update)
        params = train.train(batches, train.init_params(seed), 0, plan.checkpoint_step, on_step)
        at_checkpoint = params
        final = train.train(batches, params, plan.checkpoint_step, plan.steps, on_step)
    losses = [step.loss for step in reference.steps]
    few = min(10, len(losses))
    print(
        f"  Loss {sum(losses[:few]) / few:.3f} over the first {few} steps, "
        f"{sum(losses[-few:]) / few:.3f} over the last {few}.",
        flush=True,
    )

    print("[3/4] Preempted run: a child process, killed after the checkpoint", flush=True)
    config = {
        "files": files,
        "batch_size": batch_size,
        "seed": seed,
        "workers": workers,
        "steps": plan.steps,
        "checkpoint_step": plan.checkpoint_step,
        "checkpoint_dir": str(folder / "checkpoints"),
    }
    with bar("preempted", plan.steps) as progress_bar:
        preempted = preempt(config, plan.kill_step, folder, progress_bar)
    lost = len(preempted.log.steps) - plan.checkpoint_step
    print(
        f"  Checkpoint {plan.checkpoint_step} (parameters and data iterator, one Orbax "
        f"CheckpointManager step): save() returned in {preempted.save_call * 1e3:.0f} ms, "
        f"committed after {preempted.save_committed * 1e3:.0f} ms.\n"
        f"  SIGKILL to pid {preempted.pid} when it reported step {preempted.killed_at}; it "
        f"had trained through step {len(preempted.log.steps)}: the {lost} steps after the "
        "checkpoint are lost.\n"
        f"  {cleanup_text(preempted)}",
        flush=True,
    )

    print("[4/4] Resumed run: a new pipeline and model, from the latest checkpoint", flush=True)
    resumed = Log("resumed")
    with train.checkpoint_manager(str(folder / "checkpoints")) as manager, iter(build()) as batches:
        restore_started = time.perf_counter()
        restored_step, restored = train.restore(manager, train.init_params(seed + 1), batches)
        restore_seconds = time.perf_counter() - restore_started
        print(
            f"  Restored step {restored_step} in {restore_seconds * 1e3:.0f} ms; "
            f"training steps {restored_step + 1}..{plan.steps}.",
            flush=True,
        )
        with bar("resumed", plan.steps - restored_step) as progress_bar:
            on_step = _recorder(resumed, progress_bar.update)
            resumed_final = train.train(batches, restored, restored_step, plan.steps, on_step)

    checks = compare(plan, reference, preempted.log, restored_step, resumed)
    checks += [
        _params_check(
            f"The checkpoint's parameters (step {restored_step})", restored, at_checkpoint
        ),
        _params_check("The final parameters", resumed_final, final),
    ]
    print("\nChecks")
    for ok, text in checks:
        print(f"  {'ok  ' if ok else 'FAIL'} {text}")
    same = all(ok for ok, _ in checks)

    print("\nThroughput (examples/s and batches/s over the time waiting for data plus training)")
    print(throughput_table([alone, reference, preempted.log, resumed], batch_size))
    print(
        f"Checkpoint: save() {preempted.save_call * 1e3:.0f} ms in the training loop, "
        f"committed after {preempted.save_committed * 1e3:.0f} ms; "
        f"restore {restore_seconds * 1e3:.0f} ms."
    )
    print(f"Total wall time: {time.perf_counter() - started:.1f} s.\n")
    if same:
        print(
            "Result: identical. The resumed run saw exactly the batches of the uninterrupted run "
            "and ended with bitwise the same parameters."
        )
    else:
        print("Result: DIFFERENT from the uninterrupted run (see the FAIL lines above).")
    return same


def _epochs(steps: int, epoch: int) -> str:
    epochs = steps / epoch
    return f"{epochs:.3g} epoch" + ("" if epochs == 1 else "s")


def _recorder(log: Log, advance: Callable[[], Any]) -> Callable[[Step], None]:
    def record(step: Step) -> None:
        log.steps.append(step)
        advance()

    return record


def compare(
    plan: Plan, reference: Log, preempted: Log, restored_step: int, resumed: Log
) -> list[tuple[bool, str]]:
    """The checks on the batches the three runs saw: (passed, what was checked) each.

    Examples:
        >>> steps = lambda *digests: [Step(0, d, 0.0, 0.0, 0.0) for d in digests]
        >>> ok = compare(Plan.of(4), Log("r", steps(*"abcd")), Log("p", steps(*"abc")),
        ...              2, Log("s", steps(*"cd")))
        >>> [passed for passed, _ in ok]
        [True, True, True]
        >>> bad = compare(Plan.of(4), Log("r", steps(*"abcd")), Log("p", steps(*"abc")),
        ...               2, Log("s", steps(*"cx")))
        >>> bad[2]
        (False, 'The resumed run saw 2 batches; they differ from the reference run from step 4 on.')
    """
    k, seen = plan.checkpoint_step, len(preempted.steps)
    differs = _first_difference(preempted.digests, reference.digests[:seen])
    checks = [
        (
            differs is None,
            f"The killed run's {seen} batches (steps 1..{seen}) are the reference run's."
            if differs is None
            else f"The killed run's batch at step {differs} differs from the reference run's.",
        ),
        (
            restored_step == k,
            f"The latest checkpoint is step {restored_step}"
            + ("." if restored_step == k else f", not step {k}."),
        ),
    ]
    expected = reference.digests[restored_step:]
    differs = _first_difference(resumed.digests, expected)
    if differs is None:
        text = (
            f"The resumed run's {len(resumed.steps)} batches (steps {restored_step + 1}.."
            f"{plan.steps}) are identical to the reference run's."
        )
    else:
        text = (
            f"The resumed run saw {len(resumed.steps)} batches; they differ from the reference "
            f"run from step {restored_step + differs} on."
        )
    return [*checks, (differs is None, text)]


def _first_difference(a: Sequence[str], b: Sequence[str]) -> int | None:
    """The 1-based place where `a` and `b` first differ (also in length), or None."""
    for place, (x, y) in enumerate(zip(a, b), start=1):
        if x != y:
            return place
    return None if len(a) == len(b) else min(len(a), len(b)) + 1


def _params_check(what: str, ours: train.Params, reference: train.Params) -> tuple[bool, str]:
    same, largest = train.same_params(ours, reference)
    if same:
        return True, f"{what} are bitwise identical to the reference run's."
    return False, f"{what} differ from the reference run's: largest |difference| {largest:.3g}."


def throughput_table(logs: Sequence[Log], batch_size: int) -> str:
    """One line per run: steps, examples/s, batches/s, seconds waiting and training.

    The first batch's wait (starting the workers) is shown on its own too.

    Examples:
        >>> log = Log("run", [Step(1, "", 0.0, 0.3, 0.4), Step(2, "", 0.0, 0.1, 0.2)])
        >>> print(throughput_table([log], batch_size=10))
        run   steps  examples/s  batches/s  first batch  waiting for data  in train step
        run       2          20          2       0.30 s            0.40 s         0.60 s
    """
    headers = "run|steps|examples/s|batches/s|first batch|waiting for data|in train step"
    rows = [headers.split("|")]
    for log in logs:
        seconds = log.wait + log.compute
        count = len(log.steps)
        rate = count / seconds if seconds else float("nan")
        rows.append(
            [
                log.name,
                str(count),
                f"{rate * batch_size:,.0f}",
                f"{rate:,.0f}",
                f"{log.steps[0].wait:.2f} s" if log.steps else "-",
                f"{log.wait:.2f} s",
                f"{log.compute:.2f} s" if log.compute else "-",
            ]
        )
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    return "\n".join(
        "  ".join(c.ljust(w) if i == 0 else c.rjust(w) for i, (c, w) in enumerate(zip(row, widths)))
        for row in rows
    )

"""Command line of grainfn: `python -m grainfn demo` and `python -m grainfn bench`.

demo
    The main job end to end on built-in synthetic data: writes a small
    ArrayRecord dataset of images and labels, and reads it with the Grain-style
    API (two sources mixed 3:1, shuffled, augmented with `random_map`, batched,
    `mp_prefetch` with 2 worker processes) to train a small JAX model with plain
    SGD. A training job in a child process saves an Orbax checkpoint (parameters
    and data iterator together) midway and is killed with SIGKILL some steps
    later; a new pipeline and model restored from the checkpoint finish the run.
    The demo checks that the resumed run saw exactly the batches of an
    uninterrupted run and ended with bitwise the same parameters (exit status 0
    if so, 1 if not), and prints progress bars and a throughput summary.
    Options: --size, --batch-size, --steps, --workers, --seed, --no-progress.

bench
    Runs the benchmark suites of a source checkout (the `benchmarks` package
    next to `grainfn`, not installed with it: run the command from the root of
    the checkout, where `python -m` finds it), each in its own process, with a
    progress bar per suite on stderr; then prints one table (a line per
    benchmark: grainfn's figure, Grain's time / grainfn's, grainfn's time / the
    hand-written loop's, the status of its targets) and a summary ("N of M
    targets met; K of K suites ran in S s.", then the targets not met). Exit
    status 1 if a suite failed to run. Options: --quick, --suite NAME
    (repeatable), --markdown PATH (every figure and target, as Markdown);
    `python -m grainfn bench --help` lists the suites.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import textwrap
from pathlib import Path
from types import ModuleType


def main(argv: list[str] | None = None) -> int:
    """Runs the command named on the command line and returns the exit status."""
    parser = argparse.ArgumentParser(
        prog="python -m grainfn",
        description=__doc__,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser(
        "demo",
        help="train, preempt and resume a JAX model on built-in synthetic data",
        description=_section("demo"),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    demo.add_argument("--size", type=int, default=20_000, help="examples in the larger source")
    demo.add_argument("--batch-size", type=int, default=64, help="examples per training step")
    demo.add_argument(
        "--steps", type=int, default=None, help="training steps (default: one epoch of the mix)"
    )
    demo.add_argument(
        "--workers", type=int, default=2, help="mp_prefetch worker processes (0: none)"
    )
    demo.add_argument("--seed", type=int, default=0, help="seed of the data and the model")
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bars")
    commands.add_parser(
        "bench",
        add_help=False,  # its options, --help included, belong to benchmarks.run
        help="run the benchmark suites (from a source checkout) and print the ratios vs Grain",
    )
    args, rest = parser.parse_known_args(argv)

    if args.command == "bench":
        runner = benchmark_runner()
        if runner is None:
            print(
                "python -m grainfn bench: the benchmark suites were not found. They live in "
                "the `benchmarks` directory of a source checkout of grainfn and are not "
                "installed with it: run the command from the root of a source checkout, as "
                "`python -m grainfn bench` (or `python -m benchmarks.run`), where Python "
                "imports them from the current directory.",
                file=sys.stderr,
            )
            return 2
        status: int = runner.main(rest, prog="python -m grainfn bench")
        return status
    if rest:
        parser.error(f"unrecognized arguments: {' '.join(rest)}")
    from grainfn._src.demo import check_options, run

    try:
        check_options(args.size, args.batch_size, args.seed, args.steps, args.workers)
    except ValueError as error:  # the message says which option is wrong and why
        demo.error(str(error))
    same = run(
        size=args.size,
        batch_size=args.batch_size,
        seed=args.seed,
        progress=not args.no_progress,
        steps=args.steps,
        workers=args.workers,
    )
    return 0 if same else 1


def _section(command: str) -> str:
    """The paragraph of the module's docstring about `command`."""
    text = (__doc__ or "").split(f"\n{command}\n", 1)[1].split("\n\n", 1)[0]
    return textwrap.dedent(text)


def source_roots() -> list[Path]:
    """The folders `import benchmarks` looks in: the entries of `sys.path`, in order.

    Under `python -m grainfn`, the first is the current directory: from the
    root of a source checkout, its `benchmarks` package is importable. Nothing
    is added to `sys.path`.

    Examples:
        >>> all(root.is_absolute() for root in source_roots())
        True
    """
    return [Path(entry or ".").resolve() for entry in sys.path]


def benchmark_runner() -> ModuleType | None:
    """The `benchmarks.run` module of the source checkout `import` finds, or None if none.

    It is imported as any module is, from `sys.path` (see `source_roots`).

    Examples:
        >>> runner = benchmark_runner()  # from the root of a checkout: its benchmarks.run
        >>> runner is None or runner.__name__ == "benchmarks.run"
        True
    """
    if not any((root / "benchmarks" / "run.py").is_file() for root in source_roots()):
        return None
    try:
        return importlib.import_module("benchmarks.run")
    except ModuleNotFoundError as error:  # another `benchmarks` package comes first
        if error.name in ("benchmarks", "benchmarks.run"):
            return None
        raise


if __name__ == "__main__":
    sys.exit(main())

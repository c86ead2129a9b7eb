"""Command line: `python -m grainfn demo`."""

from __future__ import annotations

import argparse
import sys


def main(argv: list[str] | None = None) -> int:
    """Runs the command named on the command line and returns the exit status."""
    parser = argparse.ArgumentParser(prog="python -m grainfn", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)
    demo = commands.add_parser("demo", help="run the main pipeline on built-in synthetic data")
    demo.add_argument("--size", type=int, default=20_000, help="examples in the larger source")
    demo.add_argument("--batch-size", type=int, default=64)
    demo.add_argument("--seed", type=int, default=0)
    demo.add_argument("--no-progress", action="store_true", help="hide the progress bar")
    args = parser.parse_args(argv)

    if args.command == "demo":
        from grainfn._src import demo as demo_module

        same = demo_module.run(args.size, args.batch_size, args.seed, not args.no_progress)
        return 0 if same else 1
    return 2  # pragma: no cover - argparse rejects unknown commands


if __name__ == "__main__":
    sys.exit(main())

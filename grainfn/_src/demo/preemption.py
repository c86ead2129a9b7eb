"""The preempted run, seen from the demo: a training job in a child process, killed with SIGKILL.

`preempt` starts `python -m grainfn._src.demo.preempted` in a process group
of its own (so the job's processes, and only them, can be listed and, as a
last resort, killed), reads its reports, and kills the training process alone
once it reports the step to kill at, as a machine's out-of-memory killer or a
preemption would. Then it checks that the job's other processes (the
`mp_prefetch` workers, the fork server, the resource tracker) exit by
themselves. Blocks in flight between processes are anonymous memory files,
which the kernel frees with their last process: nothing is left to remove.
"""

from __future__ import annotations

import dataclasses
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from grainfn._src.demo.train import Log, Step

EXIT_SECONDS = 10.0
"""How long the killed job's other processes get to exit by themselves."""


@dataclasses.dataclass
class Preemption:
    """What the parent saw of the preempted run."""

    log: Log
    pid: int
    save_call: float = float("nan")
    save_committed: float = float("nan")
    killed_at: int | None = None
    others: int = 0  # the killed job's other processes (workers, fork server, ...)
    exit_seconds: float = 0.0  # until they were all gone
    forced: int = 0  # of them, killed by us after EXIT_SECONDS
    temp_dir: str | None = None  # multiprocessing's temporary directory in the job


def preempt(config: dict[str, Any], kill_step: int, workdir: Path, bar: Any) -> Preemption:
    """Runs the training job of `config` and SIGKILLs it once it reports step `kill_step`.

    Args:
        config: The job's configuration (see `grainfn._src.demo.preempted`).
        kill_step: The step after which the training process is killed.
        workdir: A directory for the job's stderr (shown if it fails before the kill).
        bar: A progress bar, advanced once per step the job reports.

    Raises:
        RuntimeError: The job ended before the step to kill at.
    """
    command = [sys.executable, "-m", "grainfn._src.demo.preempted", json.dumps(config)]
    package_root = str(Path(__file__).resolve().parents[3])
    path = os.environ.get("PYTHONPATH")
    env = {**os.environ, "PYTHONPATH": package_root + (os.pathsep + path if path else "")}
    with open(workdir / "stderr.txt", "w+", encoding="utf-8") as stderr:
        child = subprocess.Popen(
            command,
            stdout=subprocess.PIPE,
            stderr=stderr,
            text=True,
            env=env,
            start_new_session=True,  # its own process group: the job's processes, and only them
        )
        assert child.stdout is not None
        preemption = Preemption(Log("preempted"), child.pid)
        try:
            for line in child.stdout:
                _handle(preemption, line, bar)
                if preemption.log.steps and preemption.log.steps[-1].step == kill_step:
                    _kill(child, preemption)
                    break
            if preemption.killed_at is not None:
                for line in child.stdout:  # steps done between the kill and the process's end
                    _handle(preemption, line, bar)
        finally:
            if child.poll() is None:  # an error or Ctrl-C here: leave nothing running
                os.killpg(child.pid, signal.SIGKILL)
            child.wait()
            child.stdout.close()
        if preemption.killed_at is None:
            stderr.seek(0)
            raise RuntimeError(
                f"The training process (pid {child.pid}) ended with status {child.returncode} "
                f"before step {kill_step}, where it was to be killed. Its stderr:\n"
                + stderr.read()[-4000:]
            )
    return preemption


def _handle(preemption: Preemption, line: str, bar: Any) -> None:
    try:
        message = json.loads(line)
    except json.JSONDecodeError:
        return  # not one of its reports: the stderr file has any error
    event = message.pop("event", None)
    if event == "step":
        preemption.log.steps.append(Step(**message))
        bar.update()
    elif event == "started":
        preemption.temp_dir = message["temp_dir"]
    elif event == "saved":
        preemption.save_call, preemption.save_committed = message["call"], message["committed"]


def _kill(child: subprocess.Popen[str], preemption: Preemption) -> None:
    """SIGKILLs the training process alone, then waits for the rest of its job to exit."""
    others = group_members(child.pid) - {child.pid}
    os.kill(child.pid, signal.SIGKILL)
    child.wait()
    preemption.killed_at = preemption.log.steps[-1].step
    preemption.others = len(others)
    started = time.monotonic()
    while group_members(child.pid) and time.monotonic() - started < EXIT_SECONDS:
        time.sleep(0.02)
    left = group_members(child.pid)
    if left:
        preemption.forced = len(left)
        os.killpg(child.pid, signal.SIGKILL)
        while group_members(child.pid) and time.monotonic() - started < 2 * EXIT_SECONDS:
            time.sleep(0.02)
    preemption.exit_seconds = time.monotonic() - started
    temp_dir = preemption.temp_dir  # a killed process cannot remove its own (the fork server's)
    if temp_dir and Path(temp_dir).name.startswith("pymp-"):
        shutil.rmtree(temp_dir, ignore_errors=True)


def group_members(pgid: int) -> set[int]:
    """The live (not zombie) processes of process group `pgid`; empty where /proc is missing."""
    members = set()
    for entry in Path("/proc").glob("[0-9]*"):
        try:
            fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
        except (OSError, IndexError):
            continue  # it ended meanwhile
        if fields[0] != "Z" and int(fields[2]) == pgid:
            members.add(int(entry.name))
    return members


def cleanup_text(preemption: Preemption) -> str:
    others = (
        f"Its {preemption.others} other processes (workers, fork server, resource tracker) "
        f"exited by themselves within {preemption.exit_seconds:.2f} s"
    )
    if preemption.forced:
        others = (
            f"{preemption.forced} of its {preemption.others} other processes were still running "
            f"after {EXIT_SECONDS:.0f} s and were killed"
        )
    if not preemption.others:
        others = "It started no other processes"
    if not Path("/proc").is_dir():
        others = "(Its other processes could not be listed here: no /proc)"
    return others + "; the blocks in flight went with them (memory files, freed by the kernel)."

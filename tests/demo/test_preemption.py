"""The demo's view of the preempted job: its process group and what became of it."""

from __future__ import annotations

import os
from pathlib import Path

from grainfn._src.demo.preemption import EXIT_SECONDS, Preemption, cleanup_text, group_members
from grainfn._src.demo.train import Log


def test_processgroup_members_lists_live_members() -> None:
    assert os.getpid() in group_members(os.getpgid(0))
    assert group_members(2**22 + 12345) == set()  # no such group


def test_cleanup_text_says_what_became_of_the_other_processes() -> None:
    assert Path("/proc").is_dir()  # (the texts below are those of a machine with /proc)
    gone = Preemption(Log("p"), pid=1, others=3, exit_seconds=0.5)
    assert cleanup_text(gone).startswith(
        "Its 3 other processes (workers, fork server, resource tracker) exited by themselves "
        "within 0.50 s; the blocks in flight went with them"
    )
    forced = Preemption(Log("p"), pid=1, others=3, forced=2)
    assert cleanup_text(forced).startswith(
        f"2 of its 3 other processes were still running after {EXIT_SECONDS:.0f} s and were killed"
    )
    alone = Preemption(Log("p"), pid=1)
    assert cleanup_text(alone).startswith("It started no other processes;")

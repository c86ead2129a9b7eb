"""What a worker's death means for the block it was reading: read it again, or an error.

A `WorkerPool` (see `processes`) calls a worker dead when its process ends
(a signal, `os._exit`, the OOM killer) or when it sends nothing for
`worker_timeout` seconds (the pool then kills it: it is stopped, or stuck).
A `RayPool` (see `ray_pool`) calls a Ray actor dead when a call to it raises
`RayActorError` (its process ended, or its node left). Either way the rule is
the same, and it blames a position only on evidence:

1. The block the worker died on is sent to a new worker *one position at a
   time* (`after_death` returns a `Retry`); the new worker answers each
   position as soon as it has read it.
2. If that worker reads the whole block, the first death was not caused by
   those positions (another process, the OOM killer, a stopped process): the
   block's result is an error alone (`not_theirs`), so the reader stays at
   the block's first position and the next read continues.
3. If it dies too, the position it died on is a suspect, and the block is
   read once more, one position at a time. Only a second death at the same
   position blames it: the block's result is the positions before it and an
   error naming it, like an exception there.

Ray actors differ in rule 2 alone: a block read again without a death is
delivered as it is, with no error. On a cluster a lost actor or node is
ordinary (a preempted node, an autoscaler that scales down), and costs
nothing. Their one-at-a-time reads also go on from the suspect position
(`after_death(..., keep=True)`): each position is a call of its own, so the
positions before it are in hand already.

A worker that dies while starting (loading the pipeline or running
`worker_init_fn`) ends its block with an error at once: no position is read.
"""

from __future__ import annotations

import dataclasses
import math
import numbers
from typing import Any

TIMEOUT_HINT = (
    " If the work is legitimately that slow (a large element, a slow source, a long "
    "worker_init_fn), raise worker_timeout; otherwise look for what stopped the worker: "
    "a SIGSTOP (kill -STOP, Ctrl-Z), a debugger attached to it, or an endless loop or a "
    "deadlock in the pipeline's code."
)
"""What to do about a worker the pool killed for sending nothing within worker_timeout."""

_NOT_THEIRS = (
    " A new worker read those positions again one at a time without dying or stalling, so "
    "they did not cause it. Nothing was lost: the next read starts again at the first of them."
)

_CRASH_HINT = (
    " Look in the pipeline's functions at that position for a crash in native code, "
    "os._exit or sys.exit, or an element too large for the memory."
)


class WorkerError(RuntimeError):
    """A worker process died, could not start, or its pipeline's code raised KeyboardInterrupt.

    See "When things fail" in the parallelism docs. Also raised for the Ray
    actors of `fn.ray_prefetch`: a position at which two actors in a row
    died, or a block with no answer within its `worker_timeout` (see
    docs/distributed.md). Nothing is lost: the iterator stays after the last
    element it returned, and the next read goes on from there with a new
    worker.
    """


@dataclasses.dataclass(frozen=True)
class Death:
    """How a worker ended, as the parent saw it.

    Attributes:
        index: The worker's index in its pool.
        pid: Its process id.
        how: How it ended, completing "grainfn worker 0 (pid 12) ...", e.g.
            "was killed by signal 9 (SIGKILL)".
        ready: Whether it had loaded the pipeline and run `worker_init_fn`.
        hint: What to do about it, when the cause is known (a timeout), else "".
        kind: What it was, as errors name it: "grainfn worker" (a process of
            `mp_prefetch` or a DataLoader) or "Ray actor" (of a `RayPool`).

    Examples:
        >>> Death(0, 12, "was killed by signal 9 (SIGKILL)", True).who
        'grainfn worker 0 (pid 12)'
        >>> death = Death(1, 34, "died", True, kind="Ray actor")
        >>> death.who, death.kinds, death.short
        ('Ray actor 1 (pid 34)', 'Ray actors', 'actors')
    """

    index: int
    pid: int | None
    how: str
    ready: bool
    hint: str = ""
    kind: str = "grainfn worker"

    @property
    def who(self) -> str:
        """The worker, as errors name it."""
        return f"{self.kind} {self.index} (pid {self.pid})"

    @property
    def kinds(self) -> str:
        """Such workers, as errors name them: "grainfn workers", "Ray actors"."""
        return f"{self.kind}s"

    @property
    def short(self) -> str:
        """Such workers in a word: "workers", "actors"."""
        return f"{self.kind.split()[-1]}s"


def worker_name(index: int, pid: int | None) -> str:
    """A worker process as errors name it: "grainfn worker 0 (pid 12)"."""
    return f"grainfn worker {index} (pid {pid})"


def of_leaf(leaf: int, count: int) -> str:
    """Which dataset of a pipeline reading `count` of them an error is about ("" if one)."""
    return f" of dataset {leaf} of the pipeline" if count > 1 else ""


@dataclasses.dataclass
class Retry:
    """A block re-sent one position at a time after its worker died: why, and what came back.

    Attributes:
        first_death: The error message of the death that started the retry.
        hint: What to do about that death ("" when unknown).
        parts: The elements the one-at-a-time read has answered so far.
        suspect: The position the last one-at-a-time read died on, if one did.
    """

    first_death: str
    hint: str = ""
    parts: list[Any] = dataclasses.field(default_factory=list)
    suspect: int | None = None


MAX_WORKER_TIMEOUT = (2**31 - 1) // 1000
"""The longest `worker_timeout`, in seconds: 2147483, about 24.8 days.

The parent waits for its workers with `poll()`, which takes a timeout of at
most 2**31 - 1 milliseconds; a longer one raises OverflowError there. For
waits without end there is None.
"""


def check_worker_timeout(value: Any, what: str = "worker_timeout") -> float | None:
    """Returns `value` as seconds (a float), or None, after checking it.

    Args:
        value: None (wait for a worker forever) or a number of seconds > 0 and
            at most `MAX_WORKER_TIMEOUT` (about 24.8 days).
        what: The name of the option, for the error.

    Raises:
        TypeError: if `value` is neither None nor a number.
        ValueError: if it is not finite, not > 0, or above `MAX_WORKER_TIMEOUT`.

    Examples:
        >>> check_worker_timeout(30)
        30.0
        >>> check_worker_timeout(0)
        Traceback (most recent call last):
        ...
        ValueError: worker_timeout must be None (wait forever) or a finite number ..., got 0.
        >>> check_worker_timeout(1e10)
        Traceback (most recent call last):
        ...
        ValueError: worker_timeout must be at most 2147483 seconds (about 24.8 days, the \
longest wait poll() takes), got 10000000000.0. Pass None to wait for a worker as long as \
it lives.
    """
    allowed = "None (wait forever) or a finite number of seconds > 0"
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise TypeError(f"{what} must be {allowed}, got {value!r} of type {type(value).__name__}.")
    seconds = float(value)
    if not math.isfinite(seconds) or seconds <= 0:
        raise ValueError(f"{what} must be {allowed}, got {value!r}.")
    if seconds > MAX_WORKER_TIMEOUT:
        raise ValueError(
            f"{what} must be at most {MAX_WORKER_TIMEOUT} seconds (about 24.8 days, the longest "
            f"wait poll() takes), got {value!r}. Pass None to wait for a worker as long as it "
            "lives."
        )
    return seconds


def interrupted(position: int, who: str, where: str = "") -> WorkerError:
    """The error of a KeyboardInterrupt that the pipeline's code raised in a worker at `position`.

    Workers ignore Ctrl-C (the parent handles it), so a KeyboardInterrupt in
    a worker comes from the pipeline's own code, not from a key press. Raised
    in the parent as it is, it would stop the run as a Ctrl-C does and pass
    by every `except Exception`; so it is a `WorkerError` at its position,
    like any exception there: the positions before it are delivered, and the
    next read tries that position again.

    Args:
        position: The position whose reading raised it.
        who: The worker (see `worker_name`).
        where: Which dataset of the pipeline (see `of_leaf`).

    Examples:
        >>> print(interrupted(5, "grainfn worker 0 (pid 12)"))
        The pipeline's code raised KeyboardInterrupt at position 5 in grainfn worker 0 \
(pid 12). Workers ignore Ctrl-C (this process handles it), so it came from that code, \
not from a key press: it is this error, where a KeyboardInterrupt would stop the run as \
Ctrl-C does. The positions before it were delivered; the next read tries position 5 \
again. Look in the pipeline's functions for what raises KeyboardInterrupt there.
    """
    return WorkerError(
        f"The pipeline's code raised KeyboardInterrupt at position {position}{where} in {who}. "
        "Workers ignore Ctrl-C (this process handles it), so it came from that code, not from "
        "a key press: it is this error, where a KeyboardInterrupt would stop the run as Ctrl-C "
        f"does. The positions before it were delivered; the next read tries position {position} "
        "again. Look in the pipeline's functions for what raises KeyboardInterrupt there."
    )


def timed_out(seconds: float) -> str:
    """How a worker ended that the pool killed after `seconds` without an answer (see `Death`)."""
    return f"was killed after sending nothing for {seconds:g} s (worker_timeout={seconds:g})"


def after_death(
    death: Death,
    retry: Retry | None,
    first: int,
    stop: int,
    where: str = "",
    keep: bool = False,
) -> Retry | tuple[list[Any], str]:
    """What to do with block `[first, stop)` after `death`: read it again, or end it.

    Args:
        death: How the worker reading it ended.
        retry: The one-at-a-time read the worker was doing, or None for a
            whole-block read.
        first: The block's first position.
        stop: The position after its last.
        where: Which dataset of the pipeline, for the message ("" for the only one).
        keep: Whether the next one-at-a-time read goes on from the suspect
            position, keeping the parts read before it (Ray actors: a call
            per position); False starts it again at `first` (worker processes).

    Returns:
        A `Retry` to send the block with, one position at a time; or the
        block's result: the elements delivered and the message of its error.

    Examples:
        >>> death = Death(0, 12, "died", True, kind="Ray actor")
        >>> retry = after_death(death, None, 10, 20)
        >>> retry.first_death
        'Ray actor 0 (pid 12) died while reading positions [10, 20).'
        >>> retry.parts.extend([10, 11])  # then an actor died at position 12
        >>> retry = after_death(death, retry, 10, 20, keep=True)
        >>> retry.suspect, retry.parts
        (12, [10, 11])
        >>> parts, message = after_death(death, retry, 10, 20, keep=True)  # and again
        >>> parts, message[:37]
        ([10, 11], 'Reading position 12 kills Ray actors.')
    """
    if not death.ready:
        return [], (
            f"{death.who} {death.how} while starting: it was loading the pipeline or running "
            f"worker_init_fn. The next read starts new {death.short}.{death.hint}"
        )
    if retry is None:
        first_death = f"{death.who} {death.how} while reading positions [{first}, {stop}){where}."
        return Retry(first_death, death.hint)
    culprit = first + len(retry.parts)
    if retry.suspect != culprit:  # a first death there: perhaps not its doing
        return Retry(retry.first_death, retry.hint, retry.parts if keep else [], culprit)
    return retry.parts, (
        f"Reading position {culprit}{where} kills {death.kinds}. {retry.first_death} New "
        f"{death.short} read them again one at a time, and two in a row died at position "
        f"{culprit} (the last, pid {death.pid}, {death.how}). The positions before it were "
        f"delivered; the next read tries position {culprit} again."
        f"{death.hint or _CRASH_HINT}"
    )


def not_theirs(retry: Retry) -> str:
    """The error of a block read again one position at a time without a death (rule 2)."""
    return retry.first_death + _NOT_THEIRS + retry.hint

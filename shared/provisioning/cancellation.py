"""Stopping an apply that an operator cancelled, between two of its steps.

A cancel is recorded on the run (see :func:`shared.provisioning.decisions.cancel`).
An apply in process reads it before each slice and, through :class:`CancelWatch`,
between the steps of a slice. A runner job never reads the run (its identity
has no right on ``ProvisioningRuns``): the cancel also sets ``CancelRequested``
on the run's job rows, and the job's :class:`JobCancelWatch` reads its own row.
Either watch reads at most once per ``interval`` seconds, so a watched apply
of thousands of quick steps costs a handful of reads, while a cancel still
stops it within about a second plus one step.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from shared.iac.api import JobRequest, JobStore
from shared.provisioning.store import ProvisioningStore


class _Watch:
    """Called between apply steps: answers what ``read`` says, reading it at most once per ``interval``."""

    def __init__(self, read: Callable[[], bool], interval: float, clock: Callable[[], float], read_first: bool) -> None:
        self._read = read
        self._interval = interval
        self._clock = clock
        self._checked_at: float | None = None if read_first else clock()
        self._cancelled = False

    def __call__(self) -> bool:
        if self._cancelled:
            return True
        now = self._clock()
        if self._checked_at is not None and now - self._checked_at < self._interval:
            return False
        self._checked_at = now
        self._cancelled = self._read()
        return self._cancelled


class CancelWatch(_Watch):
    """The in-process apply's watch: has the run been cancelled since the slice began? (It read the run
    just before it began, so the first read waits one interval.)"""

    def __init__(
        self,
        store: ProvisioningStore,
        tenant: str,
        environment: str,
        run_id: str,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        def read() -> bool:
            run = store.find_run(tenant, environment, run_id)
            return run is not None and run.cancel_requested

        super().__init__(read, interval, clock, read_first=False)


class JobCancelWatch(_Watch):
    """A runner job's watch: its own ``RunnerJobs`` row's ``CancelRequested``, read before the first step too
    (a job launched just after a cancel finds the flag there)."""

    def __init__(
        self, jobs: JobStore, request: JobRequest, interval: float = 1.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        super().__init__(lambda: jobs.cancel_requested(request), interval, clock, read_first=True)

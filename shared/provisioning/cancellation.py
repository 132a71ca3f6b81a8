"""Stopping an apply that an operator cancelled, between two of its steps.

A cancel is recorded on the run (see :func:`shared.provisioning.decisions.cancel`);
the apply reads it before each slice and, through :class:`CancelWatch`, between
the steps of a slice. The run row is read at most once per ``interval`` seconds,
so a watched apply of thousands of quick steps costs a handful of reads, while
a cancel still stops it within about a second plus one step.
"""

from __future__ import annotations

import time
from collections.abc import Callable

from shared.provisioning.store import ProvisioningStore


class CancelWatch:
    """Called between apply steps: has the run been cancelled since the apply began?"""

    def __init__(
        self,
        store: ProvisioningStore,
        tenant: str,
        environment: str,
        run_id: str,
        interval: float = 1.0,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._store = store
        self._run = (tenant, environment, run_id)
        self._interval = interval
        self._clock = clock
        self._checked_at = clock()  # the slice read the run just before it began
        self._cancelled = False

    def __call__(self) -> bool:
        if self._cancelled:
            return True
        now = self._clock()
        if now - self._checked_at < self._interval:
            return False
        self._checked_at = now
        run = self._store.find_run(*self._run)
        self._cancelled = run is not None and run.cancel_requested
        return self._cancelled

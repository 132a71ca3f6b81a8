"""Whose is a stack lock? The runner jobs' rows answer for the locks a job left (see :mod:`shared.iac.pulumi.locks`).

The candidates are the jobs of the stack's tenant and environment (one stack
each) that ran on the lock's host and had been claimed when the lock was
taken; the job asking is never one (it was claimed after). The owner is
``dead`` only when there is at least one candidate and none of them is still
running (:mod:`.liveness`: finished, or silent past ``JobStaleSeconds``);
``alive`` when one runs; ``unknown`` without candidates -- a lock no job of
this installation can have taken is never ours to remove.
"""

from __future__ import annotations

from datetime import datetime

from shared.iac.jobs.liveness import liveness
from shared.iac.jobs.store import JobStore
from shared.iac.pulumi.locks import OwnerState
from shared.platform import clock


class JobLockOwners:
    def __init__(
        self,
        store: JobStore,
        *,
        tenant: str,
        environment: str,
        current_job_id: str,
        stale_seconds: float,
        start_seconds: float,
    ) -> None:
        self._store = store
        self._tenant = tenant
        self._environment = environment
        self._current = current_job_id
        self._stale = stale_seconds
        self._start = start_seconds

    def __call__(self, hostname: str, locked_at: datetime) -> tuple[OwnerState, str]:
        jobs = [
            job
            for job in self._store.environment_jobs(self._tenant, self._environment, hostname)
            if job.job_id != self._current and job.claimed_at is not None and job.claimed_at <= locked_at
        ]
        if not jobs:
            return "unknown", f"no runner job of {self._tenant}/{self._environment} ran on {hostname or '?'} then"
        now = clock.utcnow()
        states = {
            job.job_id: liveness(job, now, stale_seconds=self._stale, start_seconds=self._start).state for job in jobs
        }
        running = sorted(job for job, state in states.items() if state == "running")
        if running:
            return "alive", f"runner job {', '.join(running)} is still running"
        return "dead", "runner job(s) " + ", ".join(f"{job} {state}" for job, state in sorted(states.items()))

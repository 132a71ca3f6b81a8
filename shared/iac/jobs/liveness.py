"""Is a runner job finished, still running, or dead? Decided from its row alone (pure).

A job is *running* while its heartbeat is younger than ``stale_seconds``, or,
before its first heartbeat, while its launch is younger than ``start_seconds``
(a Container Apps job may pull its image first). Past either, it is *dead*:
killed, evicted, out of memory, or never started. A dead job is never waited
for again; the orchestration launches a new attempt or fails the run.

A store outage silences every live job's heartbeat too. A job waits one out
for at most ``IaCSettings.job_outage_seconds``, which keeps the outage plus two
heartbeats inside ``stale_seconds`` (its heartbeat lands again within a beat of
the store's return), so a job riding out an outage is never judged dead here.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from shared.iac.jobs.store import FINISHED, JobRecord

JobState = Literal["finished", "running", "dead"]


@dataclass(frozen=True)
class Liveness:
    state: JobState
    detail: str


def liveness(record: JobRecord | None, now: datetime, *, stale_seconds: float, start_seconds: float) -> Liveness:
    if record is None:
        return Liveness("dead", "the job has no record: it was never launched")
    if record.state == FINISHED:
        return Liveness("finished", "the job finished")
    if record.heartbeat_at is not None:
        silent = (now - record.heartbeat_at).total_seconds()
        if silent <= stale_seconds:
            return Liveness("running", f"last heartbeat {silent:.0f} s ago")
        where = f" (process {record.pid} on {record.host})" if record.pid else ""
        return Liveness("dead", f"runner job {record.job_id}{where} stopped reporting: no heartbeat for {silent:.0f} s")
    waited = (now - record.launched_at).total_seconds()
    if waited <= start_seconds:
        return Liveness("running", f"launched {waited:.0f} s ago, not started yet")
    return Liveness("dead", f"runner job {record.job_id} did not start within {start_seconds:.0f} s of its launch")

"""The runner-job path's health: can the app hand out jobs, and do the jobs it handed out report?

With runner jobs on, the Functions host runs no runner (in Azure it has no
Pulumi CLI; the job image has), so "is the CLI here" is the wrong question.
What health reports instead, for this installation's job queue:

- the job queue answers, how many requests wait and how old the oldest is: a
  request older than ``JobStartSeconds`` means nothing consumes the queue (the
  Container Apps job or its scaler is down, or its image cannot be pulled);
- the jobs marked running that reported in the last hour: how long since the
  latest heartbeat, and which are **stuck** (silent past ``JobStaleSeconds``;
  their runs retry or fail them, but an operator should see why they die).

Either finding degrades the host (200, ``degraded``), never makes it unready:
reads, leases and queued work go on without jobs. Rows are read by one
filtered query of the last hour's running jobs of this queue, bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from azure.core.exceptions import ResourceNotFoundError

from shared.iac.jobs.liveness import liveness
from shared.iac.jobs.store import JobStore
from shared.iac.settings import IaCSettings
from shared.platform import clock
from shared.platform.storage.clients import StorageClients

WINDOW = timedelta(hours=1)


@dataclass(frozen=True)
class JobPathHealth:
    healthy: bool
    detail: str


def job_path_health(storage: StorageClients, iac: IaCSettings, now: datetime | None = None) -> JobPathHealth:
    """Raises when the store cannot be read (the caller reports that as the finding)."""
    moment = now or clock.utcnow()
    queue = storage.queues.get_queue_client(iac.job_queue)
    try:
        waiting, made = queue.get_queue_properties().approximate_message_count or 0, ""
    except ResourceNotFoundError:  # the first launch makes it (in Azure, infra/ does)
        waiting, made = 0, " (not made yet: no job was requested)"
    peeked = queue.peek_messages(max_messages=1) if waiting else []
    oldest = (moment - peeked[0].inserted_on).total_seconds() if peeked and peeked[0].inserted_on else 0.0
    running = JobStore(storage).recent_running(iac.job_queue, (moment - WINDOW).isoformat())
    states = {
        job.job_id: liveness(
            job, moment, stale_seconds=iac.job_stale_seconds, start_seconds=iac.job_start_seconds
        ).state
        for job in running
    }
    stuck = sorted(job for job, state in states.items() if state == "dead")
    beats = [job.heartbeat_at for job in running if job.heartbeat_at is not None and states[job.job_id] == "running"]
    parts = [f"job queue {iac.job_queue} answers{made}, {waiting} request(s) waiting"]
    if waiting:
        parts[0] += f", the oldest {oldest:.0f} s"
    live = len(running) - len(stuck)
    parts.append(
        f"{live} job(s) running, last heartbeat {(moment - max(beats)).total_seconds():.0f} s ago"
        if beats
        else "no job running"
    )
    if stuck:
        shown = ", ".join(stuck[:3]) + (f" and {len(stuck) - 3} more" if len(stuck) > 3 else "")
        parts.append(f"{len(stuck)} stuck (no heartbeat for over {iac.job_stale_seconds:.0f} s): {shown}")
    unconsumed = oldest > iac.job_start_seconds
    if unconsumed:
        limit = f"JobStartSeconds ({iac.job_start_seconds:.0f} s)"
        parts.append(f"no job took a request within {limit}: is the job consumer up?")
    return JobPathHealth(healthy=not stuck and not unconsumed, detail="; ".join(parts))

"""Starting and signalling provisioning runs through the Durable client.

Starting is idempotent: the instance id is the run id, and a run whose
orchestration already exists is left alone, so a duplicated promotion or a
retried request never starts a second orchestration.
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Iterable
from typing import NotRequired

from typing_extensions import TypedDict

from orchestrations.durable import DurableClient
from orchestrations.starting import start_once
from shared.platform.logs import app_logger, ids
from shared.provisioning.api import Run, RunRef, notice_event
from shared.wiring import provisioning as wiring
from shared.wiring.settings import get_settings

log = app_logger("provisioning")

ORCHESTRATOR = "provisioning_run"
ENVIRONMENT_CHANGED = "environment-changed"
APPROVAL_DECIDED = "approval-decided"
# A runner job's completion notice as tickets from before named it; a ticket now names its attempt's own
# (``shared.provisioning.runner_jobs.notice_event``). The job's row is the truth: a notice only wakes.
RUNNER_JOB_FINISHED = "runner-job-finished"
WAKE = "wake"  # a wake's payload key: its id (see orchestrations.waits)


# typing_extensions' TypedDict, not typing's: ``closed`` (PEP 728) before Python 3.13.
class RunKeys(TypedDict):
    """What every step of a run takes: the run orchestration's input (each step's payload adds to it)."""

    tenant: str
    environment: str
    run_id: str
    recheck_seconds: float  # how often a queued run rechecks its environment
    wait_rounds: NotRequired[int]  # the rounds waited before this execution (set on continue-as-new)


class RunDocument(RunKeys, closed=True):
    """The run orchestration's input, kept in its history: these keys and no others, so a step's payload is
    this document spread with the step's own keys (``{**run, "job": ...}``)."""


class Wake(TypedDict):
    """A wake's payload (``environment-changed``, ``approval-decided``): an id of its own, so the orchestration
    tells a repeat of a wake from a new one (a sender from before sent none)."""

    wake: str


class JobFinished(TypedDict):
    """A runner job's completion notice, raised to its run (it only wakes: the job's row is the truth)."""

    job_id: str


def wake_payload() -> Wake:
    return {"wake": uuid.uuid4().hex}


async def ensure_started(client: DurableClient, run: Run) -> None:
    """Start the run's orchestration unless it has one (in any state: a run is orchestrated once)."""
    if run.state.is_final:
        return
    recheck = get_settings().runtime_cloud.provisioning.queue_recheck_seconds
    document: RunDocument = {
        "tenant": run.tenant,
        "environment": run.environment,
        "run_id": run.id,
        "recheck_seconds": recheck,
    }
    await start_once(client, orchestrator=ORCHESTRATOR, instance_id=run.id, document=document)


async def start_and_wake(client: DurableClient, run: Run, *, created: bool) -> None:
    """Start the run's orchestration (idempotent); a new run supersedes older runs still awaiting
    approval (nothing of them is applied yet) and wakes older waiting ones to yield."""
    await ensure_started(client, run)
    ref = RunRef(run.tenant, run.environment, run.id)
    if not run.state.is_final:  # idempotent, so a redelivered declaration finishes what a crash cut short
        for superseded in await asyncio.to_thread(wiring.steps().supersede_awaiting_approval, ref):
            await notify_decision(client, superseded)
    if created:
        waiting = await asyncio.to_thread(wiring.steps().waiting_runs, ref)
        await wake(client, waiting)


def status_path(run_id: str) -> str:
    """Where a caller follows a run (an absolute path, like every Location this app answers)."""
    return f"/runtime-cloud/runs/{run_id}"


async def wake(client: DurableClient, run_ids: Iterable[str]) -> int:
    """Tell waiting runs that their environment changed; a run that is gone is skipped."""
    woken = 0
    for run_id in run_ids:
        try:
            await client.raise_event(run_id, ENVIRONMENT_CHANGED, wake_payload())
            woken += 1
        except Exception as error:  # noqa: BLE001 - finished or not started yet: its own recheck covers it
            log.info("could not wake run %s: %s", run_id, error, extra=ids(run=run_id))
    return woken


async def notify_decision(client: DurableClient, run_id: str) -> None:
    try:
        await client.raise_event(run_id, APPROVAL_DECIDED, wake_payload())
    except Exception as error:  # noqa: BLE001 - the decision is recorded; the approval timer re-reads it
        log.warning("could not signal run %s: %s", run_id, error, extra=ids(run=run_id))


async def notify_job_finished(client: DurableClient, run_id: str, job_id: str) -> None:
    """Wake the run waiting for its runner job (a run that is gone or not waiting: its check timer covers it)."""
    try:
        await client.raise_event(run_id, notice_event(job_id), JobFinished(job_id=job_id))
    except Exception as error:  # noqa: BLE001 - the job's row says finished; the run's next check reads it
        log.info("could not wake run %s for job %s: %s", run_id, job_id, error, extra=ids(run=run_id))

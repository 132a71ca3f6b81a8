"""Starting and signalling provisioning runs through the Durable client.

Starting is idempotent: the instance id is the run id, and a run whose
orchestration already exists is left alone, so a duplicated promotion or a
retried request never starts a second orchestration.
"""

from __future__ import annotations

import logging
from typing import Iterable

import azure.durable_functions as df

from shared.provisioning.runs import Run
from shared.settings import get_settings

log = logging.getLogger("runtime_cloud.provisioning")

ORCHESTRATOR = "provisioning_run"
ENVIRONMENT_CHANGED = "environment-changed"
APPROVAL_DECIDED = "approval-decided"


async def ensure_started(client: df.DurableOrchestrationClient, run: Run) -> None:
    if run.state.is_final:
        return
    status = await client.get_status(run.id)
    if status is not None and status.runtime_status is not None:
        return
    recheck = get_settings().runtime_cloud.provisioning.queue_recheck_seconds
    document = {"tenant": run.tenant, "environment": run.environment, "run_id": run.id, "recheck_seconds": recheck}
    try:
        await client.start_new(ORCHESTRATOR, run.id, document)
    except Exception as error:  # a racing duplicate started it first
        status = await client.get_status(run.id)
        if status is None or status.runtime_status is None:
            raise
        log.info("run %s was started concurrently (%s)", run.id, error)


async def wake(client: df.DurableOrchestrationClient, run_ids: Iterable[str]) -> int:
    """Tell waiting runs that their environment changed; a run that is gone is skipped."""
    woken = 0
    for run_id in run_ids:
        try:
            await client.raise_event(run_id, ENVIRONMENT_CHANGED, {})
            woken += 1
        except Exception as error:  # finished or not started yet: its own recheck covers it
            log.info("could not wake run %s: %s", run_id, error)
    return woken


async def notify_decision(client: df.DurableOrchestrationClient, run_id: str) -> None:
    try:
        await client.raise_event(run_id, APPROVAL_DECIDED, {})
    except Exception as error:  # the decision is recorded; the approval timer re-reads it
        log.warning("could not signal run %s: %s", run_id, error)

"""Purging the Durable history of finished orchestrations.

The Durable extension keeps every instance's history (in Azure Storage: the
task hub's Instances and History tables and its large-message blobs) until it
is purged. Runs, scans and lease sweeps start instances all the time, so
without a purge the task hub grows for ever and its queries slow down. The
``durable_history_purge`` timer (``RuntimeCloud:Durable:PurgeSchedule``, daily
at 05:00 UTC) purges instances that finished (Completed, Failed, Terminated)
and were created more than ``RuntimeCloud:Durable:HistoryRetentionDays`` (30)
days ago. Running, pending and suspended instances are never purged. What the
product must keep (receipts, runs, findings, leases) lives in its own tables
and blobs, not in Durable history.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import azure.durable_functions as df
import azure.functions as func

from functions.blueprint import trigger_blueprint
from shared.platform import clock
from shared.platform.logs import app_logger
from shared.wiring.settings import get_settings, setting_binding

bp = trigger_blueprint()
log = app_logger("durable")

FINISHED = [
    df.OrchestrationRuntimeStatus.Completed,
    df.OrchestrationRuntimeStatus.Failed,
    df.OrchestrationRuntimeStatus.Terminated,
]
# The purge API wants a lower bound on creation time; nothing of this product is older. (Azure Table
# Storage refuses dates before 1601, so the minimum datetime would not do.)
OLDEST = datetime(2020, 1, 1, tzinfo=UTC)


def purge_window(now: datetime, retention_days: float) -> tuple[datetime, datetime]:
    """Creation times whose finished instances are purged: from ``OLDEST`` to ``retention_days`` ago."""
    return OLDEST, now - timedelta(days=retention_days)


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Durable:PurgeSchedule"),
)
@bp.durable_client_input(client_name="client")
async def durable_history_purge(timer: func.TimerRequest, client: df.DurableOrchestrationClient) -> None:
    retention = get_settings().runtime_cloud.durable.history_retention_days
    created_from, created_to = purge_window(clock.utcnow(), retention)
    result = await client.purge_instance_history_by(
        created_time_from=created_from, created_time_to=created_to, runtime_status=FINISHED
    )
    log.info(
        "durable history purge: %d finished instance(s) created before %s",
        result.instances_deleted,
        created_to.isoformat(),
    )

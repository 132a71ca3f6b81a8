"""Provisioning's gauges: what the exporter reads from the runs table when it collects."""

from __future__ import annotations

from azure.data.tables import TableServiceClient

from shared.platform.telemetry.metrics import Reading
from shared.provisioning.runs import RunState
from shared.provisioning.store import RUNS_TABLE


def awaiting_approval(tables: TableServiceClient) -> list[Reading]:
    """Runs of every tenant waiting for a person's approval: one query over the runs' rows."""
    rows = tables.get_table_client(RUNS_TABLE).query_entities(
        "RowKey ge 'run|' and RowKey lt 'run}' and State eq @state",
        parameters={"state": RunState.AWAITING_APPROVAL.value},
        select=["PartitionKey"],
    )
    return [(float(sum(1 for _ in rows)), {})]

"""The inventory's gauges: stale targets and open findings, each one bounded query when the exporter collects."""

from __future__ import annotations

from azure.data.tables import TableServiceClient

from shared.inventory.staleness import stale_summary
from shared.inventory.store import INVENTORY_TABLE
from shared.platform.telemetry.metrics import Reading


def stale_targets(tables: TableServiceClient) -> list[Reading]:
    """Per target, the environments whose observations are stale (the target could not be read)."""
    summary = stale_summary(tables.get_table_client(INVENTORY_TABLE))
    return [
        (float(entry["stale_environments"]), {"target": entry["target"] or "unknown"}) for entry in summary["targets"]
    ]


def open_findings(tables: TableServiceClient) -> list[Reading]:
    """Open findings of every environment, by kind: one query over the findings' rows."""
    rows = tables.get_table_client(INVENTORY_TABLE).query_entities(
        "RowKey ge 'finding|' and RowKey lt 'finding}' and State eq 'open'", select=["Kind"]
    )
    by_kind: dict[str, int] = {}
    for row in rows:
        kind = str(row.get("Kind") or "unknown")
        by_kind[kind] = by_kind.get(kind, 0) + 1
    return [(float(count), {"kind": kind}) for kind, count in sorted(by_kind.items())]

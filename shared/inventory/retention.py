"""Retention: findings are kept 13 months (``FindingRetentionDays``, 396), then purged.

Audit elsewhere is short-lived (HCP Terraform keeps 14 days); thirteen
months covers a year-over-year comparison. Purged daily:

- resolved findings whose ``resolved_at`` is older than the cutoff (an open
  finding is never purged, however old: it is still true);
- proposals closed (accepted, rejected, superseded, resolved) before the
  cutoff, with their tenant index rows;
- ignore rules that expired before the cutoff;
- handled-event records older than the cutoff (redeliveries come within days).

Deleting a row that is already gone is fine, so the purge can run twice.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from azure.core.exceptions import ResourceNotFoundError

from shared.inventory.store import InventoryStore
from shared.platform import clock


@dataclass(frozen=True)
class PurgeResult:
    findings: int
    proposals: int
    rules: int
    events: int


def purge(store: InventoryStore, retention_days: int, now: datetime | None = None) -> PurgeResult:
    cutoff = ((now or clock.utcnow()) - timedelta(days=retention_days)).isoformat()
    findings = _delete(
        store, "RowKey ge 'finding|' and RowKey lt 'finding}' and State eq 'resolved' and ResolvedAt lt @cutoff", cutoff
    )
    proposals = 0
    for row in store.table.query_entities(
        "RowKey ge 'proposal|' and RowKey lt 'proposal}' and State ne 'open' and UpdatedAt lt @cutoff",
        parameters={"cutoff": cutoff},
    ):
        tenant = str(row["PartitionKey"]).split("|", 1)[0]
        proposal_id = str(row["RowKey"]).split("|", 1)[1]
        for partition, key in ((row["PartitionKey"], row["RowKey"]), (tenant, f"proposal|{proposal_id}")):
            _delete_one(store, partition, key)
        proposals += 1
    rules = _delete(store, "RowKey ge 'rule|' and RowKey lt 'rule}' and ExpiresAt lt @cutoff", cutoff)
    handled = _delete(store, "RowKey ge 'event|' and RowKey lt 'event}' and HandledAt lt @cutoff", cutoff)
    return PurgeResult(findings=findings, proposals=proposals, rules=rules, events=handled)


def _delete(store: InventoryStore, query: str, cutoff: str) -> int:
    count = 0
    for row in store.table.query_entities(query, parameters={"cutoff": cutoff}, select=["PartitionKey", "RowKey"]):
        _delete_one(store, row["PartitionKey"], row["RowKey"])
        count += 1
    return count


def _delete_one(store: InventoryStore, partition: str, row_key: str) -> None:
    try:
        store.table.delete_entity(partition, row_key)
    except ResourceNotFoundError:
        pass

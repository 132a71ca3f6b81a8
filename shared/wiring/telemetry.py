"""Telemetry set up for this process: exporters (:func:`shared.platform.telemetry.configure`) and the gauges' sources.

Gauges read the store when the exporter collects (every minute in Azure), each
with one bounded query: the head of each inbound queue (``host.inbox_lag``),
the outbox rows not yet sent (``host.outbox_backlog``), runs awaiting approval,
environments whose target could not be read (``inventory.stale_targets``),
open findings by kind (``inventory.open_findings``), and each pool's slot rows
(``capacity.active_leases`` and ``capacity.utilization``: a slot row is the
lease, so counting valid rows is exact).
"""

from __future__ import annotations

import time
from collections.abc import Iterable

from shared.health import HealthSections, inbox_lags
from shared.platform import telemetry
from shared.platform.storage.clients import shared_host_storage
from shared.platform.storage.resources import OUTBOX_TABLES
from shared.platform.telemetry import names
from shared.platform.telemetry.metrics import Reading
from shared.wiring.health import health_sections
from shared.wiring.settings import Settings

BACKLOG_LIMIT = 1000  # the gauge says "at least this many" beyond it, without reading a whole table


def configure_telemetry(settings: Settings) -> None:
    telemetry.configure()
    sections = health_sections(settings)
    telemetry.observe(names.INBOX_LAG, lambda: _inbox_lag(sections))
    telemetry.observe(names.OUTBOX_BACKLOG, _outbox_backlog)
    modules = settings.runtime_cloud.host.enabled_modules
    if "provisioning" in modules:
        telemetry.observe(names.AWAITING_APPROVAL, _awaiting_approval)
    if "inventory" in modules:
        telemetry.observe(names.STALE_TARGETS, _stale_targets)
        telemetry.observe(names.OPEN_FINDINGS, _open_findings)
    if "capacity" in modules:
        telemetry.observe(names.ACTIVE_LEASES, lambda: _pool_readings(utilization=False))
        telemetry.observe(names.UTILIZATION, lambda: _pool_readings(utilization=True))


def _inbox_lag(sections: HealthSections) -> Iterable[Reading]:
    """Per module, the age of the oldest message of its inbound queues (0 when they are empty)."""
    worst: dict[str, float] = {}
    for lag in inbox_lags(sections):
        if lag.lag_seconds is not None:
            worst[lag.module] = max(worst.get(lag.module, 0.0), lag.lag_seconds)
    return [(seconds, {"module": module}) for module, seconds in sorted(worst.items())]


def _outbox_backlog() -> Iterable[Reading]:
    from shared.platform.events.outbox import _OUTBOX_END, OUTBOX_PREFIX

    tables = shared_host_storage().tables
    readings = []
    for table in OUTBOX_TABLES:
        rows = tables.get_table_client(table).query_entities(
            "RowKey ge @start and RowKey lt @end and Dispatched eq false",
            parameters={"start": OUTBOX_PREFIX, "end": _OUTBOX_END},
            select=["PartitionKey"],
            results_per_page=100,
        )
        pending = 0
        for _ in rows:
            pending += 1
            if pending >= BACKLOG_LIMIT:
                break
        readings.append((float(pending), {"table": table}))
    return readings


def _awaiting_approval() -> Iterable[Reading]:
    from shared.provisioning.runs import RunState

    rows = (
        shared_host_storage()
        .tables.get_table_client("ProvisioningRuns")
        .query_entities(
            "RowKey ge 'run|' and RowKey lt 'run}' and State eq @state",
            parameters={"state": RunState.AWAITING_APPROVAL.value},
            select=["PartitionKey"],
        )
    )
    return [(float(sum(1 for _ in rows)), {})]


def _stale_targets() -> Iterable[Reading]:
    from shared.inventory.staleness import stale_summary
    from shared.inventory.store import INVENTORY_TABLE

    summary = stale_summary(shared_host_storage().tables.get_table_client(INVENTORY_TABLE))
    return [
        (float(entry["stale_environments"]), {"target": entry["target"] or "unknown"}) for entry in summary["targets"]
    ]


def _open_findings() -> Iterable[Reading]:
    """Open findings of every environment, by kind: one query over the findings' rows."""
    from shared.inventory.store import INVENTORY_TABLE

    rows = (
        shared_host_storage()
        .tables.get_table_client(INVENTORY_TABLE)
        .query_entities("RowKey ge 'finding|' and RowKey lt 'finding}' and State eq 'open'", select=["Kind"])
    )
    by_kind: dict[str, int] = {}
    for row in rows:
        kind = str(row.get("Kind") or "unknown")
        by_kind[kind] = by_kind.get(kind, 0) + 1
    return [(float(count), {"kind": kind}) for kind, count in sorted(by_kind.items())]


def _pool_readings(*, utilization: bool) -> Iterable[Reading]:
    """Per pool, the leases its slot rows hold now, or that over the pool's size."""
    return [
        (held / size if utilization and size else float(held), {"pool": pool_id})
        for pool_id, held, size in _pool_holdings()
    ]


_holdings: tuple[float, list[tuple[str, int, int]]] | None = None  # (when read, per pool: id, held, size)
HOLDINGS_REUSE_SECONDS = 10.0  # both pool gauges are collected in one export: read the slot rows once for both


def _pool_holdings() -> list[tuple[str, int, int]]:
    global _holdings
    if _holdings is not None and time.monotonic() - _holdings[0] < HOLDINGS_REUSE_SECONDS:
        return _holdings[1]
    from shared.capacity.pools import list_pools
    from shared.capacity.slots import read_pool_slots
    from shared.platform import clock
    from shared.wiring.capacity import store

    capacity, moment = store(), clock.utcnow()
    holdings = [
        (pool.id, sum(1 for slot in read_pool_slots(capacity, pool) if slot.valid_at(moment)), pool.size)
        for pool in list_pools(capacity)
    ]
    _holdings = (time.monotonic(), holdings)
    return holdings

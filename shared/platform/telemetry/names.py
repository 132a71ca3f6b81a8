"""The names the host's telemetry is exported under: metrics (name, unit, dimensions) and span attributes.

``infra/runtime_cloud_infra/telemetry.py`` (the alert rules and the workbook)
reads the same metric names; ``tests/telemetry`` checks that the two agree.
Dimensions are bounded: a module, an outcome, a reason, a state, a pool, a
target, a table; never a tenant, a run or a lease (those are span attributes
and log fields, not metric dimensions).
"""

from __future__ import annotations

from dataclasses import dataclass

PREFIX = "connectsoft.factory.runtime_cloud"


@dataclass(frozen=True)
class MetricName:
    name: str
    instrument: str  # counter | gauge | histogram
    unit: str
    dimensions: tuple[str, ...]
    summary: str


def _metric(what: str, instrument: str, unit: str, dimensions: tuple[str, ...], summary: str) -> MetricName:
    return MetricName(f"{PREFIX}.{what}", instrument, unit, dimensions, summary)


INBOX_LAG = _metric(
    "host.inbox_lag",
    "gauge",
    "s",
    ("module",),
    "age of the oldest unprocessed message in the module's inbound queues (0 when they are empty)",
)
OUTBOX_BACKLOG = _metric(
    "host.outbox_backlog", "gauge", "{event}", ("table",), "events committed but not yet dispatched, per outbox table"
)
RUNS = _metric(
    "provisioning.runs",
    "counter",
    "{run}",
    ("outcome", "environment_class"),
    "provisioning runs that ended, by outcome (applied, failed, rejected, expired, ...)",
)
RUNS_FAILED = _metric(
    "provisioning.runs_failed",
    "counter",
    "{run}",
    ("reason", "environment_class"),
    "provisioning runs that ended failed, by reason",
)
STATE_DURATION = _metric(
    "provisioning.state_duration",
    "histogram",
    "s",
    ("state",),
    "time a run spent in a state (queued, planning, awaiting-approval, applying)",
)
AWAITING_APPROVAL = _metric(
    "provisioning.runs_awaiting_approval", "gauge", "{run}", (), "runs whose plan waits for an operator's decision"
)
LEASE_GRANTS = _metric("capacity.lease_grants", "counter", "{lease}", ("pool",), "leases granted")
LEASE_DENIALS = _metric(
    "capacity.lease_denials",
    "counter",
    "{denial}",
    ("pool", "reason"),
    "lease acquisitions refused (quota-exceeded, capacity-unavailable)",
)
ACTIVE_LEASES = _metric("capacity.active_leases", "gauge", "{lease}", ("pool",), "leases held now, per pool")
UTILIZATION = _metric("capacity.utilization", "gauge", "1", ("pool",), "active leases over the pool's size (0..1)")
ACQUIRE_DURATION = _metric(
    "capacity.acquire_duration",
    "histogram",
    "s",
    ("pool", "outcome"),
    "time to answer a lease acquisition (granted, denied)",
)
OPEN_FINDINGS = _metric(
    "inventory.open_findings", "gauge", "{finding}", ("kind",), "drift findings not yet resolved, by kind"
)
SCAN_DURATION = _metric("inventory.scan_duration", "histogram", "s", ("target",), "time of one environment's scan")
STALE_TARGETS = _metric(
    "inventory.stale_targets",
    "gauge",
    "{environment}",
    ("target",),
    "environments whose last observation failed (their target could not be read)",
)

METRICS = (
    INBOX_LAG,
    OUTBOX_BACKLOG,
    RUNS,
    RUNS_FAILED,
    STATE_DURATION,
    AWAITING_APPROVAL,
    LEASE_GRANTS,
    LEASE_DENIALS,
    ACTIVE_LEASES,
    UTILIZATION,
    ACQUIRE_DURATION,
    OPEN_FINDINGS,
    SCAN_DURATION,
    STALE_TARGETS,
)

# Span attributes naming the objects a span is about: the same names as the log fields (shared.platform.logs).
TENANT, ENVIRONMENT, RUN, LEASE, POOL = "tenant_id", "environment_id", "run_id", "lease_id", "pool"
ID_ATTRIBUTES = (TENANT, ENVIRONMENT, RUN, LEASE, POOL)

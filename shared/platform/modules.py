"""The modules this host can compose, and what each of them consumes.

A module's inbound queues are where its callers leave work; the health endpoint
reports each one's lag (age of the oldest unprocessed message), the metric
``connectsoft.factory.runtime_cloud.host.inbox_lag`` (its name is kept in
``infra/runtime_cloud_infra/telemetry.py``, which the alert rules read).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModuleSpec:
    name: str
    summary: str
    inbound_queues: tuple[str, ...] = ()


KNOWN_MODULES: dict[str, ModuleSpec] = {
    "provisioning": ModuleSpec(
        name="provisioning",
        summary="desired state, plan -> approve -> apply runs, receipts, GitOps reconciler",
        inbound_queues=("promotions", "approvals", "gitops-sync"),
    ),
    "inventory": ModuleSpec(
        name="inventory",
        summary="observed state, drift findings, reconciliation proposals",
        inbound_queues=("inventory-inbox",),
    ),
    "capacity": ModuleSpec(
        name="capacity",
        summary="worker pools, edition quotas, fenced capacity leases",
    ),
}

"""The deployable modules a host can enable (``Host:EnabledModules``), and what each is.

What each module runs (its features' triggers, inbound queues and gauges) is in
the features' manifests (:mod:`shared.platform.manifest`, listed in
:mod:`shared.wiring.features`).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class ModuleSpec:
    name: str
    summary: str


KNOWN_MODULES: dict[str, ModuleSpec] = {
    "provisioning": ModuleSpec(
        name="provisioning",
        summary="desired state, plan -> approve -> apply runs, receipts, GitOps reconciler",
    ),
    "inventory": ModuleSpec(name="inventory", summary="observed state, drift findings, reconciliation proposals"),
    "capacity": ModuleSpec(name="capacity", summary="worker pools, edition quotas, fenced capacity leases"),
}

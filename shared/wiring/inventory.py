"""The inventory's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools

from shared.inventory.decisions import ProposalDecisions
from shared.inventory.drift_report import DriftReports
from shared.inventory.gauges import open_findings, stale_targets
from shared.inventory.observers.registry import observer_for
from shared.inventory.rule_book import RuleBook
from shared.inventory.scan import Scanner
from shared.inventory.store import InventoryStore
from shared.inventory.views import InventoryViews
from shared.platform.manifest import FeatureManifest
from shared.platform.storage.clients import shared_host_storage
from shared.platform.telemetry.names import OPEN_FINDINGS, STALE_TARGETS
from shared.wiring import neighbours, provisioning
from shared.wiring.settings import get_settings


def event_source() -> str:
    return f"/{get_settings().messaging.service_name}/inventory"


@functools.lru_cache(maxsize=1)
def store() -> InventoryStore:
    return InventoryStore(shared_host_storage(), event_source())


@functools.lru_cache(maxsize=1)
def scanner() -> Scanner:
    section = get_settings().runtime_cloud
    observers = functools.partial(observer_for, inventory=section.inventory, iac=section.iac)
    mirror = neighbours.artifact_outbox()
    return Scanner(
        store(),
        provisioning.api(),
        settings=section.inventory,
        targets=section.targets,
        observers=observers,
        drift_reports=DriftReports(shared_host_storage(), mirror) if mirror is not None else None,
    )


@functools.lru_cache(maxsize=1)
def views() -> InventoryViews:
    return InventoryViews(store(), provisioning.api())


@functools.lru_cache(maxsize=1)
def decisions() -> ProposalDecisions:
    section = get_settings().runtime_cloud
    return ProposalDecisions(store(), provisioning.api(), settings=section.inventory, targets=section.targets)


@functools.lru_cache(maxsize=1)
def rule_book() -> RuleBook:
    return RuleBook(store(), provisioning.api(), get_settings().runtime_cloud.inventory)


def scan_targets() -> list[tuple[str, str]]:
    """(tenant, environment) of every environment with applied desired state, for the scan timer.

    Read from provisioning (the truth) and the inventory's own rows (environments
    it heard of through events), so a lost event never leaves an environment unscanned.
    """
    return sorted(set(provisioning.api().applied_environments()) | set(store().known_environments()))


MANIFEST = FeatureManifest(
    name="inventory",
    module="inventory",
    triggers=("functions.inventory", "orchestrations.inventory"),
    inbound_queues=("inventory-inbox",),
    gauges={
        STALE_TARGETS: lambda: stale_targets(shared_host_storage().tables),
        OPEN_FINDINGS: lambda: open_findings(shared_host_storage().tables),
    },
)

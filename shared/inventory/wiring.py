"""The inventory's objects, built once per process from settings and storage."""

from __future__ import annotations

import functools

from shared.inventory.decisions import ProposalDecisions
from shared.inventory.rule_book import RuleBook
from shared.inventory.scan import Scanner
from shared.inventory.store import InventoryStore
from shared.inventory.views import InventoryViews
from shared.provisioning import wiring as provisioning
from shared.settings import get_settings
from shared.storage.clients import shared_host_storage


def event_source() -> str:
    return f"/{get_settings().messaging.service_name}/inventory"


@functools.lru_cache(maxsize=1)
def store() -> InventoryStore:
    return InventoryStore(shared_host_storage(), event_source())


@functools.lru_cache(maxsize=1)
def scanner() -> Scanner:
    return Scanner(store(), provisioning.store(), provisioning.receipts(), get_settings())


@functools.lru_cache(maxsize=1)
def views() -> InventoryViews:
    return InventoryViews(store(), provisioning.store())


@functools.lru_cache(maxsize=1)
def decisions() -> ProposalDecisions:
    return ProposalDecisions(store(), provisioning.store(), provisioning.service(), get_settings())


def scan_targets() -> list[tuple[str, str]]:
    """(tenant, environment) of every environment with applied desired state, for the scan timer.

    Read from the provisioning store (the truth) and the inventory's own rows
    (environments it heard of through events), so a lost event never leaves an
    environment unscanned.
    """
    found: set[tuple[str, str]] = set()
    runs = shared_host_storage().tables.get_table_client("ProvisioningRuns")
    for row in runs.query_entities("RowKey eq 'environment'", select=["Tenant", "Environment", "AppliedDigest"]):
        if row.get("AppliedDigest") and row.get("Tenant") and row.get("Environment"):
            found.add((row["Tenant"], row["Environment"]))
    for row in store().table.query_entities("RowKey eq 'environment'", select=["Tenant", "Environment"]):
        if row.get("Tenant") and row.get("Environment"):
            found.add((row["Tenant"], row["Environment"]))
    return sorted(found)


@functools.lru_cache(maxsize=1)
def rule_book() -> RuleBook:
    return RuleBook(store(), provisioning.store(), provisioning.receipts(), get_settings())

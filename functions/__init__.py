"""HTTP, queue and timer triggers, one module per area.

``blueprints_for`` answers which blueprints the app registers: the host's own
endpoints always, and each enabled module's triggers.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

import azure.durable_functions as df

HOST_BLUEPRINTS: tuple[str, ...] = (
    "functions.host_api",
    "functions.outbox",
    "functions.artifacts",  # mirrors receipts, outputs and drift reports to KnowledgeHost when configured
    "functions.durable_history",
    "functions.backup",  # the store's backup covers every module's tables
)

# Module name -> the functions.* modules that carry its triggers. A module
# listed with no blueprints is known to the settings but has no triggers yet.
MODULE_BLUEPRINTS: dict[str, tuple[str, ...]] = {
    "provisioning": (
        "functions.provisioning",
        "functions.receipts",
        "functions.receipt_retention",
        "functions.gitops",
        "functions.runner_jobs",
        "functions.policy",
        "orchestrations.provisioning",
    ),
    "inventory": ("functions.inventory", "orchestrations.inventory"),
    "capacity": ("functions.capacity", "orchestrations.capacity"),
}


# Blueprints that need several modules: pool autoscaling resizes capacity's pools through provisioning runs.
COMBINED_BLUEPRINTS: dict[str, frozenset[str]] = {"functions.autoscaling": frozenset({"capacity", "provisioning"})}


def blueprints_for(enabled_modules: Iterable[str]) -> list[df.Blueprint]:
    names = list(HOST_BLUEPRINTS)
    enabled = list(enabled_modules)
    for module in enabled:
        names.extend(MODULE_BLUEPRINTS[module])
    names.extend(name for name, needs in COMBINED_BLUEPRINTS.items() if needs <= set(enabled))
    return [importlib.import_module(name).bp for name in names]

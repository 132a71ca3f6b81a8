"""HTTP, queue and timer triggers, one module per area.

``blueprints_for`` answers which blueprints the app registers: the host's own
endpoints always, and each enabled module's triggers.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable

import azure.durable_functions as df

HOST_BLUEPRINTS: tuple[str, ...] = ("functions.host_api", "functions.outbox", "functions.durable_history")

# Module name -> the functions.* modules that carry its triggers. A module
# listed with no blueprints is known to the settings but has no triggers yet.
MODULE_BLUEPRINTS: dict[str, tuple[str, ...]] = {
    "provisioning": ("functions.provisioning", "functions.receipts", "orchestrations.provisioning"),
    "inventory": ("functions.inventory", "orchestrations.inventory"),
    "capacity": ("functions.capacity", "orchestrations.capacity"),
}


def blueprints_for(enabled_modules: Iterable[str]) -> list[df.Blueprint]:
    names = list(HOST_BLUEPRINTS)
    for module in enabled_modules:
        names.extend(MODULE_BLUEPRINTS[module])
    return [importlib.import_module(name).bp for name in names]

"""Scanning every known environment again, as after a restore of the store."""

from __future__ import annotations

from collections.abc import Iterable

from shared.inventory.errors import ScanInProgress
from shared.inventory.scan import Scanner
from shared.platform.errors import NotFound


def rescan_all(scanner: Scanner, environments: Iterable[tuple[str, str]]) -> dict[str, int]:
    """Scan each (tenant, environment); answers how many came back fresh, stale or were skipped."""
    counts = {"fresh": 0, "stale": 0, "skipped": 0}
    for tenant, environment in environments:
        try:
            outcome = scanner.scan(tenant, environment)
            counts["stale" if outcome.error else "fresh"] += 1
        except (ScanInProgress, NotFound):
            counts["skipped"] += 1
    return counts

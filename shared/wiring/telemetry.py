"""Telemetry set up for this process: exporters (:func:`shared.platform.telemetry.configure`) and the gauges.

Gauges read the store when the exporter collects (every minute in Azure), each
with one bounded query. The host's own: the head of each inbound queue
(``host.inbox_lag``) and the outbox rows not yet sent (``host.outbox_backlog``);
each enabled feature's come from its manifest (:mod:`shared.wiring.features`).
"""

from __future__ import annotations

from collections.abc import Iterable

from shared.health import HealthSections, inbox_lags
from shared.platform import telemetry
from shared.platform.events.outbox import undispatched_count
from shared.platform.storage.clients import shared_host_storage
from shared.platform.storage.resources import OUTBOX_TABLES
from shared.platform.telemetry import names
from shared.platform.telemetry.metrics import Reading
from shared.wiring.features import enabled_manifests
from shared.wiring.health import health_sections
from shared.wiring.settings import Settings

BACKLOG_LIMIT = 1000  # the gauge says "at least this many" beyond it, without reading a whole table


def configure_telemetry(settings: Settings) -> None:
    telemetry.configure()
    sections = health_sections(settings)
    telemetry.observe(names.INBOX_LAG, lambda: _inbox_lag(sections))
    telemetry.observe(names.OUTBOX_BACKLOG, _outbox_backlog)
    for manifest in enabled_manifests(settings.runtime_cloud.host.enabled_modules):
        for metric, source in manifest.gauges.items():
            telemetry.observe(metric, source)


def _inbox_lag(sections: HealthSections) -> Iterable[Reading]:
    """Per module, the age of the oldest message of its inbound queues (0 when they are empty)."""
    worst: dict[str, float] = {}
    for lag in inbox_lags(sections):
        if lag.lag_seconds is not None:
            worst[lag.module] = max(worst.get(lag.module, 0.0), lag.lag_seconds)
    return [(seconds, {"module": module}) for module, seconds in sorted(worst.items())]


def _outbox_backlog() -> Iterable[Reading]:
    tables = shared_host_storage().tables
    return [
        (float(undispatched_count(tables.get_table_client(table), BACKLOG_LIMIT)), {"table": table})
        for table in OUTBOX_TABLES
    ]

"""The receipt retention timer's work, built from the settings (``RuntimeCloud:Receipts:*``).

One firing walks every blob of the host's ``receipts`` container
(:mod:`shared.provisioning.receipt_sweep`) and gives each the version-level
immutability policy the lifetime rule asks for; each receipt's backup copy
follows (:mod:`shared.backup.receipt_copies`) when the backup has a kept
container of its own (``RuntimeCloud:Backup:ReceiptsContainer``). With
``Immutability`` off (the local sample: Azurite has no immutability policies)
the walk and the decisions are the same and nothing is sent; the log says
how many policies would have been set.

A policy the service refuses is logged and counted, the walk goes on, and the
firing ends with :class:`ReceiptRetentionFailed` so that the invocation shows
as failed; the next firing tries those receipts again.
"""

from __future__ import annotations

from shared.backup.receipt_copies import ReceiptCopies
from shared.platform import clock, telemetry
from shared.platform.errors import RuntimeCloudError
from shared.platform.logs import app_logger
from shared.platform.storage.clients import StorageClients, shared_host_storage
from shared.platform.telemetry.names import PREFIX, MetricName
from shared.provisioning.receipt_settings import ReceiptSettings
from shared.provisioning.receipt_sweep import SweepReport, sweep_receipts
from shared.provisioning.receipts import RECEIPTS_CONTAINER
from shared.wiring import backup
from shared.wiring.settings import get_settings

log = app_logger("receipts")

POLICIES = MetricName(
    f"{PREFIX}.receipts.retention_policies",
    "counter",
    "{policy}",
    ("outcome",),
    "version-level policies the receipt retention timer set (set, skipped: immutability off, failed)",
)


class ReceiptRetentionFailed(RuntimeCloudError):
    """Some receipts (or copies) did not get the policy they need; the next firing tries again."""


def settings() -> ReceiptSettings:
    return get_settings().runtime_cloud.receipts


def sweep_once(store: StorageClients | None = None) -> SweepReport:
    """One firing: every receipt (and its copy) under the policy the rule asks for."""
    section = settings()
    now = clock.utcnow()
    container = (store or shared_host_storage()).blobs.get_container_client(RECEIPTS_CONTAINER)
    location = backup.location()
    copies = None
    if location is not None and location.kept is not location.container:  # a kept container of its own
        copies = ReceiptCopies(location, section.rule(), section.policy_mode, now, send=section.immutability)
    with telemetry.span("receipts.retention", attributes={"receipts.immutability": section.immutability}):
        report = sweep_receipts(
            container, section.rule(), section.policy_mode, now, send=section.immutability, copies=copies
        )
    set_count = report.changed + report.copies_changed
    telemetry.count(POLICIES, set_count, outcome="set" if section.immutability else "skipped")
    if report.failures:
        telemetry.count(POLICIES, report.failures, outcome="failed")
    _log(section, report)
    if report.failures:
        raise ReceiptRetentionFailed(
            f"{report.failures} receipt policies were not set (the next firing retries them): "
            + "; ".join(report.failed)
        )
    return report


def _log(section: ReceiptSettings, report: SweepReport) -> None:
    verb = "set" if section.immutability else "would set (RuntimeCloud:Receipts:Immutability is off)"
    log.info(
        "receipt retention: %d blob(s) of %d environment(s) (%d deleted): %s %d policies, %d on backup copies",
        report.blobs,
        report.environments,
        report.deleted_environments,
        verb,
        report.changed,
        report.copies_changed,
    )
    for failure in report.failed:
        log.error("receipt retention: not set: %s", failure)

"""A scan's drift report, kept as a blob and mirrored to KnowledgeHost (when it is configured).

A scan that compared (the target answered, no run was changing it) writes its
report once, after its findings committed: canonical JSON at
``inventory/drift-reports/{tenant}/{environment}/{stamp}.json`` (``stamp``: the
scan's time), and records it in the artifacts' outbox
(:mod:`shared.platform.events.artifact_outbox`) as a ``drift-report`` artifact, which
the dispatcher sends. A host that dies between the findings' commit and the
report loses that scan's report only; the next scan writes its own.
"""

from __future__ import annotations

import hashlib
import json
from datetime import datetime
from typing import Any

from azure.core.exceptions import ResourceExistsError

from shared.inventory.findings import Finding
from shared.inventory.store import INVENTORY_CONTAINER
from shared.platform.events.artifact_outbox import ArtifactOutbox, PendingArtifact, artifact_id
from shared.platform.logs import app_logger, ids
from shared.platform.storage.clients import StorageClients

log = app_logger("inventory")


def report_stamp(scanned_at: datetime) -> str:
    """The scan's time as a name part (artifact ids allow no ``+``)."""
    return "scan-" + scanned_at.strftime("%Y%m%dT%H%M%S%fZ")


class DriftReports:
    def __init__(self, storage: StorageClients, mirror: ArtifactOutbox) -> None:
        self._container = storage.blobs.get_container_client(INVENTORY_CONTAINER)
        self._mirror = mirror

    def publish(
        self,
        tenant: str,
        environment: str,
        scanned_at: datetime,
        basis_digest: str,
        open_findings: list[Finding],
        opened: list[str],
        resolved: list[str],
    ) -> None:
        """Write the report and record it for the mirror; a failure is logged, never the scan's."""
        stamp = report_stamp(scanned_at)
        document: dict[str, Any] = {
            "tenant": tenant,
            "environment": environment,
            "scanned_at": scanned_at.isoformat(),
            "basis_digest": basis_digest,
            "opened": opened,
            "resolved": resolved,
            "open_findings": [finding.public_view() for finding in open_findings],
        }
        data = json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")
        name = f"drift-reports/{tenant}/{environment}/{stamp}.json"
        try:
            try:
                self._container.upload_blob(name, data, overwrite=False)
            except ResourceExistsError:
                data = self._container.download_blob(name).readall()
            self._mirror.record(
                PendingArtifact(
                    artifact_id=artifact_id(tenant, environment, stamp, "drift-report"),
                    kind="drift-report",
                    tenant=tenant,
                    environment=environment,
                    run_id=None,
                    sha256=hashlib.sha256(data).hexdigest(),
                    blob=(INVENTORY_CONTAINER, name),
                )
            )
        except Exception as error:  # noqa: BLE001 - the scan committed: only this report goes unmirrored
            log.warning(
                "drift report %s of %s not recorded for KnowledgeHost: %s",
                stamp,
                environment,
                error,
                extra=ids(tenant=tenant, environment=environment),
            )

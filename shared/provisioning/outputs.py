"""A run's outputs, passed by reference (a claim check).

An apply's outputs grow with the environment (one entry per resource: 2,000
resources make some 300 KB), but an event is one table property and one queue
message (see :data:`shared.platform.events.outbox.MAX_EVENT_BYTES`). So the outputs are
written once as canonical JSON to the blob
``receipts/{tenant}/{environment}/{run id}/outputs.json``, beside the run's
receipts, and ``ProvisioningApplied`` carries an :class:`OutputsReference`:
where the blob is, its SHA-256, how many outputs it holds, and the HTTP path
that serves them (``GET /runtime-cloud/runs/{id}/outputs``). A consumer reads
the blob (or the path) and checks the digest; every output is there.

With KnowledgeHost configured the outputs are mirrored by reference too: an
artifact ``run-outputs`` whose ``content_ref`` is that HTTP path and whose
``sha256`` is the blob's (:mod:`shared.platform.events.artifact_outbox`).
"""

from __future__ import annotations

import json
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from pydantic import BaseModel

from shared.platform.errors import NotFound, RuntimeCloudError
from shared.platform.events.artifact_outbox import ArtifactOutbox, PendingArtifact, artifact_id
from shared.platform.storage.clients import StorageClients
from shared.provisioning.receipts import RECEIPTS_CONTAINER, sha256


class OutputsReference(BaseModel):
    """What an event says about a run's outputs instead of holding them."""

    container: str
    blob: str
    sha256: str
    count: int
    bytes: int
    href: str


class OutputsAltered(RuntimeCloudError):
    """The outputs blob no longer hashes to the digest its reference names."""


def canonical_outputs(outputs: dict[str, Any]) -> bytes:
    return json.dumps(outputs, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class OutputsStore:
    def __init__(self, storage: StorageClients, mirror: ArtifactOutbox | None = None) -> None:
        self._container = storage.blobs.get_container_client(RECEIPTS_CONTAINER)
        self._mirror = mirror  # None: KnowledgeHost is not configured

    @staticmethod
    def blob_name(tenant: str, environment: str, run_id: str) -> str:
        return f"{tenant}/{environment}/{run_id}/outputs.json"

    def publish(self, tenant: str, environment: str, run_id: str, outputs: dict[str, Any]) -> OutputsReference:
        """Write the outputs once (a retried step finds them and keeps them); return their reference."""
        name = self.blob_name(tenant, environment, run_id)
        data = canonical_outputs(outputs)
        try:
            self._container.upload_blob(name, data, overwrite=False, metadata={"sha256": sha256(data)})
        except ResourceExistsError:
            data = self._container.download_blob(name).readall()
        reference = OutputsReference(
            container=RECEIPTS_CONTAINER,
            blob=name,
            sha256=sha256(data),
            count=len(json.loads(data)),
            bytes=len(data),
            href=f"/runtime-cloud/runs/{run_id}/outputs",
        )
        if self._mirror is not None:  # before the reference is returned, as a receipt's digest (by reference)
            self._mirror.record(
                PendingArtifact(
                    artifact_id=artifact_id(tenant, environment, run_id, "run-outputs"),
                    kind="run-outputs",
                    tenant=tenant,
                    environment=environment,
                    run_id=run_id,
                    sha256=reference.sha256,
                    content_ref=reference.href,
                )
            )
        return reference

    def read(self, reference: OutputsReference) -> dict[str, Any]:
        """The outputs a reference names, checked against its digest."""
        try:
            data = self._container.download_blob(reference.blob).readall()
        except ResourceNotFoundError as error:
            raise NotFound(f"outputs {reference.blob}") from error
        if sha256(data) != reference.sha256:
            raise OutputsAltered(f"outputs {reference.blob} no longer hash to {reference.sha256}")
        return dict(json.loads(data))

    def read_run(self, tenant: str, environment: str, run_id: str) -> tuple[dict[str, Any], str]:
        """A run's outputs and the SHA-256 of their stored bytes."""
        try:
            data = self._container.download_blob(self.blob_name(tenant, environment, run_id)).readall()
        except ResourceNotFoundError as error:
            raise NotFound(f"outputs of {run_id}") from error
        return dict(json.loads(data)), sha256(data)

"""Plan and apply receipts: the audit record of every run.

Receipts are canonical JSON blobs under
``receipts/{tenant}/{environment}/{run id}/{plan|apply}.json``, written once
(a retried activity finds the blob and keeps it), and their SHA-256 is kept
on the run. Each apply receipt carries the digest of the environment's
previous apply receipt, so an environment's receipts form a hash chain. This
module only writes and reads them; :func:`shared.provisioning.verification.verify_environment`
checks them (``GET .../environments/{environment}/receipts/verify``, or
``python -m shared.provisioning.verify_receipts``), finding an edited, missing
or re-linked receipt. Receipts are kept for the environment's lifetime plus
seven years; nothing in this service deletes them. With
``RuntimeCloud:Receipts:Immutability`` on, a receipt is written under a
version-level immutability policy (:mod:`shared.provisioning.receipt_retention`),
which the retention timer extends while the environment lives.

With KnowledgeHost configured, every receipt is also recorded in the
artifacts' outbox (:mod:`shared.platform.events.artifact_outbox`) before its digest is
returned, and mirrored from there. A receipt's blob metadata ``source`` says
where it came from when it was not written here: ``backup`` or ``mirror`` (a
restore wrote it back); absent: ``store``.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any, Literal

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from pydantic import BaseModel, Field

from shared.iac.api import ResourceChange, StepResult
from shared.platform import clock
from shared.platform.errors import NotFound
from shared.platform.events.artifact_outbox import ArtifactOutbox, PendingArtifact, artifact_id
from shared.platform.storage.clients import StorageClients
from shared.policy.api import PolicyVerdict
from shared.provisioning.receipt_immutability import upload_options
from shared.provisioning.receipt_settings import ReceiptSettings
from shared.provisioning.runs import Decision, SourceInfo

RECEIPTS_CONTAINER = "receipts"

ReceiptKind = Literal["plan", "apply"]
ReceiptSource = Literal["store", "backup", "mirror"]  # where a stored receipt came from (its blob's metadata)


class ReceiptHeader(BaseModel):
    """What every receipt names: the run, where it ran, with which runner, for which desired state."""

    run_id: str
    tenant: str
    environment: str
    target: str
    runner: str
    runner_version: str
    specification_digest: str


class PlanReceipt(ReceiptHeader):
    kind: Literal["plan"] = "plan"
    source: SourceInfo
    changes: list[ResourceChange]
    counts: dict[str, int]
    diagnostics: list[str] = Field(default_factory=list)
    binding: dict[str, str] = Field(default_factory=dict)  # what apply is bound to besides the changes
    planned_at: str
    # The policy gate's verdict: the bundle's digest, every rule's result, the exceptions relied on
    # (None: the run planned before the gate existed). The approval's digest covers it.
    policy: PolicyVerdict | None = None


class ConfigurationRecord(BaseModel):
    resolved: list[str] = Field(default_factory=list)
    unresolved: list[str] = Field(default_factory=list)
    note: str = ""


class ApplyReceipt(ReceiptHeader):
    kind: Literal["apply"] = "apply"
    plan_digest: str | None
    outcome: Literal["applied", "failed", "cancelled"]  # cancelled: stopped between steps by an operator
    failure_reason: str | None = None
    failure_detail: str | None = None
    steps: list[StepResult] = Field(default_factory=list)
    outputs: dict[str, Any] = Field(default_factory=dict)
    logs: list[str] = Field(default_factory=list)
    approvals: list[Decision] = Field(default_factory=list)
    configuration: ConfigurationRecord = Field(default_factory=ConfigurationRecord)
    started_at: str
    finished_at: str
    previous_receipt_digest: str | None = None


def canonical_bytes(receipt: BaseModel) -> bytes:
    document = receipt.model_dump(mode="json")
    return json.dumps(document, sort_keys=True, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


class ReceiptStore:
    def __init__(
        self,
        storage: StorageClients,
        immutability: ReceiptSettings | None = None,
        mirror: ArtifactOutbox | None = None,
    ) -> None:
        self._container = storage.blobs.get_container_client(RECEIPTS_CONTAINER)
        self._immutability = immutability  # None: no policy of the host's (readers, tools)
        self._mirror = mirror  # None: KnowledgeHost is not configured (or a reader)

    @staticmethod
    def blob_name(tenant: str, environment: str, run_id: str, kind: ReceiptKind) -> str:
        return f"{tenant}/{environment}/{run_id}/{kind}.json"

    def write(self, receipt: PlanReceipt | ApplyReceipt) -> str:
        """Store the receipt once; return the digest of what is stored."""
        kind: ReceiptKind = receipt.kind
        name = self.blob_name(receipt.tenant, receipt.environment, receipt.run_id, kind)
        data = canonical_bytes(receipt)
        try:
            self._container.upload_blob(
                name,
                data,
                overwrite=False,
                metadata={"sha256": sha256(data), "kind": receipt.kind},
                **upload_options(self._immutability, clock.utcnow()),
            )
        except ResourceExistsError:
            data = self._container.download_blob(name).readall()
        digest = sha256(data)
        if self._mirror is not None:  # before the digest is returned: no run records an unmirrored receipt
            self._mirror.record(
                receipt_artifact(receipt.tenant, receipt.environment, receipt.run_id, receipt.kind, digest)
            )
        return digest

    def read(self, tenant: str, environment: str, run_id: str, kind: ReceiptKind) -> tuple[dict[str, Any], str]:
        """The receipt document and the SHA-256 of its stored bytes."""
        document, digest, _ = self.read_with_source(tenant, environment, run_id, kind)
        return document, digest

    def read_with_source(
        self, tenant: str, environment: str, run_id: str, kind: ReceiptKind
    ) -> tuple[dict[str, Any], str, ReceiptSource]:
        """:meth:`read`, and where the stored receipt came from (its blob's ``source`` metadata)."""
        try:
            download = self._container.download_blob(self.blob_name(tenant, environment, run_id, kind))
            data = download.readall()
        except ResourceNotFoundError as error:
            raise NotFound(f"{kind} receipt of {run_id}") from error
        metadata = download.properties.metadata or {}
        source: ReceiptSource = "backup" if metadata.get("source") == "backup" else "store"
        if metadata.get("source") == "mirror":
            source = "mirror"
        return json.loads(data), sha256(data), source


def receipt_artifact(tenant: str, environment: str, run_id: str, kind: ReceiptKind, digest: str) -> PendingArtifact:
    """A receipt as the mirror keeps it: its blob's content under a deterministic id, with its digest."""
    return PendingArtifact(
        artifact_id=receipt_artifact_id(tenant, environment, run_id, kind),
        kind="plan-receipt" if kind == "plan" else "apply-receipt",
        tenant=tenant,
        environment=environment,
        run_id=run_id,
        sha256=digest,
        blob=(RECEIPTS_CONTAINER, ReceiptStore.blob_name(tenant, environment, run_id, kind)),
    )


def receipt_artifact_id(tenant: str, environment: str, run_id: str, kind: ReceiptKind) -> str:
    return artifact_id(tenant, environment, run_id, "plan-receipt" if kind == "plan" else "apply-receipt")

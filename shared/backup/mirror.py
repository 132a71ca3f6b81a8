"""Receipts a backup lacks, read back from KnowledgeHost (the audit mirror), and where each came from.

A restore writes receipts back from the backup's copies. A receipt whose run
the backup holds (its digest recorded on the run's row) but whose blob it
does not (the export listed the receipts before the run recorded it, or the
copy is gone) would leave a hole in the environment's chain. With
KnowledgeHost configured every receipt was mirrored there under a
deterministic id (:func:`shared.provisioning.receipts.receipt_artifact_id`),
so :func:`restore_receipts_from_mirror` asks it for each missing one and
writes it back, **only** when the mirror's digest is the one the run
recorded (the client has already checked that the content hashes to it): the
chain then verifies exactly as before the loss. Anything else is reported,
never written: ``absent`` (the mirror does not hold it), ``refused`` (it
holds another digest, or content that does not hash to its own),
``unavailable`` (it did not answer).

Every receipt a restore writes says where it came from in its blob's
metadata ``source``: ``backup`` (:func:`restored_metadata`) or ``mirror``; the
verify endpoint reports it per receipt (a receipt written by the host has
none: ``store``).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.platform.neighbours.errors import ArtifactNotFound, NeighbourAnswerInvalid, NeighbourError
from shared.platform.neighbours.http_client import Token
from shared.platform.neighbours.knowledge_host import KnowledgeHost
from shared.platform.neighbours.settings import KnowledgeHostSettings
from shared.platform.settings_section import Section
from shared.platform.storage.clients import StorageClients
from shared.provisioning.api import RECEIPTS_CONTAINER, RUNS_TABLE, ReceiptKind, ReceiptStore, receipt_artifact_id

RECEIPT_KINDS = ("plan", "apply")


def restored_metadata(container: str, metadata: dict[str, str] | None) -> dict[str, str] | None:
    """A receipt's metadata as the restore writes it back from the backup: ``source`` says so."""
    if container != RECEIPTS_CONTAINER or not metadata or metadata.get("kind") not in RECEIPT_KINDS:
        return metadata
    return {**metadata, "source": "backup"}


def restore_receipts_from_mirror(store: StorageClients, mirror: KnowledgeHost) -> dict[str, Any]:
    """Write back, from KnowledgeHost, every receipt a run of the restored store recorded and the store
    lacks; answers what was restored and what was not (``{"restored": [...], "absent": [...], ...}``)."""
    report: dict[str, list[str]] = {"restored": [], "absent": [], "refused": [], "unavailable": []}
    container = store.blobs.get_container_client(RECEIPTS_CONTAINER)
    runs = store.tables.get_table_client(RUNS_TABLE).query_entities(
        "RowKey ge 'run|' and RowKey lt 'run}'", select=["Document"]
    )
    for row in runs:
        if not row.get("Document"):
            continue  # the tenant index's run|{id} rows name only the environment
        run = json.loads(row["Document"])
        recorded: list[tuple[ReceiptKind, str | None]] = [
            ("plan", run.get("plan_digest")),
            ("apply", run.get("apply_receipt_digest")),
        ]
        for kind, digest in recorded:
            if digest:
                name = ReceiptStore.blob_name(run["tenant"], run["environment"], run["id"], kind)
                if not container.get_blob_client(name).exists():
                    outcome = _from_mirror(mirror, container, run, kind, digest)
                    report[outcome].append(name)
    return dict(report)


def _from_mirror(mirror: KnowledgeHost, container: Any, run: dict[str, Any], kind: ReceiptKind, digest: str) -> str:
    try:
        stored = mirror.get(receipt_artifact_id(run["tenant"], run["environment"], run["id"], kind))
    except ArtifactNotFound:
        return "absent"
    except NeighbourAnswerInvalid:
        return "refused"  # its content does not hash to its digest (or worse): nothing of it is written
    except NeighbourError:
        return "unavailable"
    if stored.sha256 != digest or stored.content is None:
        return "refused"  # not the receipt the run recorded: the verify report shows the hole instead
    name = ReceiptStore.blob_name(run["tenant"], run["environment"], run["id"], kind)
    metadata = {"sha256": digest, "kind": kind, "source": "mirror"}
    container.upload_blob(name, stored.content.encode("utf-8"), overwrite=False, metadata=metadata)
    return "restored"


class _KnowledgeHostOnlySection(Section):
    knowledge_host: KnowledgeHostSettings = Field(default_factory=KnowledgeHostSettings, alias="KnowledgeHost")


class _KnowledgeHostOnly(BaseSettings):
    """``RuntimeCloud:KnowledgeHost:*`` and nothing else of the host's settings (for ``tools.backup``)."""

    model_config = SettingsConfigDict(
        env_nested_delimiter="__", case_sensitive=False, populate_by_name=True, extra="ignore", frozen=True
    )

    runtime_cloud: _KnowledgeHostOnlySection = Field(default_factory=_KnowledgeHostOnlySection, alias="RuntimeCloud")


def mirror_from_environment(token_for: Callable[[str], Token]) -> KnowledgeHost | None:
    """KnowledgeHost as the host's settings in the environment name it (``token_for``: a scope's token);
    None when it is not configured."""
    section = _KnowledgeHostOnly().runtime_cloud.knowledge_host
    return KnowledgeHost(section, token_for(section.scope)) if section.configured else None

"""The retention timer's walk: every blob of the receipts container, environment by environment.

The listing (``list_blobs`` with metadata and immutability policies) comes in
name order, so an environment's blobs (``{tenant}/{environment}/...``: its
plan and apply receipts, outputs and deletion markers) arrive together and are
decided together, holding one environment in memory at a time. For each blob
the rule (:class:`shared.provisioning.receipt_retention.RetentionRule`) says
which policy it needs; the walk sets it (or, with ``send=False``, only counts
it), and tells a :class:`CopyFollower` so that the receipt's backup copy keeps
the same retention.

**Deleted environments.** When an environment is deleted, whoever deletes it
calls :func:`record_environment_deleted`: a write-once marker
``{tenant}/{environment}/deleted/{time}.json`` beside its receipts, itself
kept as they are. An environment is deleted at the time its latest marker
names, unless a blob of it was written after that marker was (it was declared
again, and lives). An
environment without a marker is alive: an unknown end keeps receipts longer,
never shorter.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from itertools import groupby
from typing import Protocol

from azure.core.exceptions import HttpResponseError, ResourceExistsError
from azure.storage.blob import ContainerClient

from shared.platform import clock
from shared.provisioning.receipt_immutability import current_policy, set_policy, upload_options
from shared.provisioning.receipt_retention import CurrentPolicy, PolicyChange, PolicyMode, RetentionRule
from shared.provisioning.receipt_settings import ReceiptSettings

DELETED_FOLDER = "deleted"
_STAMP = "%Y%m%dT%H%M%S%fZ"


@dataclass(frozen=True)
class StoredBlob:
    """A blob of the receipts container as listed."""

    name: str
    created: datetime | None
    digest: str | None  # the ``sha256`` metadata the host writes with every receipt
    policy: CurrentPolicy

    @property
    def environment(self) -> str:
        """``{tenant}/{environment}``, the folder the blob belongs to."""
        return "/".join(self.name.split("/")[:2])

    @property
    def deleted_at(self) -> datetime | None:
        """The deletion time a marker names (None for every other blob)."""
        parts = self.name.split("/")
        if len(parts) != 4 or parts[2] != DELETED_FOLDER or not parts[3].endswith(".json"):
            return None
        try:
            return datetime.strptime(parts[3].removesuffix(".json"), _STAMP).replace(tzinfo=UTC)
        except ValueError:
            return None


class CopyFollower(Protocol):
    """Keeps a receipt's backup copy under the retention its receipt needs; answers whether it set one."""

    def follow(self, receipt: StoredBlob, deleted_at: datetime | None, receipt_changed: bool) -> bool: ...


@dataclass
class SweepReport:
    blobs: int = 0
    environments: int = 0
    deleted_environments: int = 0
    changed: int = 0  # policies set, or that would be set with send=False
    copies_changed: int = 0
    failures: int = 0
    failed: list[str] = field(default_factory=list)  # the first MAX_FAILURES, as "name: reason"

    MAX_FAILURES = 20

    def fail(self, name: str, reason: str) -> None:
        if len(self.failed) < self.MAX_FAILURES:
            self.failed.append(f"{name}: {reason}")
        self.failures += 1


def deletion_marker_name(tenant: str, environment: str, deleted_at: datetime) -> str:
    return f"{tenant}/{environment}/{DELETED_FOLDER}/{deleted_at.astimezone(UTC).strftime(_STAMP)}.json"


def record_environment_deleted(
    container: ContainerClient,
    settings: ReceiptSettings | None,
    tenant: str,
    environment: str,
    deleted_at: datetime,
    deleted_by: str,
) -> str:
    """Write the marker that starts the environment's last seven years (once: a retry keeps the first)."""
    name = deletion_marker_name(tenant, environment, deleted_at)
    document = {"tenant": tenant, "environment": environment, "deleted_at": deleted_at.isoformat(), "by": deleted_by}
    data = json.dumps(document, sort_keys=True, separators=(",", ":")).encode()
    try:
        container.upload_blob(name, data, overwrite=False, **upload_options(settings, clock.utcnow()))
    except ResourceExistsError:
        pass
    return name


def environment_deleted_at(blobs: Iterable[StoredBlob]) -> datetime | None:
    """When an environment was deleted, from its blobs: the time its latest marker names, unless a blob
    of it was written after that marker was (declared again: alive). Listings give creation times to the
    second, so a blob written in the marker's second counts as before it (the delete's own last receipt)."""
    blobs = list(blobs)
    markers = [blob for blob in blobs if blob.deleted_at is not None]
    if not markers:
        return None
    latest = max(markers, key=_written)
    if any(blob.deleted_at is None and blob.created is not None and blob.created > _written(latest) for blob in blobs):
        return None
    return latest.deleted_at


def _written(marker: StoredBlob) -> datetime:
    """When a marker was written (the time it names if the listing has no creation time)."""
    written = marker.created or marker.deleted_at
    assert written is not None  # a marker names its deletion time
    return written


def list_blobs(container: ContainerClient) -> Iterator[StoredBlob]:
    for item in container.list_blobs(include=["metadata", "immutabilitypolicy"]):
        metadata = item.metadata or {}
        yield StoredBlob(item.name, item.creation_time, metadata.get("sha256"), current_policy(item))


def sweep_receipts(
    container: ContainerClient,
    rule: RetentionRule,
    mode: PolicyMode,
    now: datetime,
    *,
    send: bool,
    copies: CopyFollower | None = None,
) -> SweepReport:
    """Give every blob of the receipts container the policy the rule asks for (``send=False``: count only)."""
    report = SweepReport()
    for _, group in groupby(list_blobs(container), key=lambda blob: blob.environment):
        blobs = list(group)
        deleted_at = environment_deleted_at(blobs)
        report.environments += 1
        report.deleted_environments += int(deleted_at is not None)
        for blob in blobs:
            report.blobs += 1
            change = rule.change(now, deleted_at, blob.policy, mode)
            changed = change is not None and _apply(container, blob.name, change, send, report)
            if copies is not None:
                report.copies_changed += int(_follow(copies, blob, deleted_at, changed, report))
    return report


def _apply(container: ContainerClient, name: str, change: PolicyChange, send: bool, report: SweepReport) -> bool:
    try:
        if send:
            set_policy(container, name, change)
    except HttpResponseError as error:
        report.fail(name, _reason(error))
        return False
    report.changed += 1
    return True


def _follow(
    copies: CopyFollower, blob: StoredBlob, deleted_at: datetime | None, changed: bool, report: SweepReport
) -> bool:
    try:
        return copies.follow(blob, deleted_at, changed)
    except HttpResponseError as error:
        report.fail(f"copy of {blob.name}", _reason(error))
        return False


def _reason(error: HttpResponseError) -> str:
    return f"{error.status_code} {getattr(error, 'error_code', None) or ''}".strip()

"""The backup location: one blob container, in another storage account than the store it protects.

Layout (every name under the container ``RuntimeCloud:Backup:Container``):

- ``exports/{sequence:010d}/manifest.json``: an export's manifest, written
  last and never overwritten; an export without one did not finish and is
  never restored from.
- ``exports/{sequence:010d}/tables/{table}.{changes|keys}.jsonl.gz`` and
  ``exports/{sequence:010d}/blobs/{container}.jsonl.gz``: the export's parts,
  each named in the manifest with its SHA-256 and line count.
- ``exports/{sequence:010d}/progress.json``: what an unfinished export has
  written so far, so that a retry resumes it.
- ``objects/sha256/{digest}``: blob contents, addressed by their digest: a
  receipt is copied once whatever the number of exports, and a copy can be
  checked against its name. Receipt copies go to the *kept* container
  instead when one is configured (``RuntimeCloud:Backup:ReceiptsContainer``,
  under a time-based immutability policy in Azure), same names; an index
  entry says where its copy is (``"kept": true``). Objects are never pruned
  (:mod:`shared.backup.retention` prunes exports only).
- ``latest.json``: the sequence of the latest complete export (a pointer; the
  manifests are the truth, and a restore falls back to listing them).
- ``status.json``: the last attempt, the last success and the last error,
  which health reads.
"""

from __future__ import annotations

import gzip
import hashlib
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from typing import Any

from azure.core.exceptions import ResourceExistsError, ResourceNotFoundError
from azure.storage.blob import ContainerClient

from shared.backup.settings import BackupSettings
from shared.platform.errors import RuntimeCloudError
from shared.platform.storage.clients import host_storage


class BackupCorrupt(RuntimeCloudError):
    """A part or an object does not hash to the digest its manifest names."""


@dataclass(frozen=True)
class PartRef:
    """A part of an export: where it is, how many lines, and the SHA-256 of its (gzip) bytes."""

    blob: str
    lines: int
    sha256: str

    def as_dict(self) -> dict[str, Any]:
        return {"blob": self.blob, "lines": self.lines, "sha256": self.sha256}

    @classmethod
    def of(cls, document: dict[str, Any]) -> PartRef:
        return cls(document["blob"], int(document["lines"]), document["sha256"])


def export_prefix(sequence: int) -> str:
    return f"exports/{sequence:010d}/"


def object_name(digest: str) -> str:
    return f"objects/sha256/{digest}"


class BackupLocation:
    def __init__(self, container: ContainerClient, kept: ContainerClient | None = None) -> None:
        self.container = container
        self.kept = kept or container  # where receipt copies go: write-once in Azure

    @property
    def description(self) -> str:
        return f"{self.container.account_name}/{self.container.container_name}"

    def ensure(self) -> None:
        for container in {self.container.container_name: self.container, self.kept.container_name: self.kept}.values():
            try:
                container.create_container()
            except ResourceExistsError:
                pass

    # -- plain blobs ------------------------------------------------------------------------

    def read_bytes(self, name: str) -> bytes | None:
        try:
            return self.container.download_blob(name).readall()
        except ResourceNotFoundError:
            return None

    def write_bytes(self, name: str, data: bytes, overwrite: bool = True) -> bool:
        """Write ``name``; with ``overwrite=False`` an existing blob is kept and False answered."""
        try:
            self.container.upload_blob(name, data, overwrite=overwrite)
        except ResourceExistsError:
            return False
        return True

    def read_json(self, name: str) -> dict[str, Any] | None:
        data = self.read_bytes(name)
        return json.loads(data) if data is not None else None

    def write_json(self, name: str, document: dict[str, Any], overwrite: bool = True) -> bool:
        return self.write_bytes(name, json.dumps(document, indent=1, sort_keys=True).encode(), overwrite)

    def names(self, prefix: str) -> list[str]:
        try:
            return [blob.name for blob in self.container.list_blobs(name_starts_with=prefix)]
        except ResourceNotFoundError:  # no container yet: nothing was ever exported
            return []

    def folders(self, prefix: str) -> list[str]:
        """The "folders" right under ``prefix`` (``exports/0000000001/``...), without listing their blobs."""
        try:
            return [item.name for item in self.container.walk_blobs(name_starts_with=prefix, delimiter="/")]
        except ResourceNotFoundError:
            return []

    def delete(self, name: str) -> None:
        """Delete ``name``; one already gone is fine (a prune that stopped half way runs again)."""
        try:
            self.container.delete_blob(name)
        except ResourceNotFoundError:
            pass

    # -- parts: gzip'd JSON lines with a digest ------------------------------------------------

    def write_lines(self, name: str, lines: Iterable[bytes]) -> PartRef:
        count, raw = 0, bytearray()
        for line in lines:
            raw += line
            count += 1
        data = gzip.compress(bytes(raw), mtime=0)  # no timestamp in the header: same rows, same digest
        self.write_bytes(name, data)
        return PartRef(name, count, hashlib.sha256(data).hexdigest())

    def read_lines(self, part: PartRef) -> Iterator[Any]:
        data = self.read_bytes(part.blob)
        if data is None:
            raise BackupCorrupt(f"{part.blob} is missing")
        if hashlib.sha256(data).hexdigest() != part.sha256:
            raise BackupCorrupt(f"{part.blob} does not hash to {part.sha256}")
        for line in gzip.decompress(data).splitlines():
            if line:
                yield json.loads(line)

    # -- objects: blob contents by digest ------------------------------------------------------

    def put_object(self, data: bytes, kept: bool = False) -> tuple[str, bool]:
        """Store ``data`` under its digest (in the kept container if ``kept``); answers (digest, whether it
        was added rather than already there). Create-only, so a write-once container accepts it."""
        digest = hashlib.sha256(data).hexdigest()
        try:
            (self.kept if kept else self.container).upload_blob(object_name(digest), data, overwrite=False)
        except ResourceExistsError:
            return digest, False
        return digest, True

    def read_object(self, digest: str, kept: bool = False) -> bytes:
        try:
            data: bytes | None = (self.kept if kept else self.container).download_blob(object_name(digest)).readall()
        except ResourceNotFoundError:
            data = None
        if data is None:
            raise BackupCorrupt(f"object {digest} is missing")
        if hashlib.sha256(data).hexdigest() != digest:
            raise BackupCorrupt(f"object {digest} does not hash to its name")
        return data


def open_location(connection: str, container: str, kept: str = "", **options: Any) -> BackupLocation:
    """The location in the account that app setting ``connection`` names (a connection string or the
    identity-based ``{connection}__accountName``...), as the host's own store is named; ``kept`` is the
    container for receipt copies (empty: ``container``)."""
    blobs = host_storage(connection, **options).blobs
    return BackupLocation(blobs.get_container_client(container), blobs.get_container_client(kept) if kept else None)


def open_backup_location(settings: BackupSettings, probe: bool = False) -> BackupLocation | None:
    """The location ``settings`` name, every call bounded by ``TimeoutSeconds`` (``probe``: one short
    attempt per call, for recording a failure the location may have caused); None when not configured."""
    if not settings.configured:
        return None
    options = settings.probe_options() if probe else settings.location_options()
    return open_location(settings.connection, settings.container, settings.receipts_container, **options)

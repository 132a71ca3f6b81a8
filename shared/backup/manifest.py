"""An export's manifest, the pointer to the latest one, and the export status health reads.

A manifest is the commit point of an export: it is written after every part
it names, with create-only semantics, so a manifest that exists is complete
and never changes. ``as_of`` is when the export *started*: every change
committed before it is in this export or an earlier one of its chain, so the
data a restore can lose is what changed after ``as_of``.

``chain`` lists the exports a restore replays, oldest first: the last full
export, then every incremental one after it up to this one. ``epoch`` is the
backup epoch the export read under (:mod:`shared.backup.epochs`: every
restore starts one) and ``follows`` the export it came after; a chain never
crosses an epoch (the first export of an epoch is full), and a restore
refuses one that does.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from shared.backup.location import BackupLocation, PartRef, export_prefix

FORMAT = 2  # 2: epoch and follows (a manifest of format 1 reads as epoch 0, following nothing known)
LATEST = "latest.json"
STATUS = "status.json"


class TableParts(BaseModel):
    changes: dict[str, Any]  # PartRef.as_dict(): the rows changed since ``since`` (all rows when full)
    keys: dict[str, Any]  # every (PartitionKey, RowKey) of the table: rows absent here were deleted

    def changes_part(self) -> PartRef:
        return PartRef.of(self.changes)

    def keys_part(self) -> PartRef:
        return PartRef.of(self.keys)


class ContainerPart(BaseModel):
    index: dict[str, Any]  # PartRef.as_dict(): every blob, with its digest, content type and metadata
    blobs: int
    bytes: int
    copied: int  # objects this export added to the location (the others were there already)


class Manifest(BaseModel):
    format: int = FORMAT
    sequence: int
    as_of: datetime
    finished_at: datetime
    full: bool
    since: datetime | None = None  # incremental: rows with a Timestamp at or after this were read
    chain: list[int]
    base_as_of: datetime  # as_of of the full export the chain starts from
    tables: dict[str, TableParts] = Field(default_factory=dict)
    containers: dict[str, ContainerPart] = Field(default_factory=dict)
    source_account: str = ""
    epoch: int = 0  # the backup epoch whose store this export read
    follows: int | None = None  # the sequence of the latest complete export when this one started

    @property
    def name(self) -> str:
        return manifest_name(self.sequence)

    def counts(self) -> dict[str, Any]:
        return {
            "tables": {name: parts.keys["lines"] for name, parts in self.tables.items()},
            "changed_rows": sum(parts.changes["lines"] for parts in self.tables.values()),
            "blobs": {name: part.blobs for name, part in self.containers.items()},
        }


def manifest_name(sequence: int) -> str:
    return export_prefix(sequence) + "manifest.json"


def read_manifest(location: BackupLocation, sequence: int) -> Manifest | None:
    document = location.read_json(manifest_name(sequence))
    return Manifest.model_validate(document) if document is not None else None


def latest_manifest(location: BackupLocation) -> Manifest | None:
    """The latest complete export: from the pointer on (it may lag a manifest written by an export that
    stopped before moving it), or, without a pointer, the highest manifest listed."""
    pointer = location.read_json(LATEST)
    if pointer is None:
        listed = [
            int(name.split("/")[1])
            for name in location.names("exports/")
            if name.endswith("/manifest.json") and name.split("/")[1].isdigit()
        ]
        return read_manifest(location, max(listed)) if listed else None
    found = read_manifest(location, int(pointer["sequence"]))
    while found is not None and (following := read_manifest(location, found.sequence + 1)) is not None:
        found = following
    return found


def point_latest(location: BackupLocation, manifest: Manifest) -> None:
    """Move the pointer forward (never back: a slow exporter may finish after a faster one)."""
    current = location.read_json(LATEST)
    if current is None or int(current["sequence"]) < manifest.sequence:
        location.write_json(
            LATEST, {"sequence": manifest.sequence, "as_of": manifest.as_of.isoformat(), "manifest": manifest.name}
        )

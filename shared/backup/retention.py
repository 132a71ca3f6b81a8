"""Export retention: prune exports no restore within ``RetentionDays`` could start from.

A restore replays a **chain**: a full export and the incremental ones after
it (``Manifest.chain``, consecutive sequences). Sequences grow with time, so
the exports worth keeping are one range, from a boundary to the newest:

- the **latest** export's chain, always (whatever ``RetentionDays`` says: it
  is what a restore uses now);
- every export whose ``as_of`` is within ``RetentionDays``, with the chain it
  depends on (a restore to an earlier point, say before a bad change);

so the boundary is the first sequence of the chain of the oldest export still
within retention (or of the latest export, if it is older). Everything below
it is pruned: a full export every ``FullEveryHours`` starts a new chain, which
makes the chains before it prunable once they age out.

Order makes a prune safe to stop at any point: an export's manifest is
deleted first (from then on it is not a complete export, and nothing
restores from it), then its parts. A prune that stopped half way is finished
by the next one, since it walks every folder below the boundary. Objects
(blob copies by digest) are never pruned here: receipts among them are kept
for years, under immutability in Azure.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from shared.backup.location import BackupLocation
from shared.backup.manifest import Manifest, latest_manifest, manifest_name, read_manifest
from shared.backup.settings import BackupSettings


@dataclass
class PruneReport:
    boundary: int  # exports below this sequence were pruned; this one and later are kept
    pruned: list[int] = field(default_factory=list)
    blobs_deleted: int = 0


def prune_exports(location: BackupLocation, settings: BackupSettings, now: datetime) -> PruneReport | None:
    """Delete exports older than the retention boundary; None when there is no complete export yet."""
    latest = latest_manifest(location)
    if latest is None:
        return None
    sequences = _export_sequences(location)
    boundary = _boundary(location, sequences, latest, now - timedelta(days=settings.retention_days))
    report = PruneReport(boundary)
    for sequence in (s for s in sequences if s < boundary):
        report.blobs_deleted += _delete_export(location, sequence)
        report.pruned.append(sequence)
    return report


def _export_sequences(location: BackupLocation) -> list[int]:
    """Every export's sequence, complete or not, oldest first."""
    found = []
    for folder in location.folders("exports/"):
        name = folder.rstrip("/").rsplit("/", 1)[-1]
        if name.isdigit():
            found.append(int(name))
    return sorted(found)


def _boundary(location: BackupLocation, sequences: list[int], latest: Manifest, cutoff: datetime) -> int:
    """The first sequence of the chain of the oldest export within retention (at most the latest's)."""
    boundary = latest.chain[0]
    for sequence in sequences:  # oldest first: after regular prunes, the first complete one is usually it
        if sequence >= boundary:
            break
        found = read_manifest(location, sequence)
        if found is not None and found.as_of >= cutoff:
            return min(found.chain[0], boundary)
    return boundary


def _delete_export(location: BackupLocation, sequence: int) -> int:
    """The manifest first (the export stops being restorable), then every part; answers blobs deleted."""
    name = manifest_name(sequence)
    location.delete(name)
    prefix = name.rsplit("/", 1)[0] + "/"
    parts = location.names(prefix)
    for part in parts:
        location.delete(part)
    return len(parts) + 1

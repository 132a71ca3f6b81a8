"""Backup and restore of the runtime-cloud store (docs/restore.md, "Backup and restore (runbook)").

- :mod:`.export`: the timer's work: what changed in the registry's tables
  since the last export (with the full key set, so deletes are captured) and
  new blobs by digest, to a location in another storage account;
- :mod:`.manifest`: an export's manifest, its commit point (counts, digests,
  ``as_of``: anything written after it is what a restore loses);
- :mod:`.restore`: rebuild an empty store from the latest complete export;
  capacity rows pass through :mod:`shared.capacity.epoch` so that no lease
  from before survives and no fencing token is issued twice;
- :mod:`.status`: what health shows: the schedule, the RPO, the latest
  export's age and the last error.

Invariants: an export is complete only when its manifest exists (written
last, never overwritten); every part and object is checked against its
SHA-256 when it is read back; Durable's task hub is never exported (runs are
reconciled from their own rows after a restore, see
:mod:`shared.wiring.backup`).
"""

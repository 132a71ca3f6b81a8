"""Backup copies of receipts keep the retention of the receipts they copy.

A receipt's copy is ``objects/sha256/{digest}`` in the location's kept
container (``RuntimeCloud:Backup:ReceiptsContainer``, version-level immutable
in Azure), named by content, so it says nothing of its environment: the
retention timer walks the *receipts* (:mod:`shared.provisioning.receipt_sweep`)
and, for each, :class:`ReceiptCopies` gives the copy the policy the rule asks
for, deciding on the copy's own current policy (it may differ from the
receipt's: the copy was written later, under the container's default policy).

To stay cheap it reads a copy's properties only when it may need a change:
when its receipt was just changed, or when the receipt is recent (written
within the rule's lead, so that a copy the export made since is brought in
line at the next firings). A copy not made yet is left to a later firing.
"""

from __future__ import annotations

from datetime import datetime

from azure.core.exceptions import ResourceNotFoundError

from shared.backup.location import BackupLocation, object_name
from shared.provisioning.api import PolicyMode, RetentionRule, StoredBlob, current_policy, set_policy


class ReceiptCopies:
    """A :class:`shared.provisioning.receipt_sweep.CopyFollower` over a backup location's kept container."""

    def __init__(
        self, location: BackupLocation, rule: RetentionRule, mode: PolicyMode, now: datetime, *, send: bool
    ) -> None:
        self._kept = location.kept
        self._rule = rule
        self._mode = mode
        self._now = now
        self._send = send

    def follow(self, receipt: StoredBlob, deleted_at: datetime | None, receipt_changed: bool) -> bool:
        if receipt.digest is None:
            return False  # not written by the host's receipt stores (they all record the digest)
        recent = receipt.created is not None and receipt.created >= self._now - self._rule.lead
        if not (receipt_changed or recent):
            return False
        name = object_name(receipt.digest)
        try:
            properties = self._kept.get_blob_client(name).get_blob_properties()
        except ResourceNotFoundError:
            return False  # the export has not copied it yet
        change = self._rule.change(self._now, deleted_at, current_policy(properties), self._mode)
        if change is None:
            return False
        if self._send:
            set_policy(self._kept, name, change)
        return True

"""Version-level immutability policies on blobs, as the receipts and their backup copies use them.

Three calls and nothing else: the policy a receipt is *written* with (Put
Blob's ``x-ms-immutability-policy-until-date`` / ``-mode`` headers), the
policy a stored version *has* (from a listing or its properties), and *Set
Blob Immutability Policy* (``PUT ...?comp=immutabilityPolicies``), which the
retention timer sends to extend or lock one. Azurite accepts the upload
headers and ignores them, and answers 501 to the set call: see
``RuntimeCloud:Receipts:Immutability``.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from azure.storage.blob import ContainerClient, ImmutabilityPolicy

from shared.provisioning.receipt_retention import CurrentPolicy, PolicyChange, PolicyMode
from shared.provisioning.receipt_settings import ReceiptSettings


def upload_options(settings: ReceiptSettings | None, now: datetime) -> dict[str, Any]:
    """``upload_blob`` keywords that write a receipt under its first policy (none when immutability is off)."""
    if settings is None or not settings.immutability:
        return {}
    expiry = settings.rule().at_write(now)
    return {"immutability_policy": ImmutabilityPolicy(expiry_time=expiry, policy_mode=settings.policy_mode.value)}


def current_policy(properties: Any) -> CurrentPolicy:
    """The policy of a listed blob (``list_blobs(include=["immutabilitypolicy"])``) or of its properties."""
    policy = getattr(properties, "immutability_policy", None)
    expiry = getattr(policy, "expiry_time", None) if policy is not None else None
    mode = str(getattr(policy, "policy_mode", "") or "") if policy is not None else ""
    return CurrentPolicy(expiry=expiry, locked=mode.lower() == PolicyMode.LOCKED.value.lower())


def set_policy(container: ContainerClient, name: str, change: PolicyChange) -> None:
    """Set Blob Immutability Policy on the blob's current version."""
    policy = ImmutabilityPolicy(expiry_time=change.expiry, policy_mode=change.mode.value)
    container.get_blob_client(name).set_immutability_policy(policy)

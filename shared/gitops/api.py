"""What the triggers may use of GitOps: bindings, webhooks, sync and adoption.

Other features, the triggers (``functions/``, ``orchestrations/``), health and the runner job
import only this module of the package; only the composition root (``shared/wiring``) reaches
inside (the "api-only" contract in pyproject.toml).
"""

from __future__ import annotations

# modules the webhook trigger calls by module name (signatures.is_signed, secrets.resolve)
from shared.gitops import secrets, signatures
from shared.gitops.adoption import FollowsGit
from shared.gitops.bindings import BindingRequest, SuspendRequest
from shared.gitops.messages import BUSY_RETRIES, SyncMessage
from shared.gitops.reconcile import SyncBusy, SyncOutcome, Trigger
from shared.gitops.responses import GitOpsBindingView, GitOpsStatusView, GitOpsSyncView, GitOpsWebhookAnswer
from shared.gitops.secrets import MIN_SECRET_CHARS, app_setting_status
from shared.gitops.webhooks import UnreadablePayload, read_push

__all__ = [
    "BUSY_RETRIES",
    "signatures",
    "secrets",
    "BindingRequest",
    "FollowsGit",
    "GitOpsBindingView",
    "GitOpsStatusView",
    "GitOpsSyncView",
    "GitOpsWebhookAnswer",
    "MIN_SECRET_CHARS",
    "SuspendRequest",
    "SyncBusy",
    "SyncMessage",
    "SyncOutcome",
    "Trigger",
    "UnreadablePayload",
    "app_setting_status",
    "read_push",
]

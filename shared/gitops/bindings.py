"""A binding: one environment following one file on one branch of an allowed repository.

The binding row is also the reconciler's ledger (``status``): the last commit
it saw, the commit it reserved for declaration (``pending_*``) and the last one
it declared, with the run. ``declarations`` only grows: each commit the
reconciler decides to declare takes the next number, and the run's idempotency
key names it (:func:`idempotency_key`), so a commit is declared once however
many triggers race for it, and a branch moved back to an older commit is a new
declaration rather than the old, finished run. ``uid`` is new for each binding
created, so a binding deleted and made again never reuses a key.

``self_heal`` (Argo CD's selfHeal): when the environment's current declaration
did not come from the branch (someone declared over it by hand), the next
automatic sync declares the branch head again. ``last_self_heal`` names the
declaration it overrode, so each hand declaration is healed once, never in a
loop (:mod:`shared.gitops.override`).
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from shared.gitops.secrets import REFERENCE_PATTERN
from shared.gitops.windows import MAX_WINDOWS, SyncWindow

BRANCH_PATTERN = r"^[A-Za-z0-9][A-Za-z0-9._/-]{0,254}$"
MAX_ERROR_CHARS = 2000  # a binding is one table property: an error is kept short


class BindingRequest(BaseModel):
    """What an Operator sends to bind an environment (``PUT .../gitops``)."""

    model_config = ConfigDict(extra="forbid")

    repository: str = Field(min_length=1, max_length=2048, description="absolute local path or https:// URL")
    path: str = Field(min_length=1, max_length=1024, description="the specification file inside the repository")
    branch: str = Field(default="main", pattern=BRANCH_PATTERN, description="the branch the environment follows")
    sync_windows: list[SyncWindow] = Field(default_factory=list, max_length=MAX_WINDOWS)
    webhook_secret: str | None = Field(
        default=None,
        pattern=REFERENCE_PATTERN,
        description="where the webhook secret is: an app setting RuntimeCloudGitOps__... or a Key Vault secret "
        "URI; default: the installation's RuntimeCloud:GitOps:WebhookSecret",
    )
    self_heal: bool = Field(
        default=False,
        description="declare the branch head again when someone declared over it by hand (once per such "
        "declaration); without it the status only shows the environment as overridden",
    )


class SuspendRequest(BaseModel):
    model_config = ConfigDict(extra="forbid")

    reason: str = Field(default="", max_length=2000)


class SelfHeal(BaseModel):
    """A declaration of the branch head that replaced a declaration made over it by hand."""

    at: str
    overridden_run_id: str = Field(description="the run whose declaration did not come from the branch")
    commit: str
    run_id: str = Field(description="the run that declared the branch head again")
    trigger: str


class BindingStatus(BaseModel):
    """What the reconciler knows; ``last_*`` fields are None until the first sync."""

    last_seen_commit: str | None = None
    last_checked_at: str | None = None
    last_trigger: str | None = None
    last_outcome: str | None = None
    last_error: str | None = None
    last_error_at: str | None = None
    pending_commit: str | None = None  # reserved for declaration; a crash before declaring leaves it
    pending_sequence: int | None = None
    pending_at: str | None = None
    pending_heal_of: str | None = None  # the reservation re-declares the head over this run's declaration
    last_declared_commit: str | None = None
    last_declared_run_id: str | None = None
    last_declared_at: str | None = None
    last_declared_read_at: str | None = None  # when the read that found it started: older reads never declare
    declarations: int = 0
    last_self_heal: SelfHeal | None = None
    sync_attempts: int = Field(default=0, description="syncs handled (every trigger, whatever came of it)")


class Binding(BaseModel):
    tenant: str
    environment: str
    repository: str
    path: str
    branch: str
    sync_windows: list[SyncWindow] = Field(default_factory=list)
    webhook_secret: str | None = None
    self_heal: bool = False
    uid: str
    generation: int = 1  # bumped when the source changes: a sync read under an older one declares nothing
    suspended: bool = False
    suspended_at: str | None = None
    suspended_by: str | None = None
    suspend_reason: str | None = None
    created_at: str
    created_by: str
    updated_at: str
    updated_by: str
    status: BindingStatus = Field(default_factory=BindingStatus)

    def same_source(self, request: BindingRequest) -> bool:
        return (self.repository, self.path, self.branch) == (request.repository, request.path, request.branch)

    def public_view(self) -> dict[str, Any]:
        view = self.model_dump(mode="json", exclude={"tenant", "uid", "generation"})
        view["webhook_path"] = webhook_path(self.tenant, self.environment)
        return view


def webhook_path(tenant: str, environment: str) -> str:
    return f"/runtime-cloud/gitops/webhooks/{tenant}/{environment}"


def idempotency_key(binding: Binding, sequence: int, commit: str) -> str:
    """The run's key: this binding's ``sequence``-th declaration, of ``commit`` (at most 200 characters)."""
    return f"{key_prefix(binding)}{sequence}:{commit}"


def key_prefix(binding: Binding) -> str:
    """What the idempotency key of every run this binding declared starts with."""
    return f"gitops:{binding.environment}:{binding.uid}:"


def bounded_error(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[:MAX_ERROR_CHARS] + "... (truncated)"

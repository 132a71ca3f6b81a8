"""GitOps answers: a binding, its sync status, a sync's outcome, a webhook's answer."""

from __future__ import annotations

from pydantic import BaseModel, Field

from shared.gitops.bindings import Binding, SelfHeal
from shared.platform.http.contract import view_of

GitOpsBindingView = view_of(
    Binding,
    "GitOpsBindingView",
    exclude=("tenant", "uid", "generation"),
    webhook_path=(str, Field(description="where the Git host sends push webhooks (POST, signed)")),
)


class GitOpsStatusView(BaseModel):
    """The binding's sync status as of now."""

    environment: str
    repository: str
    path: str
    branch: str
    suspended: bool
    head_commit: str | None = Field(description="the branch's head (local repositories), else the last one seen")
    last_seen_commit: str | None
    last_checked_at: str | None
    last_outcome: str | None
    last_declared_commit: str | None
    last_declared_run_id: str | None
    last_applied_commit: str | None = Field(description="the commit of the last applied run, if it came from here")
    last_applied_run_id: str | None
    behind: bool | None = Field(description="the head is not what was last applied (None: nothing read yet)")
    behind_commits: int | None = Field(description="commits between the applied commit and the head, when countable")
    behind_capped: bool = Field(description="behind_commits is a lower bound (RuntimeCloud:GitOps:MaxBehindCommits)")
    last_error: str | None
    last_error_at: str | None
    sync_window_open: bool = Field(description="automatic syncs may declare now")
    sync_attempts: int
    self_heal: bool = Field(description="automatic syncs declare the head again over a hand declaration")
    overridden: bool = Field(description="the environment's current declaration did not come from the branch")
    overridden_by_run_id: str | None = Field(description="the run declared over the branch")
    overridden_by_source: str | None = Field(
        description="where that run's specification came from: inline, git, proposal"
    )
    last_self_heal: SelfHeal | None = Field(
        description="the last time the head was declared again over a hand declaration"
    )


class GitOpsSyncView(BaseModel):
    """What one sync did: ``declared``, ``already-declared``, ``up-to-date``, ``fetch-failed``..."""

    outcome: str
    commit: str | None
    run_id: str | None
    run_state: str | None
    error: str | None
    overridden_by_run_id: str | None = Field(description="outcome overridden or self-healed: the hand declaration")


class GitOpsWebhookAnswer(BaseModel):
    """``queued`` (a sync will read the branch), ``ignored`` (another branch or event), ``suspended``, ``pong``."""

    outcome: str
    detail: str | None = None

"""``RuntimeCloud:Provisioning:*``: run policy (approval per environment class, deadlines) and Git sources."""

from __future__ import annotations

from enum import Enum
from typing import Annotated, Any

from pydantic import Field, field_validator
from pydantic_settings import NoDecode

from shared.platform.git_policy import parse_allowed_sources
from shared.platform.settings_section import Section, six_field_ncrontab


class ProvisioningSettings(Section):
    """Run policy. Approval is required per environment class; the wait has a deadline."""

    production_requires_approval: bool = Field(default=True, alias="ProductionRequiresApproval")
    non_production_requires_approval: bool = Field(default=False, alias="NonProductionRequiresApproval")
    approval_timeout_seconds: float = Field(default=24 * 3600, gt=0, alias="ApprovalTimeoutSeconds")
    # A waiting run is woken by an event when its environment frees up; this is the fallback check.
    queue_recheck_seconds: float = Field(default=60, gt=0, le=3600, alias="QueueRecheckSeconds")
    # The reconciler that restarts or fails stuck runs (6-field NCRONTAB, read when the app starts).
    reconcile_schedule: str = Field(default="0 */5 * * * *", alias="ReconcileSchedule")
    # Where specifications may come from in Git: folders and https:// prefixes, for every tenant or per
    # tenant (see shared.platform.git_policy). None by default: Git sources are refused.
    git_allowed_sources: Annotated[dict[str, list[str]], NoDecode] = Field(
        default_factory=dict, alias="GitAllowedSources"
    )
    # Bounds of one https fetch: bytes received and time taken.
    git_max_fetch_bytes: int = Field(default=64 * 1024 * 1024, ge=1024, alias="GitMaxFetchBytes")
    git_fetch_timeout_seconds: float = Field(default=60, gt=0, le=600, alias="GitFetchTimeoutSeconds")

    @field_validator("reconcile_schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        return six_field_ncrontab(value)

    @field_validator("git_allowed_sources", mode="before")
    @classmethod
    def _git_sources(cls, value: Any) -> dict[str, list[str]]:
        return parse_allowed_sources(value)

    def requires_approval(self, environment_class: str) -> bool:
        if environment_class == "non-production":
            return self.non_production_requires_approval
        return self.production_requires_approval  # production, or a class not known (never the laxer rule)


class EnvironmentSource(str, Enum):
    LOCAL = "local"  # this host's own table (shared.provisioning.environment_registry)
    CONTROL_PLANE = "control-plane"  # ControlPlaneApi (shared.provisioning.control_plane_environments)


class EnvironmentsSettings(Section):
    """``RuntimeCloud:Environments:*``: who registers environments (their class, tenant and target).

    - ``Source``: ``local`` (default; the host's own table) or ``control-plane`` (ControlPlaneApi, which
      ``RuntimeCloud:ControlPlane:BaseUrl`` must then point at)."""

    source: EnvironmentSource = Field(default=EnvironmentSource.LOCAL, alias="Source")

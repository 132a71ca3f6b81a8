"""Typed settings of the Runtime Cloud host.

Settings come from app settings (environment variables). Locally the host reads
them from ``local.settings.json`` ``Values``. Names follow the source page's
options table with ``:`` written as ``__`` in app settings, for example
``RuntimeCloud:Host:EnabledModules`` is ``RuntimeCloud__Host__EnabledModules``.

Defaults (the source page's where it has one):

- ``RuntimeCloud:Host:EnabledModules``: ``provisioning, inventory, capacity``
- ``RuntimeCloud:Topology``: ``saas-default``
- ``RuntimeCloud:IaC:Runner``: ``pulumi`` (the local sample sets ``embedded``)
- ``RuntimeCloud:IaC:StepIntervalSeconds``: ``0``; ``PulumiBackendUrl``: Pulumi's default
- ``RuntimeCloud:Targets``: none (a JSON array of targets)
- ``RuntimeCloud:Auth:*``: see :class:`AuthSettings`
- ``RuntimeCloud:ConfigPlatform:Url``: not configured
- ``RuntimeCloud:Health:ProbeTimeoutSeconds``: ``3``
- ``RuntimeCloud:Capacity:*``: see :class:`shared.capacity.settings.CapacitySettings`
- ``RuntimeCloud:Provisioning:*``: see :class:`ProvisioningSettings`
- ``RuntimeCloud:Inventory:*``: see :class:`shared.inventory.settings.InventorySettings`
- ``RuntimeCloud:Outbox:DispatchSchedule`` / ``PurgeSchedule``: ``*/15 * * * * *`` / ``0 30 3 * * *``
- ``RuntimeCloud:Durable:HistoryRetentionDays``: ``30``; ``PurgeSchedule``: ``0 0 5 * * *``
- Every ``...Schedule`` is a 6-field NCRONTAB expression (seconds first), checked
  when the settings are read; a timer declares it as a ``%...%`` reference (see
  :mod:`shared.timer_schedules`)
- ``OrleansMessaging:ServiceName``: ``runtime-cloud``
- ``AzureWebJobsStorage``: connection string (local) or the identity-based
  settings ``AzureWebJobsStorage__accountName`` / ``__blobServiceUri`` /
  ``__queueServiceUri`` / ``__tableServiceUri`` / ``__endpointSuffix`` /
  ``__credential`` / ``__clientId`` (Azure, with a managed identity); see
  :mod:`shared.storage.connection`

An invalid setting stops the host at start with :class:`InvalidSettings`, whose
message names the setting the way an operator writes it.
"""

from __future__ import annotations

import functools
import json
from enum import Enum
from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator
from pydantic_settings import BaseSettings, NoDecode, SettingsConfigDict

from shared.capacity.settings import CapacitySettings
from shared.errors import InvalidSettings
from shared.inventory.settings import InventorySettings
from shared.modules import KNOWN_MODULES
from shared.provisioning.git_policy import parse_allowed_sources
from shared.targets import ProvisioningTarget
from shared.settings_section import NcrontabSchedule, Section, six_field_ncrontab
from shared.storage.connection import read_connection
from shared.uniqueness import repeated


def _split_list(value: Any) -> Any:
    """Accept ``a, b, c`` as well as a JSON array for list settings."""
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            return json.loads(text)
        return [part.strip() for part in text.split(",") if part.strip()]
    return value


class Topology(str, Enum):
    SAAS_DEFAULT = "saas-default"
    HYBRID = "hybrid"
    ON_PREM = "on-prem"
    HYBRID_COMPUTE = "hybrid-compute"


class RunnerName(str, Enum):
    PULUMI = "pulumi"
    EMBEDDED = "embedded"


class HostSettings(Section):
    enabled_modules: Annotated[list[str], NoDecode] = Field(
        default_factory=lambda: list(KNOWN_MODULES), alias="EnabledModules"
    )

    @field_validator("enabled_modules", mode="before")
    @classmethod
    def _parse_modules(cls, value: Any) -> Any:
        return _split_list(value)

    @field_validator("enabled_modules")
    @classmethod
    def _known_modules(cls, modules: list[str]) -> list[str]:
        unknown = [name for name in modules if name not in KNOWN_MODULES]
        if unknown:
            raise ValueError(f"unknown module(s) {unknown}; known: {list(KNOWN_MODULES)}")
        return list(dict.fromkeys(modules))


class IaCSettings(Section):
    runner: RunnerName = Field(default=RunnerName.PULUMI, alias="Runner")
    # Pause between resource changes of one apply, to stay under a target API's rate limits.
    step_interval_seconds: float = Field(default=0.0, ge=0, le=60, alias="StepIntervalSeconds")
    # An apply runs in slices of about this long, each one activity call: a slice plus one last step
    # (at most a minute's pause and a target's retries) stays far inside the 30-minute functionTimeout,
    # so no apply is ever cut off there. 0 stops after every change.
    apply_slice_seconds: float = Field(default=300.0, ge=0, le=1200, alias="ApplySliceSeconds")
    pulumi_backend_url: str | None = Field(default=None, alias="PulumiBackendUrl")
    pulumi_work_root: str | None = Field(default=None, alias="PulumiWorkRoot")


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
    # tenant (see shared.provisioning.git_policy). None by default: Git sources are refused.
    git_allowed_sources: Annotated[dict[str, list[str]], NoDecode] = Field(
        default_factory=dict, alias="GitAllowedSources")
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
        if environment_class == "production":
            return self.production_requires_approval
        return self.non_production_requires_approval


class AuthSettings(Section):
    """Bearer token validation.

    In Azure set ``Authority`` (Entra ID, e.g. ``https://login.microsoftonline.com/{tenant}/v2.0``)
    or ``JwksUri``; locally ``LocalSigningKeyDirectory`` points at the folder where the
    development issuer keeps its key (``.data/auth``).
    """

    issuer: str = Field(default="runtime-cloud-local-issuer", alias="Issuer")
    audience: str = Field(default="api://runtime-cloud", alias="Audience")
    authority: str | None = Field(default=None, alias="Authority")
    jwks_uri: str | None = Field(default=None, alias="JwksUri")
    local_signing_key_directory: str | None = Field(default=None, alias="LocalSigningKeyDirectory")
    tenant_claim: str = Field(default="tid", alias="TenantClaim")
    clock_skew_seconds: int = Field(default=60, ge=0, le=600, alias="ClockSkewSeconds")
    # Longest accepted exp - iat: Entra ID access tokens live at most 24 h, so a longer one was not
    # issued for this API's callers (or a stolen signing key minted it to outlive any rotation).
    max_token_lifetime_seconds: int = Field(default=24 * 3600, ge=60, le=7 * 24 * 3600,
                                            alias="MaxTokenLifetimeSeconds")


class OutboxSettings(Section):
    """The outbox timers: resending events a crash left unsent, and purging dispatched rows."""

    # Events are sent right after their commit; this only recovers the ones a crash left behind.
    dispatch_schedule: NcrontabSchedule = Field(default="*/15 * * * * *", alias="DispatchSchedule")
    purge_schedule: NcrontabSchedule = Field(default="0 30 3 * * *", alias="PurgeSchedule")


class DurableSection(Section):
    """Durable Functions housekeeping (the task hub's own name is host.json's ``hubName``)."""

    # Finished instances (Completed, Failed, Terminated) created longer ago than this lose their
    # history. Keep it well above a day: the reconciler reads how a run's orchestration ended.
    history_retention_days: float = Field(default=30, ge=0, le=3650, alias="HistoryRetentionDays")
    purge_schedule: NcrontabSchedule = Field(default="0 0 5 * * *", alias="PurgeSchedule")


class ConfigPlatformSettings(Section):
    url: str | None = Field(default=None, alias="Url")


class HealthSettings(Section):
    probe_timeout_seconds: float = Field(default=3.0, gt=0, le=30, alias="ProbeTimeoutSeconds")


class RuntimeCloudSection(Section):
    host: HostSettings = Field(default_factory=HostSettings, alias="Host")
    topology: Topology = Field(default=Topology.SAAS_DEFAULT, alias="Topology")
    iac: IaCSettings = Field(default_factory=IaCSettings, alias="IaC")
    targets: list[ProvisioningTarget] = Field(default_factory=list, alias="Targets")
    auth: AuthSettings = Field(default_factory=AuthSettings, alias="Auth")
    config_platform: ConfigPlatformSettings = Field(
        default_factory=ConfigPlatformSettings, alias="ConfigPlatform"
    )
    health: HealthSettings = Field(default_factory=HealthSettings, alias="Health")
    capacity: CapacitySettings = Field(default_factory=CapacitySettings, alias="Capacity")
    provisioning: ProvisioningSettings = Field(default_factory=ProvisioningSettings, alias="Provisioning")
    inventory: InventorySettings = Field(default_factory=InventorySettings, alias="Inventory")
    outbox: OutboxSettings = Field(default_factory=OutboxSettings, alias="Outbox")
    durable: DurableSection = Field(default_factory=DurableSection, alias="Durable")

    @field_validator("targets")
    @classmethod
    def _unique_target_ids(cls, targets: list[ProvisioningTarget]) -> list[ProvisioningTarget]:
        if twice := repeated(target.id for target in targets):
            raise ValueError(f"target ids must be unique; repeated: {twice}")
        return targets


class MessagingSection(Section):
    service_name: str = Field(default="runtime-cloud", alias="ServiceName", min_length=1)


class Settings(BaseSettings):
    """All settings of the host, read from the environment."""

    model_config = SettingsConfigDict(
        env_nested_delimiter="__",
        case_sensitive=False,
        populate_by_name=True,
        extra="ignore",
        frozen=True,
    )

    runtime_cloud: RuntimeCloudSection = Field(default_factory=RuntimeCloudSection, alias="RuntimeCloud")
    messaging: MessagingSection = Field(default_factory=MessagingSection, alias="OrleansMessaging")
    # The store's connection (AzureWebJobsStorage...) is read by shared.storage.connection, as the
    # Functions host reads it: a connection string or identity-based settings, not one string field.

    def target(self, target_id: str) -> ProvisioningTarget | None:
        return next((t for t in self.runtime_cloud.targets if t.id == target_id), None)


def _setting_name(location: tuple[Any, ...]) -> str:
    """Turn a validation error location into the name an operator writes."""
    parts = [str(part) for part in location]
    if parts and parts[0] in Settings.model_fields:
        parts[0] = Settings.model_fields[parts[0]].alias or parts[0]
    return ":".join(parts)


def load_settings() -> Settings:
    """Read and validate settings; raise :class:`InvalidSettings` naming what is wrong."""
    try:
        settings = Settings()  # type: ignore[call-arg]
    except ValidationError as error:
        problems = [
            f"{_setting_name(issue['loc'])} (app setting "
            f"{_setting_name(issue['loc']).replace(':', '__')}): {issue['msg']}"
            for issue in error.errors()
        ]
        raise InvalidSettings("invalid settings: " + "; ".join(problems)) from None
    _check_key_source(settings.runtime_cloud.auth)
    _check_storage()
    return settings


def _check_key_source(auth: AuthSettings) -> None:
    if not (auth.authority or auth.jwks_uri or auth.local_signing_key_directory):
        raise InvalidSettings(
            "invalid settings: RuntimeCloud:Auth: set Authority, JwksUri or LocalSigningKeyDirectory "
            "(app settings RuntimeCloud__Auth__...) so that bearer tokens can be verified"
        )


def _check_storage() -> None:
    try:
        read_connection("AzureWebJobsStorage")
    except InvalidSettings as error:
        raise InvalidSettings(f"invalid settings: {error}") from None


@functools.lru_cache(maxsize=1)
def get_settings() -> Settings:
    """The process's settings, read once (none of them is reloadable)."""
    return load_settings()

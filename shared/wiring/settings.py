"""Typed settings of the Runtime Cloud host.

Settings come from app settings (environment variables). Locally the host reads
them from ``local.settings.json`` ``Values``. Names are the README's (Settings,
and Capacity settings), with ``:`` written as ``__`` in app settings, for example
``RuntimeCloud:Host:EnabledModules`` is ``RuntimeCloud__Host__EnabledModules``.

Defaults (the README's Settings table lists the same):

- ``RuntimeCloud:Host:EnabledModules``: ``provisioning, inventory, capacity``
- ``RuntimeCloud:Topology``: ``saas-default``
- ``RuntimeCloud:IaC:Runner``: ``pulumi`` (the local sample sets ``embedded``)
- ``RuntimeCloud:IaC:StepIntervalSeconds``: ``0``; ``PulumiBackendUrl``: Pulumi's default
- ``RuntimeCloud:Targets``: none (a JSON array of targets)
- ``RuntimeCloud:Auth:*``: see :class:`shared.platform.host_settings.AuthSettings`
- ``RuntimeCloud:ConfigPlatform:Url``: not configured
- ``RuntimeCloud:Health:ProbeTimeoutSeconds``: ``3``; ``CacheSeconds``: ``1``
- ``RuntimeCloud:Capacity:*``: see :class:`shared.capacity.settings.CapacitySettings`
- ``RuntimeCloud:Autoscaling:*``: see :class:`shared.autoscaling.settings.AutoscalingSettings`
- ``RuntimeCloud:Provisioning:*``: see :class:`shared.provisioning.settings.ProvisioningSettings`
- ``RuntimeCloud:Environments:Source``: ``local`` (see :class:`shared.provisioning.settings.EnvironmentsSettings`)
- ``RuntimeCloud:Inventory:*``: see :class:`shared.inventory.settings.InventorySettings`
- ``RuntimeCloud:Policy:*``: see :class:`shared.policy.settings.PolicySettings` (the gate; on by default)
- ``RuntimeCloud:GitOps:*``: see :class:`shared.gitops.settings.GitOpsSettings`
- ``RuntimeCloud:Outbox:DispatchSchedule`` / ``PurgeSchedule``: ``*/15 * * * * *`` / ``0 30 3 * * *``
- ``RuntimeCloud:Backup:*``: see :class:`shared.backup.settings.BackupSettings`
- ``RuntimeCloud:Receipts:*``: see :class:`shared.provisioning.receipt_settings.ReceiptSettings` (write-once retention)
- ``RuntimeCloud:ControlPlane:*`` / ``KnowledgeHost:*`` / ``DeliveryHost:*``: the neighbours, not
  configured by default; see :mod:`shared.platform.neighbours.settings`
- ``RuntimeCloud:Durable:HistoryRetentionDays``: ``30``; ``PurgeSchedule``: ``0 0 5 * * *``
- Every ``...Schedule`` is a 6-field NCRONTAB expression (seconds first), checked
  when the settings are read; a timer declares it with :func:`setting_binding`
  (a ``%...%`` reference, see :mod:`shared.platform.timer_schedules`)
- ``OrleansMessaging:ServiceName``: ``runtime-cloud``
- ``AzureWebJobsStorage``: connection string (local) or the identity-based
  settings ``AzureWebJobsStorage__accountName`` / ``__blobServiceUri`` /
  ``__queueServiceUri`` / ``__tableServiceUri`` / ``__endpointSuffix`` /
  ``__credential`` / ``__clientId`` (Azure, with a managed identity); see
  :mod:`shared.platform.storage.connection`

An invalid setting stops the host at start with :class:`InvalidSettings`, whose
message names the setting the way an operator writes it.
"""

from __future__ import annotations

import functools
from typing import Any

from pydantic import BaseModel, Field, ValidationError, ValidationInfo, field_validator, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, SettingsConfigDict

from shared.autoscaling.settings import AutoscalingSettings
from shared.backup.settings import BackupSettings
from shared.capacity.settings import CapacitySettings
from shared.gitops.settings import GitOpsSettings
from shared.iac.settings import IaCSettings
from shared.inventory.settings import InventorySettings
from shared.platform.errors import InvalidSettings
from shared.platform.host_settings import (
    AuthSettings,
    ConfigPlatformSettings,
    DurableSection,
    HealthSettings,
    HostSettings,
    MessagingSection,
    OutboxSettings,
    Topology,
)
from shared.platform.neighbours.settings import ControlPlaneSettings, DeliveryHostSettings, KnowledgeHostSettings
from shared.platform.settings_section import Section
from shared.platform.storage.connection import read_connection
from shared.platform.targets import ProvisioningTarget, customer_targets_unnamed, find_target
from shared.platform.timer_schedules import binding_value
from shared.platform.uniqueness import repeated
from shared.policy.settings import PolicySettings
from shared.provisioning.receipt_settings import ReceiptSettings
from shared.provisioning.settings import EnvironmentsSettings, ProvisioningSettings


class RuntimeCloudSection(Section):
    host: HostSettings = Field(default_factory=HostSettings, alias="Host")
    topology: Topology = Field(default=Topology.SAAS_DEFAULT, alias="Topology")
    iac: IaCSettings = Field(default_factory=IaCSettings, alias="IaC")
    targets: list[ProvisioningTarget] = Field(default_factory=list, alias="Targets")
    auth: AuthSettings = Field(default_factory=AuthSettings, alias="Auth")
    config_platform: ConfigPlatformSettings = Field(default_factory=ConfigPlatformSettings, alias="ConfigPlatform")
    health: HealthSettings = Field(default_factory=HealthSettings, alias="Health")
    capacity: CapacitySettings = Field(default_factory=CapacitySettings, alias="Capacity")
    autoscaling: AutoscalingSettings = Field(default_factory=AutoscalingSettings, alias="Autoscaling")
    provisioning: ProvisioningSettings = Field(default_factory=ProvisioningSettings, alias="Provisioning")
    environments: EnvironmentsSettings = Field(default_factory=EnvironmentsSettings, alias="Environments")
    inventory: InventorySettings = Field(default_factory=InventorySettings, alias="Inventory")
    policy: PolicySettings = Field(default_factory=PolicySettings, alias="Policy")
    gitops: GitOpsSettings = Field(default_factory=GitOpsSettings, alias="GitOps")
    outbox: OutboxSettings = Field(default_factory=OutboxSettings, alias="Outbox")
    durable: DurableSection = Field(default_factory=DurableSection, alias="Durable")
    backup: BackupSettings = Field(default_factory=BackupSettings, alias="Backup")
    receipts: ReceiptSettings = Field(default_factory=ReceiptSettings, alias="Receipts")
    control_plane: ControlPlaneSettings = Field(default_factory=ControlPlaneSettings, alias="ControlPlane")
    knowledge_host: KnowledgeHostSettings = Field(default_factory=KnowledgeHostSettings, alias="KnowledgeHost")
    delivery_host: DeliveryHostSettings = Field(default_factory=DeliveryHostSettings, alias="DeliveryHost")

    @field_validator("targets")
    @classmethod
    def _unique_target_ids(cls, targets: list[ProvisioningTarget]) -> list[ProvisioningTarget]:
        if twice := repeated(target.id for target in targets):
            raise ValueError(f"target ids must be unique; repeated: {twice}")
        return targets

    @field_validator("targets")
    @classmethod
    def _customer_targets_name_their_tenant(
        cls, targets: list[ProvisioningTarget], info: ValidationInfo
    ) -> list[ProvisioningTarget]:
        topology = info.data.get("topology")  # declared before the targets: validated first
        if topology is not None and (problems := customer_targets_unnamed(targets, Topology(topology).value)):
            raise ValueError("; ".join(problems))
        return targets

    @model_validator(mode="after")
    def _control_plane_if_it_is_the_authority(self) -> RuntimeCloudSection:
        if self.environments.source.value == "control-plane" and not self.control_plane.configured:
            raise ValueError(
                "RuntimeCloud:Environments:Source is control-plane: set RuntimeCloud:ControlPlane:BaseUrl "
                "(app setting RuntimeCloud__ControlPlane__BaseUrl)"
            )
        return self


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
    # The store's connection (AzureWebJobsStorage...) is read by shared.platform.storage.connection, as the
    # Functions host reads it: a connection string or identity-based settings, not one string field.

    def target(self, target_id: str) -> ProvisioningTarget | None:
        return find_target(self.runtime_cloud.targets, target_id)


def _setting_name(location: tuple[Any, ...]) -> str:
    """Turn a validation error location into the name an operator writes."""
    parts = [str(part) for part in location]
    if parts and parts[0] in Settings.model_fields:
        parts[0] = Settings.model_fields[parts[0]].alias or parts[0]
    return ":".join(parts)


def load_settings() -> Settings:
    """Read and validate settings; raise :class:`InvalidSettings` naming what is wrong."""
    try:
        settings = Settings()
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
    """The process's settings, read once (none of them is reloadable).

    Called when something runs, never when a module is imported: importing the triggers, the
    orchestrations and ``shared`` reads no setting (tests/test_import_reads_no_settings.py), so a
    test may set the environment after importing them."""
    return load_settings()


def declared_default(setting: str) -> Any:
    """The default the settings model declares for ``setting`` (``RuntimeCloud:Inventory:ScanSchedule``),
    found by the aliases of its sections; reads no setting. An unknown name raises ``KeyError``."""
    model: type[BaseModel] = Settings
    *sections, name = setting.split(":")
    for section in sections:
        annotation = _field(model, section).annotation
        if not (isinstance(annotation, type) and issubclass(annotation, BaseModel)):
            raise KeyError(f"{section} is a setting, not a section")
        model = annotation
    field = _field(model, name)
    if field.is_required():
        raise KeyError(f"{setting} has no default")
    return field.get_default(call_default_factory=True)


def _field(model: type[BaseModel], alias: str) -> FieldInfo:
    found = next((field for field in model.model_fields.values() if field.alias == alias), None)
    if found is None:
        raise KeyError(f"{model.__name__} has no setting {alias}")
    return found


def setting_binding(setting: str) -> str:
    """What a trigger's binding declares for ``setting`` (a timer's schedule, a queue's name): a
    ``%...%`` reference when the app setting is set, else the model's default (see
    :mod:`shared.platform.timer_schedules`). Bindings are fixed at import; this reads no setting."""
    return binding_value(setting, str(declared_default(setting)))

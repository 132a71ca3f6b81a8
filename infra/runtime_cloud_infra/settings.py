"""The stack's configuration, typed and checked before any resource is declared.

Every value comes from the stack (``infra/Pulumi.<stack>.yaml``, or the
``pulumi.config`` of the specification the deployed host applies, see
``environments/factory/``); keys are in the project's namespace,
``runtime-cloud-infra:<key>``. A structured value is YAML in a stack file and a
JSON string in a specification (Pulumi hands both to the program as JSON).

Required: ``location``, ``resourceGroupName``, ``storageAccountName``,
``functionAppName``, ``keyVaultName`` (the last three are global DNS names) and
``hostSettings`` (the host's own app settings, at least its token issuer).

Defaults of the rest:

- ``hostResourceGroupName``: ``<resourceGroupName>-host``: the host's own group
  (its app and plan, identities, store, backup account and vault), where the
  runner never has a role; ``resourceGroupName`` holds the runner jobs and
  monitoring, and is the group a ``resource-group`` entry of ``runnerRoles`` names
- ``namePrefix``: ``rtcloud`` (plan, identities, monitoring resources)
- ``topology``: ``saas-default`` (``hybrid``, ``on-prem``, ``hybrid-compute``)
- ``storageSku``: ``Standard_ZRS``
- ``instanceMemoryMb``: ``2048`` (512, 2048 or 4096); ``maximumInstanceCount``: ``40`` (40 to 1000)
- ``taskHubName``: ``RuntimeCloudHub``
- ``receiptRetentionDays``: ``2557`` (seven years; never less)
- ``findingRetentionDays``: ``396`` (13 months); ``leaseRetentionDays``: ``90``
- ``softDeleteDays``: ``14``; ``versionRetentionDays``: ``30``; ``logRetentionDays``: ``90``
- ``alertEmails``: none; ``inboxLagThresholdSeconds``: ``300``;
  ``leaseDenialThreshold``: ``50`` (per 15 minutes)
- ``runnerRoles``, ``targets``, ``secrets``: none
- ``operatorPrincipalId``: none (the Entra group that may write Key Vault secrets)
- ``deliveryPrincipalId``, ``controlPlanePrincipalId``: none (the Entra object ids of DeliveryHost's
  and ControlPlaneApi's identities: each may send to its one queue of the host's store, see
  neighbours.py; without one, nothing but the host writes that queue). ``controlPlanePrincipalId``
  only with ``hostSettings``' ``RuntimeCloud__Environments__Source`` ``control-plane``: a host that
  keeps its own environments refuses every approval on the queue
- ``protect``: ``true`` (Pulumi refuses to delete the store and the vault)
- ``runnerJobImage``: ``ghcr.io/connectsoft/runtime-cloud-runner-job:latest`` (build it from
  ``runner_job/Dockerfile``); ``runnerJobRegistry``: none (a registry the runner identity pulls
  from); ``runnerJobTimeoutSeconds``: ``14400``; ``runnerJobMaxExecutions``: ``10``;
  ``runnerJobCpu``: ``1.0``; ``runnerJobMemory``: ``2Gi``; ``runnerJobPollingIntervalSeconds``: ``5``;
  ``runnerJobWarmReplicas``: ``0`` (runner_job_settings.py: what each costs, and the timeout's
  check against the handover's wait)

Nothing here may hold a secret: a value that looks like one is refused, naming
the key and never quoting the value.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import pulumi

from runtime_cloud_infra import host_settings
from runtime_cloud_infra.config_reader import Reader, StackConfigError
from runtime_cloud_infra.runner_job_settings import RunnerJobSettings, runner_job_settings
from runtime_cloud_infra.runner_roles import RESOURCE_GROUP_SCOPE, RunnerRole, runner_roles

__all__ = ["PROJECT", "RESOURCE_GROUP_SCOPE", "RunnerRole", "StackConfigError", "StackSettings", "load"]

PROJECT = "runtime-cloud-infra"
# The namespace the host's Pulumi runner writes its own keys into (shared/iac/pulumi/workspace.py).
RUNNER_NAMESPACE = "runtime-cloud"
TOPOLOGIES = ("saas-default", "hybrid", "on-prem", "hybrid-compute")
INSTANCE_MEMORY_MB = (512, 2048, 4096)
FLEX_MIN_INSTANCES, FLEX_MAX_INSTANCES = 40, 1000  # Flex Consumption's maximumInstanceCount range
STORAGE_SKUS = ("Standard_LRS", "Standard_ZRS", "Standard_GRS", "Standard_GZRS", "Standard_RAGRS", "Standard_RAGZRS")
SEVEN_YEARS_DAYS = 7 * 365 + 2  # two leap days in any seven years
MAX_IMMUTABILITY_DAYS = 146_000  # Azure's limit for a time-based retention period

_STORAGE_ACCOUNT = re.compile(r"[a-z0-9]{3,24}")
_KEY_VAULT = re.compile(r"[A-Za-z][A-Za-z0-9-]{1,22}[A-Za-z0-9]")
_RESOURCE_GROUP = re.compile(r"[-\w._()]{0,89}[-\w_()]")
_FUNCTION_APP = re.compile(r"[a-z0-9][a-z0-9-]{0,58}[a-z0-9]")
_PREFIX = re.compile(r"[a-z][a-z0-9-]{1,14}")
_SECRET_NAME = re.compile(r"[A-Za-z0-9-]{1,127}")
# The host setting that makes ControlPlaneApi the environments' authority, and its value (docs/settings.md).
CONTROL_PLANE_AUTHORITY = ("RuntimeCloud__Environments__Source", "control-plane")
_GUID = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")
_EMAIL = re.compile(r"[^@\s]+@[^@\s]+\.[^@\s]+")


@dataclass(frozen=True)
class SecretEntry:
    """A secret the vault holds. Only its name is known here; operators set the value."""

    name: str
    rotation_days: int
    purpose: str


@dataclass(frozen=True)
class Retention:
    receipt_days: int
    finding_days: int
    lease_days: int
    soft_delete_days: int
    version_days: int
    log_days: int


@dataclass(frozen=True)
class Alerting:
    emails: tuple[str, ...]
    inbox_lag_seconds: int
    lease_denials: int


@dataclass(frozen=True)
class StackSettings:
    stack: str
    location: str
    resource_group_name: str
    host_resource_group_name: str
    storage_account_name: str
    function_app_name: str
    key_vault_name: str
    name_prefix: str
    topology: str
    storage_sku: str
    instance_memory_mb: int
    maximum_instance_count: int
    task_hub_name: str
    retention: Retention
    alerting: Alerting
    runner_roles: tuple[RunnerRole, ...]
    targets: tuple[Mapping[str, Any], ...]
    secrets: tuple[SecretEntry, ...]
    host_settings: Mapping[str, str]
    operator_principal_id: str | None
    delivery_principal_id: str | None
    control_plane_principal_id: str | None
    protect: bool
    tags: Mapping[str, str]
    runner_job: RunnerJobSettings

    def name(self, kind: str) -> str:
        """A resource name of this stack, e.g. ``rtcloud-dev-plan`` (lower case, letters, digits, hyphens)."""
        stack = re.sub(r"[^a-z0-9-]+", "-", self.stack.lower()).strip("-")
        return f"{self.name_prefix}-{stack}-{kind}"


def load(stack: str | None = None) -> StackSettings:
    """Read and check the stack's configuration."""
    reader = Reader(pulumi.Config(PROJECT))
    stack_name = stack or pulumi.get_stack()
    secrets = _secrets(reader)
    resource_group = _resource_group(reader)
    host = _host_settings(reader)
    return StackSettings(
        stack=stack_name,
        location=reader.text("location"),
        resource_group_name=resource_group,
        host_resource_group_name=_host_resource_group(reader, resource_group),
        storage_account_name=_matching(
            reader, "storageAccountName", _STORAGE_ACCOUNT, "3 to 24 lower-case letters and digits"
        ),
        function_app_name=_matching(
            reader, "functionAppName", _FUNCTION_APP, "2 to 60 lower-case letters, digits and hyphens"
        ),
        key_vault_name=_matching(
            reader, "keyVaultName", _KEY_VAULT, "3 to 24 letters, digits and hyphens, starting with a letter"
        ),
        name_prefix=_matching(
            reader, "namePrefix", _PREFIX, "2 to 15 lower-case letters, digits and hyphens", default="rtcloud"
        ),
        topology=_one_of(reader, "topology", TOPOLOGIES, "saas-default"),
        storage_sku=_one_of(reader, "storageSku", STORAGE_SKUS, "Standard_ZRS"),
        instance_memory_mb=_instance_memory(reader),
        # Flex Consumption's lowest maximum is 40: a smaller value fails the first deploy.
        maximum_instance_count=reader.integer("maximumInstanceCount", 40, FLEX_MIN_INSTANCES, FLEX_MAX_INSTANCES),
        task_hub_name=_matching(
            reader,
            "taskHubName",
            re.compile(r"[A-Za-z][A-Za-z0-9]{2,44}"),
            "3 to 45 letters and digits, starting with a letter",
            default="RuntimeCloudHub",
        ),
        retention=_retention(reader),
        alerting=_alerting(reader),
        runner_roles=runner_roles(reader),
        targets=_targets(reader, {entry.name for entry in secrets}),
        secrets=secrets,
        host_settings=host,
        operator_principal_id=_principal_id(reader, "operatorPrincipalId"),
        delivery_principal_id=_principal_id(reader, "deliveryPrincipalId"),
        control_plane_principal_id=_control_plane_principal(reader, host),
        protect=reader.boolean("protect", True),
        tags=_tags(stack_name),
        runner_job=runner_job_settings(reader, host),
    )


def _matching(reader: Reader, key: str, pattern: re.Pattern[str], rule: str, default: str | None = None) -> str:
    value = reader.text(key, default)
    if not pattern.fullmatch(value):
        raise StackConfigError(f"{reader.key(key)}: {value!r} is not {rule}")
    return value


def _one_of(reader: Reader, key: str, allowed: tuple[str, ...], default: str) -> str:
    value = reader.text(key, default)
    if value not in allowed:
        raise StackConfigError(f"{reader.key(key)} must be one of {', '.join(allowed)}, not {value!r}")
    return value


def _resource_group(reader: Reader) -> str:
    name = reader.text("resourceGroupName")
    # When the deployed host applies this program, its runner passes the target's resource group;
    # the program must not quietly build the host somewhere else.
    given = pulumi.Config(RUNNER_NAMESPACE).get("resourceGroup")
    if given and given.lower() != name.lower():
        raise StackConfigError(
            f"{reader.key('resourceGroupName')} is {name!r} but the target's resource group "
            f"({RUNNER_NAMESPACE}:resourceGroup) is {given!r}"
        )
    return name


def _host_resource_group(reader: Reader, resource_group: str) -> str:
    """The group of everything that holds or can act on the host's data: a group of its own, so that a
    runner role on ``resourceGroupName`` (self-hosting) never covers it."""
    name = _matching(
        reader,
        "hostResourceGroupName",
        _RESOURCE_GROUP,
        "1 to 90 letters, digits, '-', '_', '.', '(' or ')', not ending with '.'",
        default=f"{resource_group}-host",
    )
    if name.lower() == resource_group.lower():
        raise StackConfigError(
            f"{reader.key('hostResourceGroupName')} must differ from {reader.key('resourceGroupName')}: "
            "the runner may be given roles on the latter (self-hosting), never on the host's own group"
        )
    return name


def _instance_memory(reader: Reader) -> int:
    value = reader.integer("instanceMemoryMb", 2048, min(INSTANCE_MEMORY_MB), max(INSTANCE_MEMORY_MB))
    if value not in INSTANCE_MEMORY_MB:
        raise StackConfigError(f"{reader.key('instanceMemoryMb')} must be one of {INSTANCE_MEMORY_MB}")
    return value


def _retention(reader: Reader) -> Retention:
    return Retention(
        # Receipts are kept for the environment's lifetime plus seven years (docs/azure.md, Retention): never less.
        receipt_days=reader.integer("receiptRetentionDays", SEVEN_YEARS_DAYS, SEVEN_YEARS_DAYS, MAX_IMMUTABILITY_DAYS),
        finding_days=reader.integer("findingRetentionDays", 396, 1, 3650),
        lease_days=reader.integer("leaseRetentionDays", 90, 1, 3650),
        soft_delete_days=reader.integer("softDeleteDays", 14, 1, 365),
        version_days=reader.integer("versionRetentionDays", 30, 1, 3650),
        log_days=reader.integer("logRetentionDays", 90, 30, 730),
    )


def _alerting(reader: Reader) -> Alerting:
    emails = tuple(reader.structured("alertEmails", [], list))
    for email in emails:
        if not isinstance(email, str) or not _EMAIL.fullmatch(email):
            raise StackConfigError(f"{reader.key('alertEmails')}: {email!r} is not an e-mail address")
    return Alerting(
        emails=emails,
        inbox_lag_seconds=reader.integer("inboxLagThresholdSeconds", 300, 1, 7 * 24 * 3600),
        lease_denials=reader.integer("leaseDenialThreshold", 50, 1, 1_000_000),
    )


def _secrets(reader: Reader) -> tuple[SecretEntry, ...]:
    entries = []
    for index, entry in enumerate(reader.structured("secrets", [], list)):
        where = f"{reader.key('secrets')}[{index}]"
        if not isinstance(entry, dict) or "name" not in entry or "value" in entry:
            raise StackConfigError(f"{where} must be {{name, rotationDays, purpose}} (never a value)")
        name = str(entry["name"])
        if not _SECRET_NAME.fullmatch(name):
            raise StackConfigError(f"{where}.name {name!r} is not a Key Vault secret name")
        rotation = entry.get("rotationDays", 90)
        if not isinstance(rotation, int) or not 1 <= rotation <= 365:
            raise StackConfigError(f"{where}.rotationDays must be between 1 and 365")
        entries.append(SecretEntry(name=name, rotation_days=rotation, purpose=str(entry.get("purpose", ""))))
    if len({entry.name for entry in entries}) != len(entries):
        raise StackConfigError(f"{reader.key('secrets')}: names repeat")
    return tuple(entries)


def _targets(reader: Reader, secret_names: set[str]) -> tuple[Mapping[str, Any], ...]:
    """The host's targets (``RuntimeCloud__Targets``), with a credential's ``SecretName`` naming a vault secret."""
    targets = reader.structured("targets", [], list)
    for index, target in enumerate(targets):
        where = f"{reader.key('targets')}[{index}]"
        credential = target.get("Credential") if isinstance(target, dict) else None
        if not isinstance(credential, dict) or "Kind" not in credential:
            raise StackConfigError(f"{where} needs Credential with Kind (see docs/settings.md)")
        secret = credential.get("SecretName")
        if secret is not None and secret not in secret_names:
            raise StackConfigError(f"{where}.Credential.SecretName {secret!r} is not in {reader.key('secrets')}")
        _refuse_secret_values(where, target)
    ids = [target.get("Id") for target in targets]
    if len(set(ids)) != len(ids):
        raise StackConfigError(f"{reader.key('targets')}: Ids repeat")
    return tuple(targets)


def _host_settings(reader: Reader) -> dict[str, str]:
    raw = reader.structured("hostSettings", None, dict)
    if raw is None:
        raise StackConfigError(
            f"{reader.key('hostSettings')} is required: the host's app settings, "
            "at least RuntimeCloud__Auth__Issuer, Audience and Authority (or JwksUri)"
        )
    values = {name: _setting_text(value) for name, value in raw.items()}
    problems = host_settings.problems(values)
    if problems:
        raise StackConfigError(f"{reader.key('hostSettings')}: " + "; ".join(problems))
    return values


def _setting_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _principal_id(reader: Reader, key: str) -> str | None:
    value = reader.optional_text(key)
    if value is not None and not _GUID.fullmatch(value):
        raise StackConfigError(f"{reader.key(key)} must be an Entra object id (a GUID)")
    return value


def _control_plane_principal(reader: Reader, host: Mapping[str, str]) -> str | None:
    """ControlPlaneApi's identity, named only for a host that takes its approvals: one that keeps its own
    environments refuses every approval on the queue, so the right to send them would serve nothing."""
    principal = _principal_id(reader, "controlPlanePrincipalId")
    setting, authority = CONTROL_PLANE_AUTHORITY
    if principal is not None and host.get(setting, "local").strip().lower() != authority:
        raise StackConfigError(
            f"{reader.key('controlPlanePrincipalId')} lets ControlPlaneApi send approvals, which the host refuses "
            f"unless hostSettings' {setting} is {authority}: leave it out, or make ControlPlaneApi the authority"
        )
    return principal


def _tags(stack: str) -> dict[str, str]:
    """Tags on every resource: the stack, and the product's management tags when the host applies it."""
    tags = {"app": "runtime-cloud-host", "stack": stack}
    management = Reader(pulumi.Config(RUNNER_NAMESPACE)).structured("managementTags", {}, dict)
    tags.update({str(key): str(value) for key, value in management.items()})
    return tags


def _refuse_secret_values(where: str, document: Any) -> None:
    for text in _strings(document):
        if host_settings.looks_secret(text):
            raise StackConfigError(f"{where} holds a secret value; name it by reference (Credential.SecretName)")


def _strings(document: Any) -> list[str]:
    if isinstance(document, str):
        return [document]
    if isinstance(document, dict):
        return [text for value in document.values() for text in _strings(value)]
    if isinstance(document, list):
        return [text for value in document for text in _strings(value)]
    return []

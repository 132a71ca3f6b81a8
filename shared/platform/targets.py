"""Provisioning targets: the places this installation may change.

A target says what it is (kind), where (region) and how to reach it (endpoint),
and names its credential only by reference: an app setting that holds a
connection string, a Key Vault secret URI, or the host's managed identity.
A secret value written into a target is refused at start.

A target also says which tenants may use it (``Tenants``: absent or ``"*"``
for all, else a list). A target a tenant may not use reads to that tenant
exactly as one that is not configured (:func:`target_for`): the same answer,
naming no other tenant. In the ``hybrid`` and ``on-prem`` topologies a
customer's target (one reached with a credential other than the host's own
managed identity: the customer's) must name its tenants
(:func:`customer_targets_unnamed`).
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.platform.identifiers import is_tenant
from shared.platform.secret_values import secret_kind

ALL_TENANTS = "*"


class TargetKind(str, Enum):
    AZURE_SUBSCRIPTION = "azure-subscription"
    KUBERNETES_CLUSTER = "kubernetes-cluster"
    ON_PREM_ENDPOINT = "on-prem-endpoint"
    STORAGE_ACCOUNT = "storage-account"


class CredentialKind(str, Enum):
    MANAGED_IDENTITY = "managed-identity"
    APP_SETTING = "app-setting"
    KEY_VAULT = "key-vault"


class CredentialReference(BaseModel):
    """Where a target's credential lives; never the credential itself."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    kind: CredentialKind = Field(alias="Kind")
    name: str | None = Field(default=None, alias="Name", description="app setting name")
    uri: str | None = Field(default=None, alias="Uri", description="Key Vault secret URI")
    client_id: str | None = Field(default=None, alias="ClientId", description="user-assigned identity")
    # In Azure the app does not carry the runner identity (ClientId): it reads targets as the observer.
    observer_client_id: str | None = Field(
        default=None, alias="ObserverClientId", description="user-assigned identity that reads (inventory)"
    )

    @model_validator(mode="after")
    def _reference_is_complete(self) -> CredentialReference:
        if self.kind is CredentialKind.APP_SETTING and not self.name:
            raise ValueError("an app-setting credential needs Name (the app setting that holds it)")
        if self.kind is CredentialKind.KEY_VAULT and not (self.uri or "").startswith("https://"):
            raise ValueError("a key-vault credential needs Uri, the secret's https:// URI")
        return self


class ProvisioningTarget(BaseModel):
    """One configured target (an entry of ``RuntimeCloud:Targets``)."""

    model_config = ConfigDict(populate_by_name=True, frozen=True, extra="forbid")

    id: str = Field(alias="Id", pattern=r"^[a-z0-9][a-z0-9-]{0,62}$")
    kind: TargetKind = Field(alias="Kind")
    region: str = Field(alias="Region", min_length=1)
    endpoint: str | None = Field(
        default=None,
        alias="Endpoint",
        description="ARM endpoint, cluster API server, on-prem URL or storage blob endpoint",
    )
    subscription_id: str | None = Field(default=None, alias="SubscriptionId")
    resource_group: str | None = Field(default=None, alias="ResourceGroup")
    credential: CredentialReference = Field(alias="Credential")
    description: str = Field(default="", alias="Description")
    # Who may declare environments here: None (``"*"`` or absent) for every tenant, else these tenants.
    tenants: tuple[str, ...] | None = Field(default=None, alias="Tenants")

    @field_validator("tenants", mode="before")
    @classmethod
    def _tenants(cls, value: Any) -> Any:
        if value is None or value == ALL_TENANTS:
            return None
        if isinstance(value, str) or not isinstance(value, list | tuple) or not value:
            raise ValueError('Tenants is "*" (every tenant) or a non-empty list of tenant ids')
        if bad := [tenant for tenant in value if not is_tenant(tenant)]:
            raise ValueError(f"Tenants holds values that are not tenant ids: {bad}")
        return tuple(dict.fromkeys(value))

    def allows(self, tenant: str) -> bool:
        """May ``tenant`` declare environments on this target?"""
        return self.tenants is None or tenant in self.tenants

    @model_validator(mode="before")
    @classmethod
    def _no_inline_secrets(cls, data: Any) -> Any:
        if isinstance(data, dict):
            for key, value in data.items():
                if isinstance(value, str) and secret_kind(value):
                    raise ValueError(f"{key} carries a secret value; reference it through Credential instead")
        return data

    @field_validator("endpoint")
    @classmethod
    def _endpoint_is_url(cls, endpoint: str | None) -> str | None:
        if endpoint is not None and not re.match(r"^https?://", endpoint):
            raise ValueError("Endpoint must be an http(s) URL")
        return endpoint

    @model_validator(mode="after")
    def _kind_has_what_it_needs(self) -> ProvisioningTarget:
        if self.kind is TargetKind.AZURE_SUBSCRIPTION and not self.subscription_id:
            raise ValueError("an azure-subscription target needs SubscriptionId")
        if self.kind in (TargetKind.KUBERNETES_CLUSTER, TargetKind.ON_PREM_ENDPOINT) and not self.endpoint:
            raise ValueError(f"a {self.kind.value} target needs Endpoint")
        if (
            self.kind is TargetKind.STORAGE_ACCOUNT
            and not self.endpoint
            and self.credential.kind is not CredentialKind.APP_SETTING
        ):
            raise ValueError("a storage-account target needs Endpoint, or a connection string by app setting")
        return self

    def public_view(self) -> dict[str, Any]:
        """What callers of ``/meta/targets`` see: the reference kind, never its location (nor who else may use it)."""
        return {
            "id": self.id,
            "kind": self.kind.value,
            "region": self.region,
            "endpoint": self.endpoint,
            "subscription_id": self.subscription_id,
            "resource_group": self.resource_group,
            "credential": self.credential.kind.value,
            "description": self.description,
        }


def find_target(targets: Sequence[ProvisioningTarget], target_id: str) -> ProvisioningTarget | None:
    """The configured target with this id (``RuntimeCloud:Targets``), or None when none is.

    Whatever acts for a tenant resolves targets with :func:`target_for` instead."""
    return next((target for target in targets if target.id == target_id), None)


def target_for(targets: Sequence[ProvisioningTarget], target_id: str, tenant: str) -> ProvisioningTarget | None:
    """The configured target with this id that ``tenant`` may use; None when there is none or it is
    reserved for other tenants (callers answer both alike, so no tenant learns of another's target)."""
    target = find_target(targets, target_id)
    return target if target is not None and target.allows(tenant) else None


def targets_for(targets: Sequence[ProvisioningTarget], tenant: str) -> list[ProvisioningTarget]:
    """The configured targets ``tenant`` may use, in their configured order."""
    return [target for target in targets if target.allows(tenant)]


def unknown_target_message(targets: Sequence[ProvisioningTarget], target_id: str, tenant: str) -> str:
    """The one message for a target ``tenant`` cannot use, whether unknown or reserved for others."""
    known = [target.id for target in targets_for(targets, tenant)]
    return f"unknown target {target_id!r}; configured: {known}"


def is_customer_target(target: ProvisioningTarget) -> bool:
    """Reached with a credential other than the host's own managed identity: in the ``hybrid`` and
    ``on-prem`` topologies, that is the customer's credential (from the customer's vault)."""
    return target.credential.kind is not CredentialKind.MANAGED_IDENTITY


def customer_targets_unnamed(targets: Sequence[ProvisioningTarget], topology: str) -> list[str]:
    """Problems (one per target) of customer targets that name no tenant in a ``hybrid``/``on-prem`` topology:
    with ``Tenants`` absent or ``"*"``, every tenant could act on that customer's infrastructure."""
    if topology not in ("hybrid", "on-prem"):
        return []
    return [
        f"target {target.id!r} is reached with a {target.credential.kind.value} credential, so in the {topology} "
        f"topology it is a customer's target: set its Tenants to that customer's tenant id(s)"
        for target in targets
        if is_customer_target(target) and target.tenants is None
    ]

"""Provisioning targets: the places this installation may change.

A target says what it is (kind), where (region) and how to reach it (endpoint),
and names its credential only by reference: an app setting that holds a
connection string, a Key Vault secret URI, or the host's managed identity.
A secret value written into a target is refused at start.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from enum import Enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from shared.secret_values import secret_kind


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
        """What callers of ``/meta/targets`` see: the reference kind, never its location."""
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
    """The configured target with this id (``RuntimeCloud:Targets``), or None when none is."""
    return next((target for target in targets if target.id == target_id), None)

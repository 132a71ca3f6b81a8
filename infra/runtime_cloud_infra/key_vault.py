"""The host's Key Vault: RBAC mode, purge protection, and no secret value from this program.

The vault holds the secrets the stack's ``secrets`` catalogue names (in
``infra/Pulumi.dev.yaml``: ``runtime-cloud-sql``, ``iac-runner-identity``, ``messaging-transport``). This
program never writes a value: a value written through ARM would sit in the
Pulumi state. Operators set them (``az keyvault secret set ... --expires``,
docs/azure.md, Deploying), and the host reads them by reference: a target's
``Credential.SecretName`` becomes a Key Vault secret URI or an app setting
``@Microsoft.KeyVault(VaultName=...;SecretName=...)`` resolved by the platform
with the host identity.

The vault also makes the key that encrypts the Pulumi state's secrets
(``azurekeyvault://<vault>.vault.azure.net/keys/pulumi-state``): it is created
inside the vault and never leaves it, so the state needs no passphrase.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import keyvault

from runtime_cloud_infra.settings import StackSettings

STATE_KEY = "pulumi-state"
SOFT_DELETE_DAYS = 90  # the most Key Vault allows; with purge protection nobody can shorten it


@dataclass(frozen=True)
class Vault:
    vault: keyvault.Vault
    state_key: keyvault.Key


def vault_uri(settings: StackSettings) -> str:
    """The vault's URI, as the host's secret references spell it (``https://<name>.vault.azure.net``)."""
    return f"https://{settings.key_vault_name}.vault.azure.net"


def host_vault(settings: StackSettings, resource_group: pulumi.Input[str], tenant_id: pulumi.Input[str]) -> Vault:
    vault = keyvault.Vault(
        "host-vault",
        vault_name=settings.key_vault_name,
        resource_group_name=resource_group,
        location=settings.location,
        properties={
            "tenant_id": tenant_id,
            "sku": {"family": "A", "name": "standard"},
            "enable_rbac_authorization": True,  # no access policies: Azure RBAC decides, per secret if need be
            "enable_purge_protection": True,
            "enable_soft_delete": True,
            "soft_delete_retention_in_days": SOFT_DELETE_DAYS,
            "enabled_for_deployment": False,
            "enabled_for_disk_encryption": False,
            "enabled_for_template_deployment": False,
        },
        tags=settings.tags,
        opts=pulumi.ResourceOptions(protect=settings.protect),
    )
    state_key = keyvault.Key(
        "pulumi-state-key",
        vault_name=vault.name,
        resource_group_name=resource_group,
        key_name=STATE_KEY,
        properties={
            "kty": "RSA",
            "key_size": 3072,
            "key_ops": ["encrypt", "decrypt", "wrapKey", "unwrapKey"],
            # A new key version yearly; Pulumi's provider reads whichever version encrypted a value.
            "rotation_policy": {
                "attributes": {"expiry_time": "P2Y"},
                "lifetime_actions": [{"action": {"type": "rotate"}, "trigger": {"time_after_create": "P1Y"}}],
            },
        },
        tags=settings.tags,
    )
    return Vault(vault=vault, state_key=state_key)

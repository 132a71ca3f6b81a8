"""App settings that hold secrets, read in one place: an unresolved Key Vault reference is no value.

In Azure an app setting may read ``@Microsoft.KeyVault(SecretUri=...)`` (or
``VaultName=...;SecretName=...``) and the platform puts the secret's value in
its place. When it cannot (the identity lacks access, the secret or version is
missing, the vault is unreachable), the process sees the reference text itself
as the setting's value. That text is public (it is in the deployment), so used
as a webhook key or a connection string it would be a known secret, or a
confusing failure. Every setting that carries a secret is read here: such a
value counts as unset, and :attr:`SecretSetting.problem` says why, naming the
setting, never the value.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

KEY_VAULT_REFERENCE_PREFIX = "@Microsoft.KeyVault("


def is_unresolved_reference(value: str) -> bool:
    """Does ``value`` still read as an App Service Key Vault reference (any case, leading blanks)?"""
    return value.lstrip().lower().startswith(KEY_VAULT_REFERENCE_PREFIX.lower())


@dataclass(frozen=True)
class SecretSetting:
    """An app setting that holds a secret: its usable ``value`` (None: unset, empty or unresolved)."""

    name: str
    value: str | None
    unresolved: bool = False  # it held a Key Vault reference the platform did not resolve

    @property
    def problem(self) -> str | None:
        """Why there is no value (naming the setting only), or None when there is one."""
        if self.unresolved:
            return (
                f"app setting {self.name} holds a Key Vault reference the platform did not resolve "
                "(check the identity's access to the vault and the secret's name); treated as unset"
            )
        return None if self.value else f"app setting {self.name} is not set"


def read_secret_setting(name: str, environ: Mapping[str, str] | None = None) -> SecretSetting:
    """The app setting ``name`` as a secret: an unresolved Key Vault reference reads as unset."""
    value = (os.environ if environ is None else environ).get(name)
    if value and is_unresolved_reference(value):
        return SecretSetting(name, None, unresolved=True)
    return SecretSetting(name, value or None)

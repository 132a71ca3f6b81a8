"""Resolving configuration and secret references at apply time.

Configuration comes from the Config Platform (``RuntimeCloud:ConfigPlatform:Url``)
and *degrades*: when the platform is not configured or does not answer, the
run goes on and its receipt lists the references that stayed unresolved.
Secrets come from Key Vault and *fail fast*: an unresolvable secret reference
fails the run. Values are handed to the runner only; they are never logged
or written into receipts.

Locally, ``RuntimeCloud:Secrets:LocalValues`` (a JSON object of secret URI to
value) stands in for Key Vault.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING
from urllib.parse import quote

import requests

from shared.desired_state.api import ConfigReference, SecretReference
from shared.iac.api import SecretUnresolvable as SecretUnresolvable  # raised here; a runner failure kind
from shared.platform.credentials import azure_credential

if TYPE_CHECKING:
    from azure.keyvault.secrets import SecretClient


@dataclass
class ResolvedConfiguration:
    values: dict[str, str] = field(default_factory=dict)
    resolved: list[str] = field(default_factory=list)
    unresolved: list[str] = field(default_factory=list)
    note: str = ""


class ConfigPlatformClient:
    """``GET {url}/v1/keys/{key}?environment={environment}`` answering ``{"value": "..."}``."""

    def __init__(self, base_url: str | None, timeout_seconds: float = 5.0) -> None:
        self._base_url = (base_url or "").rstrip("/")
        self._timeout = timeout_seconds

    @property
    def configured(self) -> bool:
        return bool(self._base_url)

    def value(self, key: str, environment: str) -> str | None:
        response = requests.get(
            f"{self._base_url}/v1/keys/{quote(key, safe='')}",
            params={"environment": environment},
            timeout=self._timeout,
        )
        if response.status_code == 404:
            return None
        response.raise_for_status()
        value = response.json().get("value")
        return None if value is None else str(value)


def resolve_configuration(
    references: list[ConfigReference], environment: str, client: ConfigPlatformClient
) -> ResolvedConfiguration:
    result = ResolvedConfiguration()
    if not references:
        return result
    if not client.configured:
        result.unresolved = [ref.name for ref in references]
        result.note = "the Config Platform is not configured"
        return result
    for ref in references:
        try:
            value = client.value(ref.key, environment)
        except requests.RequestException as error:
            result.unresolved.append(ref.name)
            result.note = f"the Config Platform did not answer: {type(error).__name__}"
            continue
        if value is None:
            result.unresolved.append(ref.name)
        else:
            result.values[ref.name] = value
            result.resolved.append(ref.name)
    return result


def resolve_secrets(references: list[SecretReference]) -> dict[str, str]:
    """Every secret's value, or :class:`SecretUnresolvable` naming the first that fails."""
    local = os.environ.get("RuntimeCloud__Secrets__LocalValues")
    values: dict[str, str] = {}
    for ref in references:
        values[ref.name] = _local_secret(local, ref) if local is not None else _key_vault_secret(ref)
    return values


def _local_secret(local_values: str, ref: SecretReference) -> str:
    try:
        value = json.loads(local_values or "{}").get(ref.uri)
    except json.JSONDecodeError as error:
        raise SecretUnresolvable("RuntimeCloud:Secrets:LocalValues is not a JSON object") from error
    if value is None:
        raise SecretUnresolvable(f"secret {ref.name} ({ref.uri}) cannot be resolved")
    return str(value)


def key_vault_client(vault_url: str) -> SecretClient:
    """A Key Vault client with the process's credential (its tokens are reused across secrets)."""
    from azure.keyvault.secrets import SecretClient

    return SecretClient(vault_url, azure_credential())


def _key_vault_secret(ref: SecretReference) -> str:
    vault_url, _, rest = ref.uri.partition("/secrets/")
    name, _, version = rest.partition("/")
    try:
        secret = key_vault_client(vault_url).get_secret(name, version or None)
    except Exception as error:  # noqa: BLE001 - Key Vault, credential or URL: one answer, no detail
        raise SecretUnresolvable(f"secret {ref.name} ({ref.uri}) cannot be resolved: {type(error).__name__}") from None
    if secret.value is None:
        raise SecretUnresolvable(f"secret {ref.name} ({ref.uri}) has no value")
    return secret.value

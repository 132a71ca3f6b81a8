"""Reaching a provisioning target: credentials resolved from their references.

The reference is resolved at the moment of use, so rotating a secret needs no
restart. Key Vault references are resolved by the host platform (app settings
with ``@Microsoft.KeyVault(...)``), so here they read like app settings.
"""

from __future__ import annotations

import re
import time
from dataclasses import dataclass
from typing import Any

import requests
from azure.core.credentials import TokenCredential
from azure.core.exceptions import AzureError
from azure.data.tables import TableServiceClient
from azure.storage.blob import BlobServiceClient
from azure.storage.queue import QueueServiceClient

from shared.platform.credentials import target_identity
from shared.platform.errors import InvalidSettings
from shared.platform.secret_settings import read_secret_setting
from shared.platform.storage.clients import fail_fast_options, guarded
from shared.platform.targets import CredentialKind, ProvisioningTarget, TargetKind


@dataclass(frozen=True)
class ProbeResult:
    reachable: bool
    latency_ms: float
    detail: str


def storage_connection_string(target: ProvisioningTarget) -> str | None:
    """The connection string an app-setting credential points at, if that is the kind."""
    if target.credential.kind is not CredentialKind.APP_SETTING:
        return None
    setting = read_secret_setting(target.credential.name or "")
    if setting.value is None:  # unset, or a Key Vault reference left unresolved: never used as the credential
        raise InvalidSettings(f"target {target.id} (its credential): {setting.problem}")
    return setting.value


def target_blob_service(target: ProvisioningTarget, **options: Any) -> BlobServiceClient:
    connection_string = storage_connection_string(target)
    if connection_string:
        return BlobServiceClient.from_connection_string(connection_string, **options)
    return BlobServiceClient(target.endpoint or "", credential=_identity(target), **options)


def target_queue_service(target: ProvisioningTarget, **options: Any) -> QueueServiceClient:
    connection_string = storage_connection_string(target)
    if connection_string:
        return QueueServiceClient.from_connection_string(connection_string, **options)
    return QueueServiceClient(_sibling_endpoint(target, "queue"), credential=_identity(target), **options)


def target_table_service(target: ProvisioningTarget, **options: Any) -> TableServiceClient:
    """Table clients held to Azure's entity limits, like the host's own (a target is Azurite in tests)."""
    options = guarded(options)
    connection_string = storage_connection_string(target)
    if connection_string:
        return TableServiceClient.from_connection_string(connection_string, **options)
    return TableServiceClient(_sibling_endpoint(target, "table"), credential=_identity(target), **options)


def _identity(target: ProvisioningTarget) -> TokenCredential:
    """The process's credential for the target (the runner's in the job, the observer's in the app)."""
    return target_identity(target.credential.client_id, target.credential.observer_client_id)


def _sibling_endpoint(target: ProvisioningTarget, service: str) -> str:
    """The queue or table endpoint of the account whose blob endpoint the target names.

    Targets reached by identity name only the blob endpoint
    (``https://<account>.blob.<suffix>``, whatever the cloud's suffix); the
    account's other services live on sibling host names.
    """
    endpoint = target.endpoint or ""
    sibling = re.sub(r"^(https?://[^./]+)\.blob\.", rf"\1.{service}.", endpoint, count=1)
    if sibling == endpoint:
        raise InvalidSettings(
            f"target {target.id}: cannot derive the {service} endpoint from Endpoint {endpoint!r}; "
            "use a connection string by app setting"
        )
    return sibling


def probe_target(target: ProvisioningTarget, timeout_seconds: float) -> ProbeResult:
    started = time.perf_counter()
    try:
        detail = _probe(target, timeout_seconds)
        reachable = True
    except (AzureError, requests.RequestException, InvalidSettings, OSError) as error:
        detail = f"{type(error).__name__}: {str(error).splitlines()[0] if str(error) else ''}"
        reachable = False
    return ProbeResult(reachable, round((time.perf_counter() - started) * 1000, 1), detail)


def _probe(target: ProvisioningTarget, timeout_seconds: float) -> str:
    if target.kind is TargetKind.STORAGE_ACCOUNT:
        with target_blob_service(target, **fail_fast_options(timeout_seconds)) as service:
            service.get_service_properties(timeout=int(max(1, timeout_seconds)))
        return "storage account answered"
    url = target.endpoint or "https://management.azure.com"
    response = requests.get(url, timeout=timeout_seconds)
    # Any HTTP answer (even 401 without credentials) proves the API is reachable.
    return f"API answered HTTP {response.status_code}"

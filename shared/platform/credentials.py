"""One Azure credential per identity, per process.

Every client that authenticates with Entra ID (the host's store, targets
reached by identity, Key Vault, Azure Resource Manager) takes its credential
from here. A credential caches its tokens, so a new one per call would fetch a
new token from the managed identity endpoint every time (slow, and throttled
under load); one per identity reuses them until they near expiry.

Which identity: the host's user-assigned identity, named by
``AzureWebJobsStorage__clientId`` (the Flex Consumption templates' setting) or
else ``AZURE_CLIENT_ID``; a target may name another by its ``ClientId`` (the
runner's, which only the runner job carries) and one that reads it by its
``ObserverClientId`` (the observer's, which the app carries): see
:func:`target_identity`. With
``AzureWebJobsStorage__credential=managedidentity`` only the managed identity
is tried (``ManagedIdentityCredential``), as the Functions host does for its
own connections; otherwise ``DefaultAzureCredential`` (which, off Azure, also
accepts a developer's Azure CLI login).

Building a credential does not contact Entra ID; the first token request does.
"""

from __future__ import annotations

import functools
import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from azure.core.credentials import TokenCredential

HOST_CONNECTION = "AzureWebJobsStorage"
# ``{connection}__credential`` naming the managed identity as the only credential to try.
MANAGED_IDENTITY = "managedidentity"


def azure_credential(client_id: str | None = None) -> TokenCredential:
    """The process's credential for the host's identity, or for the user-assigned identity ``client_id``."""
    return _credential(client_id or host_client_id(), _managed_identity_only())


def target_identity(client_id: str | None, observer_client_id: str | None) -> TokenCredential:
    """The credential a process reaches a target with: the target's ``ClientId`` (the runner identity)
    in the process that acts as it (the runner job: ``AZURE_CLIENT_ID``), else its ``ObserverClientId``
    when it names one (the app, which carries the observer identity and never the runner's)."""
    acting = (_setting("AZURE_CLIENT_ID") or "").lower()
    if observer_client_id and not (client_id and client_id.lower() == acting):
        return azure_credential(observer_client_id)
    return azure_credential(client_id)


def host_client_id() -> str | None:
    return _setting(f"{HOST_CONNECTION}__clientId") or _setting("AZURE_CLIENT_ID")


@functools.cache
def _credential(client_id: str | None, managed_identity_only: bool) -> TokenCredential:
    from azure.identity import DefaultAzureCredential, ManagedIdentityCredential

    if managed_identity_only:
        return ManagedIdentityCredential(client_id=client_id)
    return DefaultAzureCredential(managed_identity_client_id=client_id)


def _managed_identity_only() -> bool:
    return (_setting(f"{HOST_CONNECTION}__credential") or "").strip().lower() == MANAGED_IDENTITY


def _setting(name: str) -> str | None:
    """An app setting, matched case-insensitively as the Functions host matches them."""
    wanted = name.lower()
    return next((value for key, value in os.environ.items() if key.lower() == wanted and value), None)


def forget_credentials() -> None:
    """Drop the cached credentials (tests that change the identity settings call this)."""
    _credential.cache_clear()

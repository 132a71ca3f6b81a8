"""Where a storage connection points, read from app settings the way the Functions host reads them.

A connection named ``AzureWebJobsStorage`` (the host's store) is either

- a **connection string** in the app setting ``AzureWebJobsStorage`` (locally:
  Azurite), or
- **identity-based settings** under the prefix ``AzureWebJobsStorage__``, as
  the Flex Consumption templates write them:

  ============================== ==============================================
  ``accountName``                 the account; its endpoints are
                                  ``https://{accountName}.{service}.{endpointSuffix}``
  ``blobServiceUri``,             a service's endpoint; **wins over**
  ``queueServiceUri``,            ``accountName`` (sovereign clouds, custom DNS)
  ``tableServiceUri``
  ``endpointSuffix``              default ``core.windows.net``; e.g.
                                  ``core.chinacloudapi.cn``, ``core.usgovcloudapi.net``
  ``credential``                  ``managedidentity`` (only a managed identity),
                                  or unset (``DefaultAzureCredential``)
  ``clientId``                    the user-assigned identity's client id
  ============================== ==============================================

These are the rules of the Functions storage extensions (an explicit service URI
over ``accountName``; ``endpointSuffix`` with ``accountName``), so the app's own
clients reach exactly the endpoints the host's triggers and the Durable
extension reach. Names are matched case-insensitively, as the host's
configuration matches them. No key is ever read from an identity-based
connection: there is none.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from dataclasses import dataclass

from shared.platform.credentials import MANAGED_IDENTITY
from shared.platform.errors import InvalidSettings
from shared.platform.secret_settings import is_unresolved_reference

SERVICES: tuple[str, ...] = ("blob", "queue", "table")
DEFAULT_ENDPOINT_SUFFIX = "core.windows.net"

_ACCOUNT_NAME = re.compile(r"[a-z0-9]{3,24}")
_SUFFIX = re.compile(r"[a-z0-9-]+(\.[a-z0-9-]+)+")


@dataclass(frozen=True)
class IdentityConnection:
    """An identity-based connection: one endpoint per service, and whose identity to use."""

    endpoints: dict[str, str]
    client_id: str | None
    managed_identity_only: bool

    def endpoint(self, service: str) -> str:
        return self.endpoints[service]


@dataclass(frozen=True)
class StorageConnection:
    """A storage connection setting, read: exactly one of the two forms is set."""

    name: str
    connection_string: str | None = None
    identity: IdentityConnection | None = None


def read_connection(name: str = "AzureWebJobsStorage", environ: Mapping[str, str] | None = None) -> StorageConnection:
    """Read connection ``name``; raise :class:`InvalidSettings` naming the app setting that is missing or wrong."""
    settings = _case_insensitive(os.environ if environ is None else environ)
    exact = settings.get(name.lower())
    if exact and is_unresolved_reference(exact):  # a connection string in Key Vault the platform did not resolve
        raise InvalidSettings(
            f"{name}: holds a Key Vault reference the platform did not resolve (check the identity's access "
            "to the vault and the secret's name); treated as unset"
        )
    if exact:  # an exact match wins over a prefix match, as in the Functions host
        return StorageConnection(name, connection_string=exact)
    prefix = f"{name.lower()}__"
    section = {key[len(prefix) :]: value for key, value in settings.items() if key.startswith(prefix) and value}
    if not section:
        raise InvalidSettings(
            f"{name}: set a connection string, or the identity-based settings {name}__accountName "
            f"(or {name}__blobServiceUri, {name}__queueServiceUri and {name}__tableServiceUri) "
            f"with {name}__credential=managedidentity and {name}__clientId"
        )
    return StorageConnection(name, identity=_identity(name, section))


def _identity(name: str, section: dict[str, str]) -> IdentityConnection:
    credential = section.get("credential", "").strip().lower()
    if credential not in ("", MANAGED_IDENTITY):
        raise InvalidSettings(
            f"{name}__credential: {section['credential']!r} is not supported; use {MANAGED_IDENTITY} "
            "(or leave it unset for DefaultAzureCredential): no secret belongs in an app setting"
        )
    endpoints = {service: _endpoint(name, section, service) for service in SERVICES}
    return IdentityConnection(
        endpoints=endpoints,
        client_id=section.get("clientid") or None,
        managed_identity_only=credential == MANAGED_IDENTITY,
    )


def _endpoint(name: str, section: dict[str, str], service: str) -> str:
    setting = f"{service}ServiceUri"
    explicit = section.get(setting.lower()) or (section.get("serviceuri") if service == "blob" else None)
    if explicit:
        if not explicit.startswith("https://"):
            raise InvalidSettings(
                f"{name}__{setting}: {explicit!r} must be an https:// URI (a token is never sent over plain HTTP)"
            )
        return explicit.rstrip("/")
    account = section.get("accountname")
    if not account:
        raise InvalidSettings(f"{name}__{setting}: not set, and no {name}__accountName to derive it from")
    if not _ACCOUNT_NAME.fullmatch(account):
        raise InvalidSettings(
            f"{name}__accountName: {account!r} is not a storage account name (3 to 24 lower-case letters and digits)"
        )
    suffix = section.get("endpointsuffix") or DEFAULT_ENDPOINT_SUFFIX
    if not _SUFFIX.fullmatch(suffix):
        raise InvalidSettings(
            f"{name}__endpointSuffix: {suffix!r} is not a DNS suffix such as {DEFAULT_ENDPOINT_SUFFIX}"
        )
    return f"https://{account}.{service}.{suffix}"


def _case_insensitive(environ: Mapping[str, str]) -> dict[str, str]:
    return {key.lower(): value for key, value in environ.items()}

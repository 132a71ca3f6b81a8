"""Identity-based storage settings, as the Flex Consumption templates write them.

No network: building settings, clients and credentials contacts nobody. Where
a token is needed, the test stands in for the platform's managed-identity
endpoint (the one true edge: Entra ID is never called).
"""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from shared.inventory.observers.arm import default_client
from shared.platform.credentials import azure_credential, forget_credentials
from shared.platform.errors import InvalidSettings
from shared.platform.storage.clients import host_storage
from shared.platform.target_access import target_blob_service, target_queue_service
from shared.platform.targets import ProvisioningTarget
from shared.provisioning.configuration import key_vault_client
from shared.wiring.settings import load_settings

CLIENT_ID = "11111111-2222-3333-4444-555555555555"
FLEX = {
    "AzureWebJobsStorage__accountName": "rtcloudstore",
    "AzureWebJobsStorage__credential": "managedidentity",
    "AzureWebJobsStorage__clientId": CLIENT_ID,
    "AzureWebJobsStorage__blobServiceUri": "https://rtcloudstore.blob.core.windows.net",
    "AzureWebJobsStorage__queueServiceUri": "https://rtcloudstore.queue.core.windows.net",
    "AzureWebJobsStorage__tableServiceUri": "https://rtcloudstore.table.core.windows.net",
    "RuntimeCloud__Auth__Authority": "https://login.microsoftonline.com/contoso/v2.0",
}
CLEARED = ("AzureWebJobsStorage", "RuntimeCloud__", "AZURE_CLIENT_ID", "IDENTITY_", "MSI_", "AZURE_")


@pytest.fixture
def environment(monkeypatch: pytest.MonkeyPatch) -> Iterator[Any]:
    for key in list(__import__("os").environ):
        if key.startswith(CLEARED):
            monkeypatch.delenv(key)
    forget_credentials()

    def set_values(values: dict[str, str] = FLEX, **more: str) -> None:
        for key, value in {**values, **more}.items():
            monkeypatch.setenv(key, value)

    yield set_values
    forget_credentials()


def _target(**fields: Any) -> ProvisioningTarget:
    return ProvisioningTarget.model_validate({"Credential": {"Kind": "managed-identity"}, **fields})


def test_settings_load_and_the_store_is_built_from_the_flex_identity_settings_alone(environment):
    environment()

    load_settings()  # no AzureWebJobsStorage connection string anywhere
    clients = host_storage()

    assert clients.blobs.url == "https://rtcloudstore.blob.core.windows.net/"
    assert clients.queues.url == "https://rtcloudstore.queue.core.windows.net/"
    assert clients.tables.url == "https://rtcloudstore.table.core.windows.net"
    assert clients.account_name == "rtcloudstore"
    assert type(clients.blobs.credential).__name__ == "ManagedIdentityCredential"  # credential=managedidentity
    assert clients.blobs.credential is clients.queues.credential is clients.tables.credential


def test_one_credential_serves_the_store_targets_key_vault_and_resource_manager(environment):
    environment()
    storage_target = _target(
        Id="orders", Kind="storage-account", Region="westeurope", Endpoint="https://ordersdata.blob.core.windows.net"
    )
    subscription = _target(
        Id="sub", Kind="azure-subscription", Region="westeurope", SubscriptionId="00000000-0000-0000-0000-000000000001"
    )

    credential = host_storage().blobs.credential

    assert target_blob_service(storage_target).credential is credential
    assert target_queue_service(storage_target).credential is credential
    assert key_vault_client("https://kv-runtime.vault.azure.net")._client._config.credential is credential
    assert default_client(subscription)._config.credential is credential
    assert host_storage().tables.credential is credential  # a second build reuses it too


def test_a_target_with_its_own_identity_gets_its_own_credential_once(environment):
    environment()
    other = _target(
        Id="other",
        Kind="storage-account",
        Region="westeurope",
        Endpoint="https://otherdata.blob.core.windows.net",
        Credential={"Kind": "managed-identity", "ClientId": "99999999-0000-0000-0000-000000000000"},
    )

    first, second = target_blob_service(other).credential, target_queue_service(other).credential

    assert first is second
    assert first is not azure_credential()


def test_service_uris_win_over_the_account_name(environment):
    environment(
        {
            "AzureWebJobsStorage__accountName": "rtcloudstore",
            "AzureWebJobsStorage__blobServiceUri": "https://rtcloudgov.blob.core.usgovcloudapi.net/",
        }
    )

    clients = host_storage()

    assert clients.blobs.url == "https://rtcloudgov.blob.core.usgovcloudapi.net/"
    assert clients.queues.url == "https://rtcloudstore.queue.core.windows.net/"  # from accountName


def test_a_sovereign_cloud_endpoint_suffix_gives_that_clouds_endpoints(environment):
    environment(
        {
            "AzureWebJobsStorage__accountName": "rtcloudstore",
            "AzureWebJobsStorage__endpointSuffix": "core.chinacloudapi.cn",
            "RuntimeCloud__Auth__Authority": "https://login.chinacloudapi.cn/contoso/v2.0",
        }
    )

    load_settings()
    clients = host_storage()

    assert clients.blobs.url == "https://rtcloudstore.blob.core.chinacloudapi.cn/"
    assert clients.queues.url == "https://rtcloudstore.queue.core.chinacloudapi.cn/"
    assert clients.tables.url == "https://rtcloudstore.table.core.chinacloudapi.cn"
    arm = default_client(
        _target(
            Id="sub",
            Kind="azure-subscription",
            Region="chinaeast2",
            SubscriptionId="00000000-0000-0000-0000-000000000001",
            Endpoint="https://management.chinacloudapi.cn",
        )
    )
    assert arm._config.credential_scopes == ["https://management.chinacloudapi.cn/.default"]


@pytest.mark.parametrize(
    "values, named",
    [
        (
            {"AzureWebJobsStorage__blobServiceUri": "https://a.blob.core.windows.net"},
            "AzureWebJobsStorage__queueServiceUri",
        ),
        ({"AzureWebJobsStorage__accountName": "Not_An_Account"}, "AzureWebJobsStorage__accountName"),
        (
            {"AzureWebJobsStorage__accountName": "acct", "AzureWebJobsStorage__tableServiceUri": "http://acct.table.x"},
            "AzureWebJobsStorage__tableServiceUri",
        ),
        (
            {"AzureWebJobsStorage__accountName": "acct", "AzureWebJobsStorage__credential": "clientsecret"},
            "AzureWebJobsStorage__credential",
        ),
        ({"RuntimeCloud__Auth__Authority": "https://login.microsoftonline.com/x/v2.0"}, "AzureWebJobsStorage"),
    ],
)
def test_incomplete_identity_settings_stop_the_host_naming_the_setting(environment, values, named):
    environment({"RuntimeCloud__Auth__Authority": "https://login.microsoftonline.com/x/v2.0", **values})

    with pytest.raises(InvalidSettings, match=named):
        load_settings()


class _IdentityEndpoint(BaseHTTPRequestHandler):
    """Stands in for the Functions platform's managed-identity endpoint (IDENTITY_ENDPOINT)."""

    requests: list[dict[str, Any]] = []

    def do_GET(self) -> None:  # the http.server API
        query = {key: values[0] for key, values in parse_qs(urlparse(self.path).query).items()}
        type(self).requests.append({**query, "header": self.headers.get("X-IDENTITY-HEADER")})
        body = json.dumps(
            {
                "access_token": "stand-in-token",
                "expires_on": str(int(time.time()) + 3600),
                "resource": query.get("resource"),
                "token_type": "Bearer",
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def identity_endpoint(environment, monkeypatch: pytest.MonkeyPatch) -> Iterator[list[dict[str, Any]]]:
    server = HTTPServer(("127.0.0.1", 0), _IdentityEndpoint)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _IdentityEndpoint.requests = []
    monkeypatch.setenv("IDENTITY_ENDPOINT", f"http://127.0.0.1:{server.server_port}/msi/token")
    monkeypatch.setenv("IDENTITY_HEADER", "platform-secret")
    yield _IdentityEndpoint.requests
    server.shutdown()


def test_the_user_assigned_identity_is_asked_for_and_its_token_reused_stand_in_identity_endpoint(
    environment, identity_endpoint
):
    environment()
    credential = host_storage().blobs.credential

    first = credential.get_token("https://storage.azure.com/.default")
    again = azure_credential().get_token("https://storage.azure.com/.default")

    assert first.token == again.token == "stand-in-token"
    assert len(identity_endpoint) == 1, "the process's one credential caches its token"
    assert identity_endpoint[0]["client_id"] == CLIENT_ID
    assert identity_endpoint[0]["resource"] == "https://storage.azure.com"


def test_azure_client_id_names_the_identity_when_the_storage_settings_do_not(environment, identity_endpoint):
    environment({"AzureWebJobsStorage__accountName": "rtcloudstore", "AZURE_CLIENT_ID": CLIENT_ID})

    azure_credential().get_token("https://vault.azure.net/.default")

    assert identity_endpoint[-1]["client_id"] == CLIENT_ID

"""Issue 28: a target's Tenants, and the customer targets of hybrid and on-prem that must name theirs
(settings read as the host reads them at start: pure, no I/O)."""

from __future__ import annotations

import json
import os
from typing import Any

import pytest

from shared.platform.errors import InvalidSettings
from shared.platform.targets import target_for, targets_for, unknown_target_message
from shared.wiring.settings import load_settings

BASE = {
    "AzureWebJobsStorage": "UseDevelopmentStorage=true",
    "RuntimeCloud__Auth__LocalSigningKeyDirectory": "/tmp/keys",
}
CUSTOMER_CLUSTER = {
    "Id": "customer-cluster",
    "Kind": "kubernetes-cluster",
    "Region": "westeurope",
    "Endpoint": "https://customer-cluster.example.com",
    "Credential": {"Kind": "key-vault", "Uri": "https://vault.example.net/secrets/iac-runner-identity"},
}
PLATFORM_STORAGE = {
    "Id": "platform-storage",
    "Kind": "storage-account",
    "Region": "westeurope",
    "Endpoint": "https://platform.blob.core.windows.net",
    "Credential": {"Kind": "managed-identity"},
}


@pytest.fixture
def settings_with(monkeypatch):
    for key in list(os.environ):
        if key.startswith(("RuntimeCloud__", "AzureWebJobsStorage")):
            monkeypatch.delenv(key)

    def load(targets: list[dict[str, Any]], **values: str):
        for key, value in {**BASE, "RuntimeCloud__Targets": json.dumps(targets), **values}.items():
            monkeypatch.setenv(key, value)
        return load_settings()

    return load


def test_absent_or_star_tenants_mean_every_tenant_and_a_list_only_those(settings_with):
    targets = settings_with(
        [
            PLATFORM_STORAGE,
            {**PLATFORM_STORAGE, "Id": "shared-storage", "Tenants": "*"},
            {**PLATFORM_STORAGE, "Id": "own-storage", "Tenants": ["tenant-b", "tenant-c"]},
        ]
    ).runtime_cloud.targets

    assert [t.id for t in targets_for(targets, "tenant-a")] == ["platform-storage", "shared-storage"]
    assert [t.id for t in targets_for(targets, "tenant-b")] == ["platform-storage", "shared-storage", "own-storage"]
    assert target_for(targets, "own-storage", "tenant-a") is None
    assert target_for(targets, "own-storage", "tenant-c") is not None
    reserved, unknown = (unknown_target_message(targets, name, "tenant-a") for name in ("own-storage", "x"))
    assert reserved.replace("own-storage", "x", 1) == unknown and "tenant-b" not in reserved


def test_a_customer_target_in_hybrid_must_name_its_tenant(settings_with):
    with pytest.raises(InvalidSettings) as refused:
        settings_with([PLATFORM_STORAGE, CUSTOMER_CLUSTER], RuntimeCloud__Topology="hybrid")

    message = str(refused.value)
    assert "RuntimeCloud:Targets" in message and "customer-cluster" in message and "Tenants" in message
    assert "platform-storage" not in message  # the host's own identity reaches it: the platform's target


@pytest.mark.parametrize("tenants", ["*", None])
def test_a_customer_target_on_prem_for_every_tenant_is_refused(settings_with, tenants):
    target = {**CUSTOMER_CLUSTER, "Kind": "on-prem-endpoint"}
    if tenants is not None:
        target["Tenants"] = tenants

    with pytest.raises(InvalidSettings, match="customer-cluster"):
        settings_with([target], RuntimeCloud__Topology="on-prem")


def test_a_customer_target_naming_its_tenant_starts_and_saas_needs_no_names(settings_with):
    hybrid = settings_with([{**CUSTOMER_CLUSTER, "Tenants": ["contoso"]}], RuntimeCloud__Topology="hybrid")
    saas = settings_with([CUSTOMER_CLUSTER], RuntimeCloud__Topology="saas-default")

    assert hybrid.runtime_cloud.targets[0].tenants == ("contoso",)
    assert saas.runtime_cloud.targets[0].tenants is None


@pytest.mark.parametrize("tenants", [[], "tenant-a", ["no/slash"], 7])
def test_tenants_is_star_or_a_list_of_tenant_ids(settings_with, tenants):
    with pytest.raises(InvalidSettings, match="Tenants"):
        settings_with([{**PLATFORM_STORAGE, "Tenants": tenants}])


def test_the_environments_source_is_local_and_control_plane_needs_control_plane_api(settings_with):
    assert settings_with([]).runtime_cloud.environments.source.value == "local"
    with pytest.raises(InvalidSettings, match="RuntimeCloud:Environments:Source is control-plane"):
        settings_with([], RuntimeCloud__Environments__Source="control-plane")
    pointed = settings_with(
        [],
        RuntimeCloud__Environments__Source="control-plane",
        RuntimeCloud__ControlPlane__BaseUrl="https://control-plane.example.com/",
    )
    assert pointed.runtime_cloud.environments.source.value == "control-plane"

"""Settings are typed, validated, and name what is wrong (pure unit tests, no I/O)."""

from __future__ import annotations

import json

import pytest

from shared.desired_state.api import RunnerName
from shared.platform.errors import InvalidSettings
from shared.wiring.settings import load_settings

BASE = {
    "AzureWebJobsStorage": "UseDevelopmentStorage=true",
    "RuntimeCloud__Auth__LocalSigningKeyDirectory": "/tmp/keys",
}


@pytest.fixture
def environment(monkeypatch):
    for key in list(__import__("os").environ):
        if key.startswith(("RuntimeCloud__", "OrleansMessaging__", "AzureWebJobsStorage")):
            monkeypatch.delenv(key)

    def set_values(**values: str) -> None:
        for key, value in {**BASE, **values}.items():
            monkeypatch.setenv(key, value)

    return set_values


def test_defaults_follow_the_source_page(environment):
    environment()

    settings = load_settings()

    assert settings.runtime_cloud.host.enabled_modules == ["provisioning", "inventory", "capacity"]
    assert settings.runtime_cloud.iac.runner is RunnerName.PULUMI
    assert settings.messaging.service_name == "runtime-cloud"
    assert settings.runtime_cloud.topology.value == "saas-default"


def test_enabled_modules_accept_a_comma_list(environment):
    environment(RuntimeCloud__Host__EnabledModules="capacity , inventory")

    assert load_settings().runtime_cloud.host.enabled_modules == ["capacity", "inventory"]


def test_an_unknown_module_is_named_with_its_setting(environment):
    environment(RuntimeCloud__Host__EnabledModules="provisioning, billing")

    with pytest.raises(InvalidSettings, match=r"RuntimeCloud:Host:EnabledModules.*billing"):
        load_settings()


def test_a_missing_key_source_is_refused(environment, monkeypatch):
    environment()
    monkeypatch.delenv("RuntimeCloud__Auth__LocalSigningKeyDirectory")

    with pytest.raises(InvalidSettings, match="RuntimeCloud:Auth"):
        load_settings()


def test_missing_storage_is_refused(environment, monkeypatch):
    environment()
    monkeypatch.delenv("AzureWebJobsStorage")

    with pytest.raises(InvalidSettings, match="AzureWebJobsStorage"):
        load_settings()


@pytest.mark.parametrize(
    "target, reason",
    [
        (
            {
                "Id": "sub",
                "Kind": "azure-subscription",
                "Region": "westeurope",
                "Credential": {"Kind": "managed-identity"},
            },
            "SubscriptionId",
        ),
        (
            {
                "Id": "k8s",
                "Kind": "kubernetes-cluster",
                "Region": "westeurope",
                "Credential": {"Kind": "managed-identity"},
            },
            "Endpoint",
        ),
        (
            {
                "Id": "kv",
                "Kind": "on-prem-endpoint",
                "Region": "dc1",
                "Endpoint": "https://dc1.example",
                "Credential": {"Kind": "key-vault", "Uri": "not-a-uri"},
            },
            "Uri",
        ),
        (
            {
                "Id": "leak",
                "Kind": "storage-account",
                "Region": "local",
                "Endpoint": "DefaultEndpointsProtocol=https;AccountKey=abc",
                "Credential": {"Kind": "managed-identity"},
            },
            "secret",
        ),
        (
            {
                "Id": "Bad Id",
                "Kind": "storage-account",
                "Region": "local",
                "Endpoint": "https://a.example",
                "Credential": {"Kind": "managed-identity"},
            },
            "Id",
        ),
    ],
)
def test_targets_are_validated(environment, target, reason):
    environment(RuntimeCloud__Targets=json.dumps([target]))

    with pytest.raises(InvalidSettings, match=reason):
        load_settings()


def test_duplicate_target_ids_are_refused(environment):
    target = {
        "Id": "a",
        "Kind": "storage-account",
        "Region": "x",
        "Endpoint": "https://a.example",
        "Credential": {"Kind": "managed-identity"},
    }
    environment(RuntimeCloud__Targets=json.dumps([target, target]))

    with pytest.raises(InvalidSettings, match="unique"):
        load_settings()

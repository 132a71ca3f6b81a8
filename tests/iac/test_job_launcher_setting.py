"""``RuntimeCloud__IaC__JobLauncher=in-process`` is a local-only mode: refused at start on Azure (pure: no I/O)."""

from __future__ import annotations

import os

import pytest

from shared.iac.settings import AZURE_HOST_VARIABLES
from shared.platform.errors import InvalidSettings
from shared.wiring.settings import load_settings

BASE = {
    "AzureWebJobsStorage": "UseDevelopmentStorage=true",
    "RuntimeCloud__Auth__LocalSigningKeyDirectory": "/tmp/keys",
}
# What the Flex Consumption platform sets on an instance (values as it shows them).
FLEX = {
    "WEBSITE_SITE_NAME": "rtcloud-prod-host",
    "CONTAINER_NAME": "e7f1c0d2a9_rtcloud",
    "WEBSITE_SKU": "FlexConsumption",
}


@pytest.fixture
def environment(monkeypatch):
    for key in list(os.environ):
        if (
            key.startswith(("RuntimeCloud__", "OrleansMessaging__", "AzureWebJobsStorage"))
            or key in AZURE_HOST_VARIABLES
        ):
            monkeypatch.delenv(key)

    def set_values(**values: str) -> None:
        for key, value in {**BASE, **values}.items():
            monkeypatch.setenv(key, value)

    return set_values


def test_the_in_process_launcher_is_refused_on_flex_consumption_naming_the_setting(environment):
    environment(RuntimeCloud__IaC__JobLauncher="in-process", **FLEX)

    with pytest.raises(InvalidSettings) as refused:
        load_settings()

    message = str(refused.value)
    assert "RuntimeCloud__IaC__JobLauncher" in message and "local-only" in message
    assert "WEBSITE_SITE_NAME is set" in message


@pytest.mark.parametrize("variable", AZURE_HOST_VARIABLES)
def test_any_one_platform_variable_means_azure(environment, variable):
    environment(RuntimeCloud__IaC__JobLauncher="in-process", **{variable: "set-by-the-platform"})

    with pytest.raises(InvalidSettings, match=f"RuntimeCloud:IaC:JobLauncher.*{variable} is set"):
        load_settings()


def test_on_azure_the_queue_launcher_starts_and_locally_in_process_still_does(environment, monkeypatch):
    environment(**FLEX)
    assert load_settings().runtime_cloud.iac.job_launcher == "queue"

    for variable in FLEX:
        monkeypatch.delenv(variable)
    monkeypatch.setenv("RuntimeCloud__IaC__JobLauncher", "in-process")
    assert load_settings().runtime_cloud.iac.job_launcher == "in-process"

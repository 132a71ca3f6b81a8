"""A target that cannot be used fails fast with TargetUnreachable, never as an empty account."""

from __future__ import annotations

import time

import pytest

from devhost.azurite import TARGET_ACCOUNT, TARGET_KEY
from shared.iac.embedded import EmbeddedRunner, read_target_state
from shared.iac.model import TargetUnreachable
from shared.platform.targets import ProvisioningTarget
from tests.iac.conftest import specification
from tests.support.ports import closed_port


def closed_port_target(monkeypatch: pytest.MonkeyPatch) -> ProvisioningTarget:
    port = closed_port()  # nothing listens there, nor will
    base = f"http://127.0.0.1:{port}/{TARGET_ACCOUNT}"
    monkeypatch.setenv(
        "RuntimeCloudTarget__dead__Connection",
        (
            f"DefaultEndpointsProtocol=http;AccountName={TARGET_ACCOUNT};AccountKey={TARGET_KEY};"
            f"BlobEndpoint={base};QueueEndpoint={base};TableEndpoint={base};"
        ),
    )
    return ProvisioningTarget.model_validate(
        {
            "Id": "dead",
            "Kind": "storage-account",
            "Region": "local",
            "Endpoint": base,
            "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__dead__Connection"},
        }
    )


def test_reading_a_target_on_a_closed_port_fails_within_seconds(monkeypatch):
    target = closed_port_target(monkeypatch)
    started = time.monotonic()

    with pytest.raises(TargetUnreachable, match="target dead did not answer"):
        read_target_state(target)

    assert time.monotonic() - started < 5


def test_planning_against_a_closed_port_is_target_unreachable(monkeypatch, environment):
    target = closed_port_target(monkeypatch)
    spec = specification(environment, [{"type": "queue", "name": "orders"}], target="dead")

    with pytest.raises(TargetUnreachable):
        EmbeddedRunner().plan(spec, target)


def test_a_credential_setting_that_is_not_set_is_target_unreachable_naming_the_setting(monkeypatch):
    target = closed_port_target(monkeypatch)
    monkeypatch.delenv("RuntimeCloudTarget__dead__Connection")

    with pytest.raises(TargetUnreachable, match="RuntimeCloudTarget__dead__Connection"):
        read_target_state(target)


def test_a_target_that_refuses_the_credential_is_target_unreachable_saying_so(azurite, monkeypatch):
    wrong_key = "d3Jvbmcta2V5LXdyb25nLWtleS13cm9uZy1rZXktd3Jvbmc="
    monkeypatch.setenv(
        "RuntimeCloudTarget__dead__Connection", azurite.connection_string(TARGET_ACCOUNT).replace(TARGET_KEY, wrong_key)
    )
    target = ProvisioningTarget.model_validate(
        {
            "Id": "dead",
            "Kind": "storage-account",
            "Region": "local",
            "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__dead__Connection"},
        }
    )

    with pytest.raises(TargetUnreachable, match="refused the credential"):
        read_target_state(target)

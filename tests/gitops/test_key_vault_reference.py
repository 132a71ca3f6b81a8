"""Issue 24: an app setting that still reads ``@Microsoft.KeyVault(...)`` is a reference App Service could not
resolve (it leaves the text in place). Such a value is unset: never the webhook key nor a target's credential,
and health shows the feature unavailable with the setting named (never its value).

The host here has the installation's webhook secret and one target's credential set to such text, as a
deployment whose identity cannot read the vault would have them.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devhost.azurite import Azurite
from shared.platform.secret_settings import is_unresolved_reference, read_secret_setting
from tests.conftest import REPO, app_settings
from tests.gitops.helpers import SECRET, bind, github_push
from tests.support.host import HostProcess

UNRESOLVED = "@Microsoft.KeyVault(VaultName=rc-vault;SecretName=gitops-webhook-secret)"
VAULTED_TARGET = {
    "Id": "vaulted-storage",
    "Kind": "storage-account",
    "Region": "local",
    "Endpoint": "http://127.0.0.1:1/vaulted",
    "Credential": {"Kind": "app-setting", "Name": "RuntimeCloudTarget__vaulted__Connection"},
}


@pytest.fixture(scope="module")
def vaultless_host(azurite: Azurite, key_dir: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[HostProcess]:
    settings = app_settings(azurite, key_dir)
    targets = [*json.loads(settings["RuntimeCloud__Targets"]), VAULTED_TARGET]
    settings.update(
        {
            "RuntimeCloudGitOps__WebhookSecret": UNRESOLVED,
            "RuntimeCloud__Targets": json.dumps(targets),
            "RuntimeCloudTarget__vaulted__Connection": "@Microsoft.KeyVault(SecretUri=https://rc-vault.vault.azure.net/secrets/t)",
        }
    )
    host = HostProcess(REPO, settings, tmp_path_factory.mktemp("logs") / "vaultless-host.log").start()
    yield host
    host.stop()


def _checks(host: HostProcess, mint: Any) -> dict[str, dict[str, Any]]:
    answer = host.request("GET", "runtime-cloud/health", token=mint("tenant-a", scopes=["factory.health.read"]))
    assert answer.status_code == 200, answer.text
    return {check["name"]: check for check in answer.json()["checks"]}


def test_health_shows_the_webhooks_and_the_target_unavailable_naming_the_setting_not_the_value(
    vaultless_host, runtime_host, mint
):
    checks = _checks(vaultless_host, mint)

    webhooks, target = checks["gitops.webhooks"], checks["target.vaulted-storage"]
    assert webhooks["status"] == "degraded" and "webhooks unavailable" in webhooks["detail"], webhooks
    assert "RuntimeCloudGitOps__WebhookSecret" in webhooks["detail"]
    assert target["status"] == "degraded" and "RuntimeCloudTarget__vaulted__Connection" in target["detail"], target
    for check in (webhooks, target):
        assert "Key Vault reference the platform did not resolve" in check["detail"]
        assert "@Microsoft.KeyVault" not in check["detail"] and "rc-vault" not in check["detail"]
    # The session's host, whose setting holds a real secret, shows the webhooks available.
    assert _checks(runtime_host, mint)["gitops.webhooks"]["status"] == "healthy"


def test_a_delivery_signed_with_the_reference_text_is_refused(
    vaultless_host, operator, tenant, environment, repository
):
    assert bind(vaultless_host, operator, environment, repository.path).status_code == 201

    forged = github_push(vaultless_host, tenant, environment, "a" * 40, secret=UNRESOLVED)
    with_the_real_secret = github_push(vaultless_host, tenant, environment, "a" * 40, secret=SECRET)

    # The reference's text is public (it is in the deployment): it is never the key. Nor is there another
    # key on this host, so every delivery is refused alike (404, as for an environment with no binding).
    assert forged.status_code == 404, forged.text
    assert with_the_real_secret.status_code == 404, with_the_real_secret.text
    assert "RuntimeCloudGitOps__WebhookSecret" in vaultless_host.log()  # the refusal is logged, naming the setting
    assert UNRESOLVED not in vaultless_host.log()


@pytest.mark.parametrize(
    "value",
    [
        "@Microsoft.KeyVault(SecretUri=https://v.vault.azure.net/secrets/s/)",
        "  @microsoft.keyvault(VaultName=v;SecretName=s)",
    ],
)
def test_an_unresolved_reference_reads_as_unset(value):
    setting = read_secret_setting("RuntimeCloudGitOps__X", {"RuntimeCloudGitOps__X": value})

    assert is_unresolved_reference(value)
    assert setting.value is None and setting.unresolved
    assert (
        setting.problem is not None
        and "RuntimeCloudGitOps__X" in setting.problem
        and value.strip() not in setting.problem
    )


def test_a_secret_that_merely_mentions_key_vault_is_a_value():
    for value in ("s3cret-@Microsoft.KeyVault(", "KeyVault(x)"):
        setting = read_secret_setting("S", {"S": value})
        assert setting.value == value and not setting.unresolved and setting.problem is None
    assert read_secret_setting("S", {}).problem == "app setting S is not set"

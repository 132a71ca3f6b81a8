"""The GitOps webhooks' default secret reaches the host as a Key Vault reference, never as a value."""

from __future__ import annotations

from runtime_cloud_infra import host_settings

from shared.gitops.settings import DEFAULT_WEBHOOK_SECRET


def test_the_default_webhook_secret_is_a_key_vault_reference_when_the_vault_catalogue_names_it() -> None:
    named = host_settings.gitops_webhook_reference({"iac-runner-identity", "gitops-webhook-secret"}, "kv-host")
    unnamed = host_settings.gitops_webhook_reference({"iac-runner-identity"}, "kv-host")

    # The app setting the host's RuntimeCloud:GitOps:WebhookSecret names by default.
    assert host_settings.GITOPS_WEBHOOK_SETTING == DEFAULT_WEBHOOK_SECRET
    assert named == {DEFAULT_WEBHOOK_SECRET: "@Microsoft.KeyVault(VaultName=kv-host;SecretName=gitops-webhook-secret)"}
    assert unnamed == {}  # no vault secret: no setting, and no webhook is accepted without a binding's own
    assert not host_settings.looks_secret(named[DEFAULT_WEBHOOK_SECRET])
    assert any("set by the program" in p for p in host_settings.problems({DEFAULT_WEBHOOK_SECRET: "x"}))

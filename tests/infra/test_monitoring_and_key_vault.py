"""Telemetry without local authentication, the four alerts, the workbook, and a vault in RBAC mode."""

from __future__ import annotations

import json

from runtime_cloud_infra import telemetry

from tests.infra.conftest import Deployment

SEED_METRIC = "connectsoft.factory.runtime_cloud.host.inbox_lag"


def test_workspace_and_application_insights_take_entra_id_only_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    workspace = deployment.one("operationalinsights:Workspace")
    insights = deployment.one("applicationinsights:Component").inputs

    assert workspace.inputs["features"]["disableLocalAuth"] is True
    assert insights["disableLocalAuth"] is True
    assert insights["workspaceResourceId"] == workspace.id
    assert insights["ingestionMode"] == "LogAnalytics"


def test_four_alerts_on_the_exported_telemetry_names_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    rules = {rule.name: rule.inputs for rule in deployment.of_type("monitor:ScheduledQueryRule")}
    workspace = deployment.one("operationalinsights:Workspace")
    operators = deployment.one("monitor:ActionGroup")

    assert set(rules) == {"alert-failed-runs", "alert-inbox-lag", "alert-lease-denials", "alert-stale-targets"}
    for rule in rules.values():
        assert rule["scopes"] == [workspace.id]
        assert rule["actions"]["actionGroups"] == [operators.id]
        assert rule["skipQueryValidation"] is True  # AppMetrics exists only after the first metric
    lag = rules["alert-inbox-lag"]["criteria"]["allOf"][0]
    assert f'Name == "{SEED_METRIC}"' in lag["query"]
    assert lag["dimensions"][0]["name"] == "module"
    assert lag["threshold"] == int(deployment.config["runtime-cloud-infra:inboxLagThresholdSeconds"])
    assert lag["metricMeasureColumn"] == "lag_seconds" and "lag_seconds" in lag["query"]
    denials = rules["alert-lease-denials"]["criteria"]["allOf"][0]
    assert denials["threshold"] == int(deployment.config["runtime-cloud-infra:leaseDenialThreshold"])
    for rule, metric in (
        ("alert-failed-runs", telemetry.RUNS_FAILED),
        ("alert-stale-targets", telemetry.STALE_TARGETS),
    ):
        assert metric.name in rules[rule]["criteria"]["allOf"][0]["query"]


def test_the_seed_metric_name_is_kept_in_one_module() -> None:
    assert telemetry.INBOX_LAG.name == SEED_METRIC
    assert (telemetry.INBOX_LAG.instrument, telemetry.INBOX_LAG.unit, telemetry.INBOX_LAG.dimensions) == (
        "gauge",
        "s",
        ("module",),
    )
    assert all(metric.name.startswith(telemetry.METRIC_PREFIX + ".") for metric in telemetry.METRICS)


def test_workbook_charts_every_metric_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    workbook = deployment.one("applicationinsights:Workbook").inputs
    document = json.loads(workbook["serializedData"])

    assert workbook["kind"] == "shared" and workbook["category"] == "workbook"
    queries = " ".join(item["content"].get("query", "") for item in document["items"])
    assert all(metric.name in queries for metric in telemetry.METRICS)


def test_workbook_shows_runner_jobs_started_failed_and_their_duration_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    document = json.loads(deployment.one("applicationinsights:Workbook").inputs["serializedData"])
    job = deployment.one("app:Job").inputs["jobName"]
    charts = {item["content"]["title"]: item["content"]["query"] for item in document["items"] if item["type"] == 3}

    runner_charts = {title: query for title, query in charts.items() if title.startswith("Runner job")}
    assert set(runner_charts) == {"Runner jobs started", "Runner jobs failed", "Runner job duration (s)"}
    for query in runner_charts.values():
        # The table the environment's diagnostic setting fills (resource-specific mode), for this job only.
        assert query.startswith(f'{telemetry.JOB_SYSTEM_LOGS} | where JobName == "{job}"')


def test_alerts_reach_the_configured_operators_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    receivers = deployment.one("monitor:ActionGroup").inputs["emailReceivers"]

    assert [r["emailAddress"] for r in receivers] == json.loads(deployment.config["runtime-cloud-infra:alertEmails"])


def test_key_vault_is_rbac_only_with_purge_protection_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    vault = deployment.one("keyvault:Vault").inputs["properties"]

    assert vault["enableRbacAuthorization"] is True
    assert vault["enablePurgeProtection"] is True
    assert vault["enableSoftDelete"] is True and vault["softDeleteRetentionInDays"] == 90
    assert not vault.get("accessPolicies")
    assert vault["tenantId"]


def test_the_program_writes_no_secret_into_the_vault_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    """Secret values are set by operators; a value written through ARM would sit in the Pulumi state."""
    assert not deployment.of_type("keyvault:Secret")
    key = deployment.one("keyvault:Key").inputs
    assert key["keyName"] == "pulumi-state" and key["properties"]["kty"] == "RSA"


def test_secrets_are_referenced_from_the_targets_with_mocked_pulumi_engine(dev: Deployment) -> None:
    targets = {t["Id"]: t for t in json.loads(dev.app_settings()["RuntimeCloud__Targets"])}

    assert targets["customer-cluster"]["Credential"] == {
        "Kind": "key-vault",
        "Uri": "https://kv-rtcloud-dev-01.vault.azure.net/secrets/iac-runner-identity",
    }
    assert dev.exports["secretNames"] == [
        "iac-runner-identity",
        "runtime-cloud-sql",
        "messaging-transport",
        "gitops-webhook-secret",
    ]


def test_audit_logs_go_to_the_workspace_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    settings = {d.name: d.inputs for d in deployment.of_type("monitor:DiagnosticSetting")}
    workspace = deployment.one("operationalinsights:Workspace")

    assert set(settings) == {"diagnostics-vault", "diagnostics-blobs", "diagnostics-app", "diagnostics-runner-jobs"}
    assert all(s["workspaceId"] == workspace.id for s in settings.values())
    assert settings["diagnostics-vault"]["resourceUri"] == deployment.one("keyvault:Vault").id
    assert settings["diagnostics-blobs"]["resourceUri"].endswith("/blobServices/default")

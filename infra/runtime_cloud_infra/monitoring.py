"""Log Analytics, Application Insights, the host's alert rules and its workbook.

Local authentication is off on both the workspace and Application Insights:
telemetry is accepted only with an Entra ID token, which the host gets for its
own identity (``APPLICATIONINSIGHTS_AUTHENTICATION_STRING``; the identity holds
Monitoring Metrics Publisher), so the connection string alone can send nothing.

The alert rules are log search rules over the workspace on the metric names in
:mod:`runtime_cloud_infra.telemetry`; they skip query validation because the
``AppMetrics`` table appears only once the host has sent its first metric.
Diagnostic settings send the vault's audit log, the storage account's blob audit
log (who read or wrote receipts), the function app's logs and the runner jobs'
Container Apps environment's logs (console and system) to the workspace; the
workbook charts runner jobs started, failed and their duration from the latter.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import applicationinsights, monitor, operationalinsights

from runtime_cloud_infra import telemetry
from runtime_cloud_infra.settings import StackSettings

_WORKBOOK_NAMESPACE = uuid.UUID("6f1f8c57-2a0e-4d8e-9a55-1f3b3f0c7c21")


@dataclass(frozen=True)
class Monitoring:
    workspace: operationalinsights.Workspace
    insights: applicationinsights.Component
    action_group: monitor.ActionGroup


@dataclass(frozen=True)
class AlertRule:
    key: str
    title: str
    query: str
    measure: str
    aggregation: str  # Average | Count | Maximum | Minimum | Total
    threshold: float
    dimension: str
    window: str
    severity: int


def telemetry_sinks(settings: StackSettings, resource_group: pulumi.Input[str]) -> Monitoring:
    workspace = operationalinsights.Workspace(
        "logs",
        workspace_name=settings.name("logs"),
        resource_group_name=resource_group,
        location=settings.location,
        sku={"name": "PerGB2018"},
        retention_in_days=settings.retention.log_days,
        features={"disable_local_auth": True, "enable_log_access_using_only_resource_permissions": True},
        tags=settings.tags,
    )
    insights = applicationinsights.Component(
        "insights",
        resource_name_=settings.name("insights"),
        resource_group_name=resource_group,
        location=settings.location,
        kind="web",
        application_type="web",
        workspace_resource_id=workspace.id,
        ingestion_mode="LogAnalytics",
        disable_local_auth=True,
        tags=settings.tags,
    )
    return Monitoring(workspace=workspace, insights=insights, action_group=_action_group(settings, resource_group))


def _action_group(settings: StackSettings, resource_group: pulumi.Input[str]) -> monitor.ActionGroup:
    return monitor.ActionGroup(
        "operators",
        action_group_name=settings.name("operators"),
        resource_group_name=resource_group,
        location="Global",
        group_short_name=f"rc-{settings.stack}"[:12],
        enabled=True,
        email_receivers=[
            {"name": f"operator-{index}", "email_address": email, "use_common_alert_schema": True}
            for index, email in enumerate(settings.alerting.emails)
        ],
        tags=settings.tags,
    )


def alert_rules(settings: StackSettings) -> list[AlertRule]:
    """The four alerts the issue names, on the telemetry names of :mod:`telemetry`."""
    return [
        AlertRule(
            "failed-runs",
            "Provisioning runs failed",
            telemetry.failed_runs_query(),
            "failed",
            "Total",
            0,
            "reason",
            "PT15M",
            2,
        ),
        AlertRule(
            "inbox-lag",
            "Inbox lag over threshold",
            telemetry.inbox_lag_query(),
            "lag_seconds",
            "Maximum",
            settings.alerting.inbox_lag_seconds,
            "module",
            "PT15M",
            2,
        ),
        AlertRule(
            "lease-denials",
            "Lease denials spike",
            telemetry.lease_denials_query(),
            "denials",
            "Total",
            settings.alerting.lease_denials,
            "pool",
            "PT15M",
            3,
        ),
        AlertRule(
            "stale-targets",
            "Targets stale for 30 minutes",
            telemetry.stale_targets_query(),
            "stale",
            "Minimum",
            0,
            "target",
            "PT30M",
            3,
        ),
    ]


def alerts(
    settings: StackSettings, resource_group: pulumi.Input[str], sinks: Monitoring
) -> list[monitor.ScheduledQueryRule]:
    return [_alert(settings, resource_group, sinks, rule) for rule in alert_rules(settings)]


def _alert(
    settings: StackSettings, resource_group: pulumi.Input[str], sinks: Monitoring, rule: AlertRule
) -> monitor.ScheduledQueryRule:
    return monitor.ScheduledQueryRule(
        f"alert-{rule.key}",
        rule_name=settings.name(rule.key),
        resource_group_name=resource_group,
        location=settings.location,
        kind="LogAlert",
        display_name=f"Runtime Cloud ({settings.stack}): {rule.title}",
        description=f"{rule.title}: {rule.measure} {rule.aggregation.lower()} over {rule.window} "
        f"above {rule.threshold:g}, per {rule.dimension}",
        enabled=True,
        severity=rule.severity,
        scopes=[sinks.workspace.id],
        evaluation_frequency="PT5M",
        window_size=rule.window,
        skip_query_validation=True,
        auto_mitigate=True,
        criteria={
            "all_of": [
                {
                    "query": rule.query,
                    "time_aggregation": rule.aggregation,
                    "metric_measure_column": rule.measure,
                    "operator": "GreaterThan",
                    "threshold": rule.threshold,
                    "dimensions": [{"name": rule.dimension, "operator": "Include", "values": ["*"]}],
                    "failing_periods": {"number_of_evaluation_periods": 1, "min_failing_periods_to_alert": 1},
                }
            ]
        },
        actions={"action_groups": [sinks.action_group.id]},
        tags=settings.tags,
    )


def workbook(
    settings: StackSettings, resource_group: pulumi.Input[str], sinks: Monitoring
) -> applicationinsights.Workbook:
    return applicationinsights.Workbook(
        "host-workbook",
        # A workbook's name is a GUID; derived from the stack so that it is stable across updates.
        resource_name_=str(uuid.uuid5(_WORKBOOK_NAMESPACE, f"{settings.resource_group_name}/{settings.stack}")),
        resource_group_name=resource_group,
        location=settings.location,
        kind="shared",
        category="workbook",
        display_name=f"Runtime Cloud host ({settings.stack})",
        serialized_data=sinks.workspace.id.apply(
            lambda workspace_id: telemetry.workbook(workspace_id, runner_job_name(settings))
        ),
        source_id=sinks.workspace.id,
        tags=settings.tags,
    )


def runner_job_name(settings: StackSettings) -> str:
    """The runner job's name (runtime_cloud_infra/runner_job.py declares it): the workbook's queries name it."""
    return settings.name("runner")


def audit_logs(
    name: str,
    resource_uri: pulumi.Input[str],
    sinks: Monitoring,
    *,
    category: str | None = None,
    category_group: str | None = None,
) -> monitor.DiagnosticSetting:
    """Send one resource's log category (or category group) to the workspace."""
    log = {"enabled": True, **({"category": category} if category else {"category_group": category_group})}
    return monitor.DiagnosticSetting(
        f"diagnostics-{name}",
        name="to-log-analytics",
        resource_uri=resource_uri,
        workspace_id=sinks.workspace.id,
        log_analytics_destination_type="Dedicated",
        logs=[log],
    )

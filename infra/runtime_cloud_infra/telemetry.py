"""The telemetry names the alerts and the workbook read, in one place.

The host exports OpenTelemetry metrics to Application Insights (Azure Monitor
distro); in a workspace-based Application Insights they land in the Log
Analytics table ``AppMetrics`` (``Name``, ``Sum``, ``Max``, ``ItemCount``, and the
dimensions in ``Properties``). The product's one named metric is
``connectsoft.factory.runtime_cloud.host.inbox_lag`` (gauge, seconds, dimension
``module``); the others follow its pattern, ``connectsoft.factory.runtime_cloud.
<module>.<what>``. Telemetry itself is a later issue: if it picks other names,
change them here and nowhere else.
"""

from __future__ import annotations

import json
from dataclasses import dataclass

METRIC_PREFIX = "connectsoft.factory.runtime_cloud"


@dataclass(frozen=True)
class Metric:
    name: str
    instrument: str  # counter | gauge
    unit: str
    dimensions: tuple[str, ...]
    summary: str


INBOX_LAG = Metric(
    f"{METRIC_PREFIX}.host.inbox_lag",
    "gauge",
    "s",
    ("module",),
    "age of the oldest unprocessed message per module (the product's named metric)",
)
RUNS_FAILED = Metric(
    f"{METRIC_PREFIX}.provisioning.runs_failed",
    "counter",
    "{run}",
    ("reason", "environment_class"),
    "provisioning runs that ended failed",
)
LEASE_DENIALS = Metric(
    f"{METRIC_PREFIX}.capacity.lease_denials",
    "counter",
    "{denial}",
    ("pool", "reason"),
    "lease acquisitions refused (quota-exceeded, capacity-unavailable)",
)
STALE_TARGETS = Metric(
    f"{METRIC_PREFIX}.inventory.stale_targets",
    "gauge",
    "{environment}",
    ("target",),
    "environments whose last observation failed (their target could not be read)",
)

METRICS = (INBOX_LAG, RUNS_FAILED, LEASE_DENIALS, STALE_TARGETS)


def _series(metric: Metric) -> str:
    return f'AppMetrics | where Name == "{metric.name}"'


def inbox_lag_query() -> str:
    """Largest lag per module in the window."""
    return (
        f'{_series(INBOX_LAG)} | extend module = tostring(Properties["module"]) '
        "| summarize lag_seconds = max(Max) by module"
    )


def failed_runs_query() -> str:
    return (
        f'{_series(RUNS_FAILED)} | extend reason = tostring(Properties["reason"]) '
        "| summarize failed = sum(Sum) by reason"
    )


def lease_denials_query() -> str:
    return (
        f'{_series(LEASE_DENIALS)} | extend pool = tostring(Properties["pool"]) | summarize denials = sum(Sum) by pool'
    )


def stale_targets_query() -> str:
    """Targets reported stale through the whole window (the smallest value seen is still above zero)."""
    return (
        f'{_series(STALE_TARGETS)} | extend target = tostring(Properties["target"]) '
        "| summarize stale = min(Min) by target"
    )


# Runner jobs: the Container Apps environment's logs, sent through Azure Monitor (a diagnostic setting in
# resource-specific mode) to the tables ContainerAppSystemLogs (the platform's events per execution
# replica: JobName, ReplicaName, Reason, Type, Log) and ContainerAppConsoleLogs (the job's own output).
JOB_SYSTEM_LOGS = "ContainerAppSystemLogs"
JOB_CONSOLE_LOGS = "ContainerAppConsoleLogs"
# Reasons the platform gives an execution that did not complete (Kubernetes' job and pod events).
JOB_FAILURE_REASONS = ("BackoffLimitExceeded", "DeadlineExceeded", "Failed", "Error", "OOMKilled")


def _job_events(job_name: str) -> str:
    return f'{JOB_SYSTEM_LOGS} | where JobName == "{job_name}" and isnotempty(ReplicaName)'


def runner_jobs_started_query(job_name: str) -> str:
    """Executions started per 5 minutes: one replica per execution (parallelism 1, no retries)."""
    return (
        f"{_job_events(job_name)} | summarize first_seen = min(TimeGenerated) by ReplicaName "
        "| summarize started = count() by bin(first_seen, 5m)"
    )


def runner_jobs_failed_query(job_name: str) -> str:
    reasons = ", ".join(f'"{reason}"' for reason in JOB_FAILURE_REASONS)
    return (
        f"{_job_events(job_name)} | where Reason in~ ({reasons}) "
        "| summarize failed = dcount(ReplicaName) by bin(TimeGenerated, 5m)"
    )


def runner_jobs_duration_query(job_name: str) -> str:
    """How long executions ran (first to last platform event of their replica), per hour they started."""
    return (
        f"{_job_events(job_name)} | summarize started = min(TimeGenerated), ended = max(TimeGenerated) by ReplicaName "
        '| extend seconds = datetime_diff("second", ended, started) '
        "| summarize median_seconds = percentile(seconds, 50), longest_seconds = max(seconds) by bin(started, 1h)"
    )


def _chart(title: str, query: str, chart: str) -> dict[str, object]:
    return {
        "type": 3,  # a query item
        "name": title,
        "content": {
            "version": "KqlItem/1.0",
            "title": title,
            "query": query,
            "size": 0,
            "timeContext": {"durationMs": 86_400_000},
            "queryType": 0,  # Logs
            "resourceType": "microsoft.operationalinsights/workspaces",
            "visualization": chart,
        },
    }


def workbook(workspace_id: str, job_name: str) -> str:
    """The Azure Monitor workbook (Notebook/1.0 JSON) of the host's health over the last day."""
    over_time = "| summarize {0} by bin(TimeGenerated, 5m), {1}"
    items = [
        {
            "type": 1,
            "name": "about",
            "content": {
                "json": (
                    "## Runtime Cloud host\nInbox lag per module, failed runs, lease denials and stale targets, "
                    "from the metrics the host exports (names in infra/runtime_cloud_infra/telemetry.py); "
                    f"runner jobs ({job_name}) from the Container Apps environment's logs."
                )
            },
        },
        _chart(
            "Inbox lag per module (s)",
            f'{_series(INBOX_LAG)} | extend module = tostring(Properties["module"]) '
            + over_time.format("lag = max(Max)", "module"),
            "timechart",
        ),
        _chart(
            "Failed runs",
            f'{_series(RUNS_FAILED)} | extend reason = tostring(Properties["reason"]) '
            + over_time.format("failed = sum(Sum)", "reason"),
            "barchart",
        ),
        _chart(
            "Lease denials per pool",
            f'{_series(LEASE_DENIALS)} | extend pool = tostring(Properties["pool"]) '
            + over_time.format("denials = sum(Sum)", "pool"),
            "timechart",
        ),
        _chart(
            "Stale targets",
            f'{_series(STALE_TARGETS)} | extend target = tostring(Properties["target"]) '
            + over_time.format("stale = max(Max)", "target"),
            "timechart",
        ),
        _chart("Runner jobs started", runner_jobs_started_query(job_name), "timechart"),
        _chart("Runner jobs failed", runner_jobs_failed_query(job_name), "barchart"),
        _chart("Runner job duration (s)", runner_jobs_duration_query(job_name), "timechart"),
    ]
    schema = "https://github.com/Microsoft/Application-Insights-Workbooks/blob/master/schema/workbook.json"
    document = {"version": "Notebook/1.0", "items": items, "fallbackResourceIds": [workspace_id], "$schema": schema}
    return json.dumps(document, sort_keys=True)

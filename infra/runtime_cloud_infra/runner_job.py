"""The runner job: a Container Apps job that runs each plan and apply of a provisioning run.

The function app never runs an IaC runner itself (no Pulumi CLI on Flex
Consumption, and an apply outlives ``functionTimeout``). It writes the job's
input to blob and a request to the ``runner-jobs`` queue of its store; this job
is **event-driven**, scaled by that queue with KEDA's ``azure-queue`` scaler:
one execution per queued request (``python -m runner_job once``, one request
each), up to ``runnerJobMaxExecutions`` at once. So the app needs no ARM
permission over the job: it can only ask for work, never start, change or
stop a job.

- **image**: ``runnerJobImage`` (built from ``runner_job/Dockerfile``: the app's
  code, the Pulumi CLI and the providers the programs use), pulled with the
  runner identity when ``runnerJobRegistry`` names a registry;
- **one identity, the runner's** (``AZURE_CLIENT_ID``, and ``AzureWebJobsStorage__*``
  by identity with its client id): the job runs programs that tenants supply, and
  any code in its container can get a token for every identity attached to it,
  so it carries nothing but the runner identity. That identity reaches, in the
  host's store, only the **job exchange** (``RUNNER_JOB_TABLES``, ``_CONTAINERS``,
  ``_QUEUES``; the contract is ``shared/iac/jobs/access.py``), each by a role
  scoped to that one table, container or queue; KEDA's scaler and the image pull
  use it too. Plus the Pulumi state key and Monitoring Metrics Publisher;
- **reported like the host**: the Application Insights connection string and
  ``APPLICATIONINSIGHTS_AUTHENTICATION_STRING`` (Entra ID, the runner identity:
  local authentication is off) in its environment, and the managed
  environment's logs (console and system) sent to the stack's Log Analytics
  workspace through Azure Monitor (``appLogsConfiguration.destination``
  ``azure-monitor`` and a diagnostic setting: no workspace key anywhere);
- **no retries by Container Apps** (``replicaRetryLimit`` 0): a job that dies is
  retried by the run's orchestration as a new attempt, which knows what the
  dead one did (the step journal);
- **polled** every ``runnerJobPollingIntervalSeconds`` (default 5 s: one queue read
  a poll, about 0.52 million a month), counting only requests nobody has taken;
- **timeout** ``runnerJobTimeoutSeconds`` (default 4 h): the longest plan, the
  handover's wait and the longest apply, which one unattended run's execution holds
  (checked against ``JobHandoverSeconds``: runner_job_settings.py);
- **warm runners** when ``runnerJobWarmReplicas`` > 0: warm_runners.py.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi
from pulumi_azure_native import app, authorization, managedidentity, storage

from runtime_cloud_infra import host_settings, monitoring, warm_runners
from runtime_cloud_infra.roles import assign
from runtime_cloud_infra.settings import StackSettings

JOB_QUEUE = "runner-jobs"  # shared/iac/settings.py JobQueue's default
COMMAND = ["python", "-m", "runner_job", "once"]
RUNNER_STATE_KEY_ROLE = "Key Vault Crypto User"  # on the state key only
RUNNER_TELEMETRY_ROLE = "Monitoring Metrics Publisher"
# The job exchange: what the runner identity reaches in the host's store (shared/iac/jobs/access.py
# declares the same names for the job; infra does not import the app's code, a test compares them).
RUNNER_JOB_TABLES = ("RunnerJobs", "ProvisioningSteps")
RUNNER_JOB_CONTAINERS = ("runner-jobs", "pulumi-plans", host_settings.PULUMI_STATE_CONTAINER)
RUNNER_JOB_QUEUES = (JOB_QUEUE, f"{JOB_QUEUE}-poison", "runner-job-results")
TABLE_ROLES = ("Storage Table Data Contributor",)
CONTAINER_ROLES = ("Storage Blob Data Contributor",)
# Narrowest per queue: requests are taken and deleted (Processor) and KEDA reads the length (Reader);
# the poison and completion queues are only written to (Sender).
QUEUE_ROLES = {
    JOB_QUEUE: ("Storage Queue Data Message Processor", "Storage Queue Data Reader"),
    f"{JOB_QUEUE}-poison": ("Storage Queue Data Message Sender",),
    "runner-job-results": ("Storage Queue Data Message Sender",),
}


@dataclass(frozen=True)
class JobWiring:
    runner_identity: managedidentity.UserAssignedIdentity
    account_name: pulumi.Input[str]
    store_settings: dict[str, pulumi.Input[str]]  # AzureWebJobsStorage__* by the runner identity
    backend_url: pulumi.Input[str]
    secrets_provider: str
    insights_connection_string: pulumi.Input[str]


@dataclass(frozen=True)
class RunnerJob:
    environment: app.ManagedEnvironment
    job: app.Job
    warm: app.ContainerApp | None  # runnerJobWarmReplicas > 0 (warm_runners.py)


def runner_job(settings: StackSettings, resource_group: pulumi.Input[str], wiring: JobWiring) -> RunnerJob:
    environment = app.ManagedEnvironment(
        "runner-jobs-environment",
        environment_name=settings.name("jobs"),
        resource_group_name=resource_group,
        location=settings.location,
        workload_profiles=[{"name": "Consumption", "workload_profile_type": "Consumption"}],
        # Logs go through Azure Monitor: a diagnostic setting (stack.py) sends them to the workspace.
        app_logs_configuration={"destination": "azure-monitor"},
        tags=settings.tags,
    )
    job = app.Job(
        "runner-job",
        job_name=monitoring.runner_job_name(settings),
        resource_group_name=resource_group,
        location=settings.location,
        environment_id=environment.id,
        workload_profile_name="Consumption",
        identity={
            "type": "UserAssigned",
            "user_assigned_identities": [wiring.runner_identity.id],
        },
        configuration={
            "trigger_type": "Event",
            "replica_timeout": settings.runner_job.timeout_seconds,
            "replica_retry_limit": 0,
            "event_trigger_config": {
                "parallelism": 1,
                "replica_completion_count": 1,
                "scale": {
                    "min_executions": 0,
                    "max_executions": settings.runner_job.max_executions,
                    "polling_interval": settings.runner_job.polling_interval_seconds,
                    "rules": [
                        {
                            "name": "runner-jobs-queue",
                            "type": "azure-queue",
                            "metadata": {
                                "accountName": wiring.account_name,
                                "queueName": JOB_QUEUE,
                                "queueLength": "1",
                                # Count only the requests nobody has taken: a request a warm runner (or an
                                # execution) took is hidden until its job claims it, and must start nothing.
                                "queueLengthStrategy": "visibleonly",
                            },
                            "identity": wiring.runner_identity.id,
                        }
                    ],
                },
            },
            "registries": (
                [{"server": settings.runner_job.registry, "identity": wiring.runner_identity.id}]
                if settings.runner_job.registry
                else None
            ),
        },
        template={
            "containers": [
                {
                    "name": "runner-job",
                    "image": settings.runner_job.image,
                    "command": COMMAND,
                    "env": [{"name": name, "value": value} for name, value in sorted(job_environment(wiring).items())],
                    "resources": {"cpu": settings.runner_job.cpu, "memory": settings.runner_job.memory},
                }
            ]
        },
        tags=settings.tags,
    )
    warm = warm_runners.warm_runners(
        settings, resource_group, environment, wiring.runner_identity.id, job_environment(wiring)
    )
    return RunnerJob(environment=environment, job=job, warm=warm)


def job_environment(wiring: JobWiring) -> dict[str, pulumi.Input[str]]:
    """The job's settings: everything by the runner identity, its telemetry as the app sends its own."""
    return {
        **wiring.store_settings,
        "RuntimeCloud__IaC__JobQueue": JOB_QUEUE,
        # DefaultAzureCredential, the azblob backend and the azure-native provider use the runner identity.
        "AZURE_CLIENT_ID": wiring.runner_identity.client_id,
        "ARM_USE_MSI": "true",
        "ARM_CLIENT_ID": wiring.runner_identity.client_id,
        "AZURE_STORAGE_ACCOUNT": wiring.account_name,
        "PULUMI_BACKEND_URL": wiring.backend_url,
        "PULUMI_SKIP_UPDATE_CHECK": "true",
        "APPLICATIONINSIGHTS_CONNECTION_STRING": wiring.insights_connection_string,
        "APPLICATIONINSIGHTS_AUTHENTICATION_STRING": host_settings.entra_authentication(
            wiring.runner_identity.client_id
        ),
    }


def exchange_paths() -> list[tuple[str, str]]:
    """(role, path below the host's account) of the runner on the job exchange: one resource each."""
    paths = [(role, f"tableServices/default/tables/{name}") for name in RUNNER_JOB_TABLES for role in TABLE_ROLES]
    paths += [
        (role, f"blobServices/default/containers/{name}") for name in RUNNER_JOB_CONTAINERS for role in CONTAINER_ROLES
    ]
    paths += [
        (role, f"queueServices/default/queues/{name}") for name in RUNNER_JOB_QUEUES for role in QUEUE_ROLES[name]
    ]
    return paths


def exchange_scopes(account_id: str) -> list[tuple[str, str]]:
    """(role, scope) of the runner on the job exchange of the account ``account_id``."""
    return [(role, f"{account_id}/{path}") for role, path in exchange_paths()]


def job_exchange(
    resource_group: pulumi.Input[str],
    account: storage.StorageAccount,
    blob_service: storage.BlobServiceProperties,
    declared: Sequence[str],
) -> list[pulumi.Resource]:
    """The exchange's tables, containers and queues (but the ``declared`` containers, already in the
    store's program): a role assignment needs its scope to exist, and the host, which also creates them
    at start when missing, may start after the grants. On a stack deployed before them, ``pulumi import``
    the ones the host already made (docs/azure.md, Deploying)."""
    resources: list[pulumi.Resource] = [
        storage.Table(
            f"exchange-table-{name.lower()}",
            account_name=account.name,
            resource_group_name=resource_group,
            table_name=name,
        )
        for name in RUNNER_JOB_TABLES
    ]
    resources += [
        storage.BlobContainer(
            f"exchange-container-{name}",
            account_name=account.name,
            resource_group_name=resource_group,
            container_name=name,
            public_access="None",
            opts=pulumi.ResourceOptions(depends_on=[blob_service]),
        )
        for name in RUNNER_JOB_CONTAINERS
        if name not in declared
    ]
    resources += [
        storage.Queue(
            f"exchange-queue-{name}", account_name=account.name, resource_group_name=resource_group, queue_name=name
        )
        for name in RUNNER_JOB_QUEUES
    ]
    return resources


def grant_runner_job(
    runner: managedidentity.UserAssignedIdentity,
    account_id: pulumi.Input[str],
    exchange: Sequence[pulumi.Resource],
    state_key_id: pulumi.Input[str],
    insights_id: pulumi.Input[str],
    subscription: pulumi.Input[str],
) -> list[authorization.RoleAssignment]:
    """The runner's roles for the job itself: the exchange (once it exists), the Pulumi secrets key, its
    telemetry."""
    grants = [
        assign(
            f"runner-exchange-{path.rsplit('/', 1)[-1].lower()}-{_slug(role)}",
            scope=pulumi.Output.concat(account_id, "/", path),
            principal_id=runner.principal_id,
            role=role,
            subscription_id=subscription,
            description=f"Runtime Cloud runner job: {role} on {path.rsplit('/', 1)[-1]} only",
            opts=pulumi.ResourceOptions(depends_on=list(exchange)),
        )
        for role, path in exchange_paths()
    ]
    grants.append(
        assign(
            "runner-state-key",
            scope=state_key_id,
            principal_id=runner.principal_id,
            role=RUNNER_STATE_KEY_ROLE,
            subscription_id=subscription,
            description="Runtime Cloud runner job: the Pulumi secrets provider's key",
        )
    )
    grants.append(
        assign(
            "runner-telemetry",
            scope=insights_id,
            principal_id=runner.principal_id,
            role=RUNNER_TELEMETRY_ROLE,
            subscription_id=subscription,
            description="Runtime Cloud runner job: its telemetry (Entra-authenticated)",
        )
    )
    return grants


def _slug(role: str) -> str:
    return role.lower().replace(" ", "-")


def backend_url(account_name: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.concat("azblob://", host_settings.PULUMI_STATE_CONTAINER, "?storage_account=", account_name)

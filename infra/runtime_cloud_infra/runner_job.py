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
- **identities**: the host identity for the host's store (the job's input,
  result, heartbeat, the step journal, the queues; ``AzureWebJobsStorage__*``
  as the app has them, and the scaler reads the queue with it), and the runner
  identity (``AZURE_CLIENT_ID``) for everything the runner changes, the Pulumi
  state in the ``pulumi-state`` container (``azblob://``) and the state key in
  Key Vault (the secrets provider);
- **no retries by Container Apps** (``replicaRetryLimit`` 0): a job that dies is
  retried by the run's orchestration as a new attempt, which knows what the
  dead one did (the step journal);
- **timeout** ``runnerJobTimeoutSeconds`` (default 4 h): the longest apply.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import app, authorization, managedidentity

from runtime_cloud_infra import host_settings
from runtime_cloud_infra.roles import assign
from runtime_cloud_infra.settings import StackSettings

JOB_QUEUE = "runner-jobs"  # shared/iac/settings.py JobQueue's default
COMMAND = ["python", "-m", "runner_job", "once"]
RUNNER_STATE_ROLE = "Storage Blob Data Contributor"  # on the pulumi-state container only
RUNNER_STATE_KEY_ROLE = "Key Vault Crypto User"  # on the state key only


@dataclass(frozen=True)
class JobWiring:
    host_identity: managedidentity.UserAssignedIdentity
    runner_identity: managedidentity.UserAssignedIdentity
    account_name: pulumi.Input[str]
    store_settings: dict[str, pulumi.Input[str]]  # AzureWebJobsStorage__* by identity, as the app has them
    backend_url: pulumi.Input[str]
    secrets_provider: str


@dataclass(frozen=True)
class RunnerJob:
    environment: app.ManagedEnvironment
    job: app.Job


def runner_job(settings: StackSettings, resource_group: pulumi.Input[str], wiring: JobWiring) -> RunnerJob:
    environment = app.ManagedEnvironment(
        "runner-jobs-environment",
        environment_name=settings.name("jobs"),
        resource_group_name=resource_group,
        location=settings.location,
        workload_profiles=[{"name": "Consumption", "workload_profile_type": "Consumption"}],
        tags=settings.tags,
    )
    job = app.Job(
        "runner-job",
        job_name=settings.name("runner"),
        resource_group_name=resource_group,
        location=settings.location,
        environment_id=environment.id,
        workload_profile_name="Consumption",
        identity={
            "type": "UserAssigned",
            "user_assigned_identities": [wiring.host_identity.id, wiring.runner_identity.id],
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
                    "polling_interval": 5,
                    "rules": [
                        {
                            "name": "runner-jobs-queue",
                            "type": "azure-queue",
                            "metadata": {
                                "accountName": wiring.account_name,
                                "queueName": JOB_QUEUE,
                                "queueLength": "1",
                            },
                            "identity": wiring.host_identity.id,
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
                    "env": [{"name": name, "value": value} for name, value in sorted(_environment(wiring).items())],
                    "resources": {"cpu": settings.runner_job.cpu, "memory": settings.runner_job.memory},
                }
            ]
        },
        tags=settings.tags,
    )
    return RunnerJob(environment=environment, job=job)


def _environment(wiring: JobWiring) -> dict[str, pulumi.Input[str]]:
    """The job's settings: the store by the host identity, everything else the runner does by the runner's."""
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
    }


def grant_runner_state(
    runner: managedidentity.UserAssignedIdentity,
    state_container_id: pulumi.Input[str],
    state_key_id: pulumi.Input[str],
    subscription: pulumi.Input[str],
) -> list[authorization.RoleAssignment]:
    """The runner reaches the Pulumi state (one container) and its secrets key, and nothing else of the host."""
    return [
        assign(
            "runner-pulumi-state",
            scope=state_container_id,
            principal_id=runner.principal_id,
            role=RUNNER_STATE_ROLE,
            subscription_id=subscription,
            description="Runtime Cloud runner job: the Pulumi state (azblob backend)",
        ),
        assign(
            "runner-state-key",
            scope=state_key_id,
            principal_id=runner.principal_id,
            role=RUNNER_STATE_KEY_ROLE,
            subscription_id=subscription,
            description="Runtime Cloud runner job: the Pulumi secrets provider's key",
        ),
    ]


def backend_url(account_name: pulumi.Input[str]) -> pulumi.Output[str]:
    return pulumi.Output.concat("azblob://", host_settings.PULUMI_STATE_CONTAINER, "?storage_account=", account_name)

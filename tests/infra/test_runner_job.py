"""The runner job in Azure: a queue-scaled Container Apps job with the runner identity only, no keys, no retries."""

from __future__ import annotations

from typing import Any

from runtime_cloud_infra.host_settings import looks_secret
from runtime_cloud_infra.runner_job import COMMAND, JOB_QUEUE, exchange_scopes
from runtime_cloud_infra.runner_job_settings import POLLING_DEFAULT_SECONDS
from runtime_cloud_infra.warm_runners import SERVE_COMMAND

from shared.iac.settings import IaCSettings
from tests.infra.conftest import WARM_REPLICAS, Declared, Deployment


def _identity(deployment: Deployment, kind: str) -> Declared:
    return deployment.one("managedidentity:UserAssignedIdentity", f"{kind}-identity")


def _environment(job: Declared) -> dict[str, Any]:
    (container,) = job.inputs["template"]["containers"]
    return {entry["name"]: entry["value"] for entry in container["env"]}


def test_the_job_is_scaled_by_the_app_s_job_queue_with_the_runner_identity_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    job = deployment.one("app:Job")
    runner = _identity(deployment, "runner")
    store = deployment.one("storage:StorageAccount", "host-store")
    configuration = job.inputs["configuration"]

    assert configuration["triggerType"] == "Event"
    assert configuration["replicaRetryLimit"] == 0  # retries are new attempts, decided by the run
    (rule,) = configuration["eventTriggerConfig"]["scale"]["rules"]
    assert rule["type"] == "azure-queue" and rule["identity"] == runner.id
    assert rule["metadata"] == {
        "accountName": store.outputs["name"],
        "queueName": JOB_QUEUE,
        "queueLength": "1",
        "queueLengthStrategy": "visibleonly",  # a taken request (a warm runner's, an execution's) starts nothing
    }
    assert JOB_QUEUE == IaCSettings().job_queue  # the queue the app writes to by default
    assert configuration["eventTriggerConfig"]["parallelism"] == 1
    assert job.inputs["environmentId"] == deployment.one("app:ManagedEnvironment").id
    (container,) = job.inputs["template"]["containers"]
    assert container["command"] == COMMAND == ["python", "-m", "runner_job", "once"]


def test_the_job_reaches_the_store_and_changes_targets_as_the_runner_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    job = deployment.one("app:Job")
    runner = _identity(deployment, "runner")
    account = deployment.one("storage:StorageAccount", "host-store").outputs["name"]
    environment = _environment(job)

    assert set(job.inputs["identity"]["userAssignedIdentities"]) == {runner.id}
    assert environment["AzureWebJobsStorage__credential"] == "managedidentity"
    assert environment["AzureWebJobsStorage__clientId"] == runner.outputs["clientId"]
    for service in ("blob", "queue", "table"):
        assert (
            environment[f"AzureWebJobsStorage__{service}ServiceUri"] == f"https://{account}.{service}.core.windows.net"
        )
    assert environment["AZURE_CLIENT_ID"] == runner.outputs["clientId"]
    assert environment["PULUMI_BACKEND_URL"].startswith("azblob://pulumi-state?storage_account=")
    assert "AzureWebJobsStorage" not in environment  # no connection string, no key
    assert not [name for name, value in environment.items() if looks_secret(str(value))]


def test_the_exchange_roles_are_each_scoped_to_one_resource_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    runner = _identity(deployment, "runner").outputs["principalId"]
    store = deployment.one("storage:StorageAccount", "host-store").id
    scopes = {
        a.inputs["scope"]
        for a in deployment.of_type("authorization:RoleAssignment")
        if a.inputs["principalId"] == runner and a.inputs["scope"].lower().startswith(store.lower())
    }

    assert scopes == {scope for _, scope in exchange_scopes(store)}
    assert all(scope.count("/") == store.count("/") + 4 for scope in scopes), "one table, container or queue each"
    # A role assignment's scope must exist: the program declares each of them (the host may start later).
    declared = {
        r.id for kind in ("storage:Table", "storage:Queue", "storage:BlobContainer") for r in deployment.of_type(kind)
    }
    assert scopes <= declared


def test_the_app_hands_jobs_the_pulumi_backend_and_the_key_vault_secrets_provider_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    settings = deployment.app_settings()

    assert settings["RuntimeCloud__IaC__PulumiBackendUrl"].startswith("azblob://pulumi-state")
    assert settings["RuntimeCloud__IaC__PulumiSecretsProvider"].startswith("azurekeyvault://")
    assert settings["RuntimeCloud__IaC__PulumiSecretsProvider"].endswith("/keys/pulumi-state")


def test_the_scale_rule_polls_at_the_stack_s_interval_with_mocked_pulumi_engine(
    dev: Deployment, warm: Deployment
) -> None:
    def polling(deployment: Deployment) -> int:
        return deployment.one("app:Job").inputs["configuration"]["eventTriggerConfig"]["scale"]["pollingInterval"]

    assert "runtime-cloud-infra:runnerJobPollingIntervalSeconds" in dev.read_keys
    assert polling(dev) == POLLING_DEFAULT_SECONDS == 5  # the sample stack's, and Container Apps' 30 s never
    assert polling(warm) == 2


def test_no_warm_runner_unless_the_stack_asks_for_one_with_mocked_pulumi_engine(dev: Deployment) -> None:
    assert dev.of_type("app:ContainerApp") == []


def test_warm_runners_serve_the_job_queue_as_the_job_with_mocked_pulumi_engine(warm: Deployment) -> None:
    job = warm.one("app:Job")
    app = warm.one("app:ContainerApp")
    (job_container,) = job.inputs["template"]["containers"]
    (container,) = app.inputs["template"]["containers"]
    timeout = job.inputs["configuration"]["replicaTimeout"]

    assert app.inputs["template"]["scale"] == {"minReplicas": WARM_REPLICAS, "maxReplicas": WARM_REPLICAS}
    assert app.inputs["managedEnvironmentId"] == job.inputs["environmentId"]
    assert container["command"] == SERVE_COMMAND and SERVE_COMMAND[:4] == [*COMMAND[:3], "serve"]
    assert (container["image"], container["resources"]) == (job_container["image"], job_container["resources"])
    assert _environment(app) == {**_environment(job), "RUNNER_JOB_TIMEOUT_SECONDS": str(int(timeout))}

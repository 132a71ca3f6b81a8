"""The runner job in Azure: a queue-scaled Container Apps job with the runner identity only, no keys, no retries."""

from __future__ import annotations

from typing import Any

from runtime_cloud_infra.host_settings import looks_secret
from runtime_cloud_infra.runner_job import COMMAND, JOB_QUEUE, exchange_scopes

from shared.iac.settings import IaCSettings
from tests.infra.conftest import Declared, Deployment


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
    assert rule["metadata"] == {"accountName": store.outputs["name"], "queueName": JOB_QUEUE, "queueLength": "1"}
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

"""Run the Pulumi program in infra/ against a mocked Pulumi engine.

Mocking the engine is the true edge of the world here: the Pulumi CLI and Azure
are not reachable, so the program runs in process with
``pulumi.runtime.set_mocks`` and every resource it declares is recorded with
its inputs, as the engine would receive them (camelCase, as ARM names them).
The mock answers with the few outputs the program reads back (ids, names,
endpoints, client and principal ids, the Application Insights connection
string). Each stack is run once per session:

- ``dev``: ``infra/Pulumi.dev.yaml``, the sample stack file;
- ``factory``: ``environments/factory/host.yaml``, with the configuration the
  host's own Pulumi runner passes (``shared.iac.pulumi.workspace.stack_configuration``);
- ``warm``: the sample stack with warm runners (``runnerJobWarmReplicas``) and a
  2 s scale-rule poll.
"""

from __future__ import annotations

import asyncio
import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from unittest import mock

import pulumi
import pytest
import yaml

REPO = Path(__file__).resolve().parents[2]
INFRA = REPO / "infra"
FACTORY_SPEC = REPO / "environments" / "factory" / "host.yaml"
PROJECT = "runtime-cloud-infra"
SUBSCRIPTION = "00000000-0000-0000-0000-000000000001"
TENANT = "00000000-0000-0000-0000-00000000c0de"

if str(INFRA) not in sys.path:
    sys.path.insert(0, str(INFRA))

# The input that names each resource in ARM (its output `name`), by resource type.
NAME_INPUT = {
    "azure-native:resources:ResourceGroup": "resourceGroupName",
    "azure-native:storage:StorageAccount": "accountName",
    "azure-native:storage:BlobContainer": "containerName",
    "azure-native:storage:Table": "tableName",
    "azure-native:storage:Queue": "queueName",
    "azure-native:storage:BlobServiceProperties": "blobServicesName",
    "azure-native:storage:ManagementPolicy": "managementPolicyName",
    "azure-native:keyvault:Vault": "vaultName",
    "azure-native:keyvault:Key": "keyName",
    "azure-native:managedidentity:UserAssignedIdentity": "resourceName",
    "azure-native:operationalinsights:Workspace": "workspaceName",
    "azure-native:applicationinsights:Component": "resourceName",
    "azure-native:applicationinsights:Workbook": "resourceName",
    "azure-native:monitor:ActionGroup": "actionGroupName",
    "azure-native:monitor:ScheduledQueryRule": "ruleName",
    "azure-native:web:WebApp": "name",
    "azure-native:web:AppServicePlan": "name",
    "azure-native:app:ManagedEnvironment": "environmentName",
    "azure-native:app:Job": "jobName",
    "azure-native:app:ContainerApp": "containerAppName",
}


@dataclass(frozen=True)
class Declared:
    """One resource as the program declared it."""

    type: str
    name: str
    inputs: dict[str, Any]
    id: str
    outputs: dict[str, Any]


@dataclass
class Deployment:
    """Everything one run of the program declared, called and exported."""

    resources: list[Declared] = field(default_factory=list)
    calls: list[str] = field(default_factory=list)
    exports: dict[str, Any] = field(default_factory=dict)
    config: dict[str, str] = field(default_factory=dict)
    read_keys: set[str] = field(default_factory=set)

    def of_type(self, kind: str) -> list[Declared]:
        return [r for r in self.resources if r.type == f"azure-native:{kind}"]

    def one(self, kind: str, name: str | None = None) -> Declared:
        found = [r for r in self.of_type(kind) if name is None or r.name == name]
        assert len(found) == 1, f"expected one {kind} {name or ''}, found {[r.name for r in found]}"
        return found[0]

    def app_settings(self) -> dict[str, str]:
        app = self.one("web:WebApp")
        return {entry["name"]: entry["value"] for entry in app.inputs["siteConfig"]["appSettings"]}


class RecordingMocks(pulumi.runtime.Mocks):
    def __init__(self, deployment: Deployment) -> None:
        self.deployment = deployment

    def new_resource(self, args: pulumi.runtime.MockResourceArgs) -> tuple[str, dict[str, Any]]:
        inputs = dict(args.inputs)
        name = str(inputs.get(NAME_INPUT.get(args.typ, ""), args.name))
        resource_id = _resource_id(args.typ, name, inputs)
        outputs = {"name": name, **_computed(args.typ, name, inputs)}
        self.deployment.resources.append(Declared(args.typ, args.name, inputs, resource_id, outputs))
        return resource_id, outputs

    def call(self, args: pulumi.runtime.MockCallArgs) -> dict[str, Any]:
        self.deployment.calls.append(args.token)
        if args.token == "azure-native:authorization:getClientConfig":
            return {"subscriptionId": SUBSCRIPTION, "tenantId": TENANT, "clientId": "deployer", "objectId": "deployer"}
        raise AssertionError(f"unexpected invoke {args.token}")


# ARM's id shapes for the resources whose ids scope role assignments, so that "a role at a scope covers
# everything below it" holds here as in Azure (a container's id is below its account's, a key's below its vault's).
ARM_PATHS = {
    "azure-native:storage:StorageAccount": "Microsoft.Storage/storageAccounts/{name}",
    "azure-native:storage:BlobContainer": (
        "Microsoft.Storage/storageAccounts/{accountName}/blobServices/default/containers/{name}"
    ),
    "azure-native:storage:Table": "Microsoft.Storage/storageAccounts/{accountName}/tableServices/default/tables/{name}",
    "azure-native:storage:Queue": "Microsoft.Storage/storageAccounts/{accountName}/queueServices/default/queues/{name}",
    "azure-native:keyvault:Vault": "Microsoft.KeyVault/vaults/{name}",
    "azure-native:keyvault:Key": "Microsoft.KeyVault/vaults/{vaultName}/keys/{name}",
    "azure-native:applicationinsights:Component": "Microsoft.Insights/components/{name}",
    "azure-native:managedidentity:UserAssignedIdentity": "Microsoft.ManagedIdentity/userAssignedIdentities/{name}",
    "azure-native:app:ManagedEnvironment": "Microsoft.App/managedEnvironments/{name}",
    "azure-native:app:Job": "Microsoft.App/jobs/{name}",
    "azure-native:app:ContainerApp": "Microsoft.App/containerApps/{name}",
    "azure-native:web:WebApp": "Microsoft.Web/sites/{name}",
    "azure-native:operationalinsights:Workspace": "Microsoft.OperationalInsights/workspaces/{name}",
}


def _resource_id(kind: str, name: str, inputs: dict[str, Any]) -> str:
    if kind == "azure-native:resources:ResourceGroup":
        return f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{name}"
    group = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{inputs.get('resourceGroupName', 'rg')}"
    path = ARM_PATHS.get(kind, f"{kind}/{{name}}")
    return f"{group}/providers/{path.format(name=name, **{k: v for k, v in inputs.items() if k != 'name'})}"


def _computed(kind: str, name: str, inputs: dict[str, Any]) -> dict[str, Any]:
    """Outputs Azure computes that the program reads back (and outputs shaped unlike their inputs)."""
    if kind == "azure-native:storage:StorageAccount":
        return {
            "primaryEndpoints": {
                service: f"https://{name}.{service}.core.windows.net/"
                for service in ("blob", "queue", "table", "file", "dfs", "web")
            }
        }
    if kind == "azure-native:managedidentity:UserAssignedIdentity":
        return {
            "clientId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"client/{name}")),
            "principalId": str(uuid.uuid5(uuid.NAMESPACE_URL, f"principal/{name}")),
        }
    if kind == "azure-native:applicationinsights:Component":
        key = uuid.uuid5(uuid.NAMESPACE_URL, f"insights/{name}")
        return {
            "connectionString": f"InstrumentationKey={key};IngestionEndpoint="
            "https://westeurope-5.in.applicationinsights.azure.com/;"
            f"ApplicationId={key}"
        }
    if kind in ("azure-native:web:WebApp", "azure-native:app:Job", "azure-native:app:ContainerApp"):
        # ARM answers a list of user-assigned identities with a map keyed by their resource ids.
        identity = inputs.get("identity", {})
        assigned = {identity_id: {} for identity_id in identity.get("userAssignedIdentities", [])}
        answer: dict[str, Any] = {"identity": {**identity, "userAssignedIdentities": assigned}}
        if kind == "azure-native:web:WebApp":
            answer["defaultHostName"] = f"{name}.azurewebsites.net"
        return answer
    return {}


def run_program(stack: str, config: dict[str, str]) -> Deployment:
    """Run infra/'s program once with the mocked engine; return what it declared, read and exported."""
    from runtime_cloud_infra import deploy

    deployment = Deployment(config=dict(config))
    # Pulumi's mocks make their futures on the thread's current event loop; an earlier test's
    # asyncio.run() leaves the main thread with none, so each program run gets its own.
    asyncio.set_event_loop(asyncio.new_event_loop())
    pulumi.runtime.set_mocks(RecordingMocks(deployment), project=PROJECT, stack=stack, preview=False)
    pulumi.runtime.set_all_config(config)
    exported: dict[str, Any] = {}
    read_config = pulumi.Config.get

    def recording_get(self: pulumi.Config, key: str, *args: Any, **kwargs: Any) -> Any:
        deployment.read_keys.add(f"{self.name}:{key}")
        return read_config(self, key, *args, **kwargs)

    @pulumi.runtime.test
    def program() -> pulumi.Output[Any]:
        deploy()
        return pulumi.Output.all(**{name: pulumi.Output.from_input(value) for name, value in exported.items()}).apply(
            deployment.exports.update
        )

    try:
        with (
            mock.patch.object(pulumi, "export", lambda name, value: exported.__setitem__(name, value)),
            mock.patch.object(pulumi.Config, "get", recording_get),
        ):
            program()
    finally:
        pulumi.runtime.set_all_config({})
    return deployment


def stack_file_config(path: Path) -> dict[str, str]:
    """A stack file's configuration as Pulumi hands it to the program: structured values as JSON text."""
    values = yaml.safe_load(path.read_text(encoding="utf-8"))["config"]
    return {key: _as_config_text(value) for key, value in values.items()}


def _as_config_text(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return str(value)


def factory_config() -> dict[str, str]:
    """What the host's Pulumi runner sets on the stack when it applies environments/factory/host.yaml."""
    from shared.desired_state.api import EnvironmentSpecification
    from shared.iac.pulumi.workspace import stack_configuration
    from shared.platform.targets import ProvisioningTarget

    document = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    specification = EnvironmentSpecification.model_validate({**document, "tenant": "connectsoft-factory"})
    targets = json.loads(specification.pulumi.config["runtime-cloud-infra:targets"])  # type: ignore[union-attr]
    target = ProvisioningTarget.model_validate(next(t for t in targets if t["Id"] == specification.target))
    return {key: value.value for key, value in stack_configuration(specification, target).items()}


@pytest.fixture(scope="session")
def dev() -> Iterator[Deployment]:
    yield run_program("dev", stack_file_config(INFRA / "Pulumi.dev.yaml"))


@pytest.fixture(scope="session")
def factory() -> Iterator[Deployment]:
    yield run_program("factory", factory_config())


WARM_REPLICAS = 2


def warm_config() -> dict[str, str]:
    """The sample stack with warm runners and a shorter poll: what an installation that wants them sets."""
    config = stack_file_config(INFRA / "Pulumi.dev.yaml")
    config[f"{PROJECT}:runnerJobWarmReplicas"] = str(WARM_REPLICAS)
    config[f"{PROJECT}:runnerJobPollingIntervalSeconds"] = "2"
    return config


@pytest.fixture(scope="session")
def warm() -> Iterator[Deployment]:
    yield run_program("warm", warm_config())


@pytest.fixture(scope="session", params=["dev", "factory", "warm"])
def deployment(request: pytest.FixtureRequest) -> Deployment:
    """Both stacks, for the properties every stack must have."""
    return request.getfixturevalue(request.param)

"""The deployment grants each identity exactly the access matrix (tests/infra/access_matrix.py), no more.

Run under Pulumi's mocks (the engine and Azure are the edge of the world
here): every role assignment the program declares is read back as (principal,
role, scope), each identity's effective rights are computed (a role at a scope
covers everything below it) and compared with the matrix on every scope either
side names and on the resources that must stay out of the runner's reach.
"""

from __future__ import annotations

import json
from collections import defaultdict
from typing import Any

import pytest
from runtime_cloud_infra import runner_job
from runtime_cloud_infra.roles import BUILT_IN_ROLES, READ_ONLY_ROLES

from tests.infra import access_matrix as matrix
from tests.infra.conftest import INFRA, REPO, SUBSCRIPTION, Declared, Deployment, run_program, stack_file_config

Grants = dict[str, set[tuple[str, str]]]


def _role_name(assignment: Declared) -> str:
    guid = assignment.inputs["roleDefinitionId"].rsplit("/", 1)[-1]
    return next((name for name, known in BUILT_IN_ROLES.items() if known == guid), guid)


def _principals(deployment: Deployment) -> dict[str, str]:
    """Principal id -> the matrix's name for it."""
    found = {
        deployment.one("managedidentity:UserAssignedIdentity", f"{kind}-identity").outputs["principalId"]: kind
        for kind in (matrix.HOST, matrix.OBSERVER, matrix.RUNNER)
    }
    for named in matrix.NAMED_BY_THE_STACK:
        principal = matrix.named_principal(deployment, named)
        if principal:
            found[principal] = named
    return found


def declared_grants(deployment: Deployment) -> Grants:
    """(role, scope) of every role assignment, by identity; a principal outside the matrix fails."""
    principals = _principals(deployment)
    grants: Grants = defaultdict(set)
    for assignment in deployment.of_type("authorization:RoleAssignment"):
        principal = assignment.inputs["principalId"]
        assert principal in principals, f"{assignment.name} grants {principal}, who is not in the access matrix"
        grants[principals[principal]].add((_role_name(assignment), assignment.inputs["scope"]))
    return grants


def _guarded(deployment: Deployment) -> dict[str, str]:
    """What must stay out of the runner's reach, by name: the host's group and what it holds."""
    store = deployment.one("storage:StorageAccount", "host-store").id
    vault = deployment.one("keyvault:Vault").id
    catalogue = json.loads(deployment.config.get("runtime-cloud-infra:secrets", "[]"))
    guarded = {
        "the host's resource group": deployment.one("resources:ResourceGroup", "host-resource-group").id,
        "the host's store": store,
        "the receipts": f"{store}/blobServices/default/containers/receipts",
        "the backup account": deployment.one("storage:StorageAccount", "backup-store").id,
        "the vault": vault,
        "a secret outside the catalogue": f"{vault}/secrets/not-catalogued",
        "the function app": deployment.one("web:WebApp").id,
    }
    guarded.update({f"secret {entry['name']}": f"{vault}/secrets/{entry['name']}" for entry in catalogue})
    guarded.update(
        {
            f"the {kind} identity": deployment.one("managedidentity:UserAssignedIdentity", f"{kind}-identity").id
            for kind in (matrix.HOST, matrix.OBSERVER, matrix.RUNNER)
        }
    )
    return guarded


def reaching_guarded(deployment: Deployment, runner: set[tuple[str, str]]) -> list[str]:
    """Each runner grant whose scope is a guarded resource or above one (a role there covers it)."""
    return [
        f"{role} at {scope} covers {what}"
        for what, resource in _guarded(deployment).items()
        for role, scope in sorted(runner)
        if matrix.covers(scope, resource)
    ]


def differences(deployment: Deployment, granted: Grants) -> list[str]:
    """Where an identity's effective rights differ from the matrix's, on every scope either names."""
    found = []
    for identity in matrix.IDENTITIES:
        have, should = granted.get(identity, set()), matrix.expected(deployment, identity)
        probes = {scope for _, scope in have | should} | set(_guarded(deployment).values())
        probes |= {matrix.store_child(deployment, "table", "ProvisioningRuns")}
        for probe in sorted(probes):
            extra = matrix.rights(have, probe) - matrix.rights(should, probe)
            missing = matrix.rights(should, probe) - matrix.rights(have, probe)
            if extra or missing:
                found.append(f"{identity} on {probe}: extra {sorted(extra)}, missing {sorted(missing)}")
    return found


def test_every_identity_has_exactly_the_access_matrix_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    assert differences(deployment, declared_grants(deployment)) == []


def test_an_assignment_that_widens_a_right_fails_the_comparison_with_mocked_pulumi_engine(dev: Deployment) -> None:
    store = dev.one("storage:StorageAccount", "host-store").id
    widened = declared_grants(dev)
    widened[matrix.RUNNER].add(("Storage Blob Data Reader", store))  # the whole account instead of one container

    found = differences(dev, widened)

    assert any("runner on" in line and "receipts" in line for line in found), found


def test_the_app_and_the_job_share_no_identity_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    ids = {
        kind: deployment.one("managedidentity:UserAssignedIdentity", f"{kind}-identity").id
        for kind in (matrix.HOST, matrix.OBSERVER, matrix.RUNNER)
    }
    app = deployment.one("web:WebApp").inputs
    job = deployment.one("app:Job").inputs
    scale_rules = job["configuration"]["eventTriggerConfig"]["scale"]["rules"]
    registries = job["configuration"].get("registries") or []

    assert set(app["identity"]["userAssignedIdentities"]) == {ids["host"], ids["observer"]}
    assert set(job["identity"]["userAssignedIdentities"]) == {ids["runner"]}
    assert {rule["identity"] for rule in scale_rules} == {ids["runner"]}
    assert {registry["identity"] for registry in registries} <= {ids["runner"]}
    for warm in deployment.of_type("app:ContainerApp"):  # warm runners run tenants' programs too: runner only
        assert set(warm.inputs["identity"]["userAssignedIdentities"]) == {ids["runner"]}, warm.name
        assert {r["identity"] for r in warm.inputs["configuration"].get("registries") or []} <= {ids["runner"]}


def test_warm_runners_carry_the_runner_identity_only_with_mocked_pulumi_engine(warm: Deployment) -> None:
    runner = warm.one("managedidentity:UserAssignedIdentity", "runner-identity")
    (app,) = warm.of_type("app:ContainerApp")
    (container,) = app.inputs["template"]["containers"]
    environment = {entry["name"]: entry["value"] for entry in container["env"]}

    assert set(app.inputs["identity"]["userAssignedIdentities"]) == {runner.id}
    assert environment["AZURE_CLIENT_ID"] == environment["AzureWebJobsStorage__clientId"] == runner.outputs["clientId"]
    other = {i.outputs["clientId"] for i in warm.of_type("managedidentity:UserAssignedIdentity")} - {
        runner.outputs["clientId"]
    }
    assert not other & set(map(str, environment.values())), "no other identity's client id reaches a warm runner"
    assert "ingress" not in app.inputs["configuration"], "a warm runner listens on nothing"


def test_no_runner_role_reaches_the_host_group_store_receipts_or_secrets_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    """No scope equal to or above the host's group, its store, the receipts, a secret, an identity or the app:
    not even a control-plane role (self-hosting manages the stack's other group only)."""
    assert reaching_guarded(deployment, declared_grants(deployment)[matrix.RUNNER]) == []


def test_the_host_group_is_not_the_one_self_hosting_manages_with_mocked_pulumi_engine(factory: Deployment) -> None:
    managed = factory.one("resources:ResourceGroup", "resource-group").id
    runner = declared_grants(factory)[matrix.RUNNER]

    assert ("Contributor", managed) in runner, "the factory stack manages the stack's resource group"
    for kind in ("storage:StorageAccount", "keyvault:Vault", "managedidentity:UserAssignedIdentity", "web:WebApp"):
        for resource in factory.of_type(kind):
            assert not matrix.covers(managed, resource.id), f"{resource.name} is in the group the runner manages"


def test_a_runner_role_on_the_host_group_fails_both_checks_with_mocked_pulumi_engine(factory: Deployment) -> None:
    host_group = factory.one("resources:ResourceGroup", "host-resource-group").id
    widened = declared_grants(factory)
    widened[matrix.RUNNER].add(("Reader", host_group))  # read-only, control plane: still refused

    assert reaching_guarded(factory, widened[matrix.RUNNER])
    assert any(line.startswith(f"runner on {host_group}") for line in differences(factory, widened))


@pytest.mark.parametrize(
    "scope", [f"/subscriptions/{SUBSCRIPTION}", "{group}", "{group}/providers/Microsoft.Web/sites/x"]
)
def test_a_runner_role_at_in_or_above_the_host_group_is_refused_with_mocked_pulumi_engine(scope: str) -> None:
    config = stack_file_config(INFRA / "Pulumi.dev.yaml")
    group = f"/subscriptions/{SUBSCRIPTION}/resourceGroups/{config['runtime-cloud-infra:hostResourceGroupName']}"
    entries = [{"scope": scope.format(group=group), "role": "Reader"}]

    with pytest.raises(Exception, match=r"runnerRoles\[0\]\.scope .* covers the host's own resource group or is in it"):
        run_program("dev", {**config, "runtime-cloud-infra:runnerRoles": json.dumps(entries)})


def test_the_runner_cannot_grant_itself_a_role_with_mocked_pulumi_engine(factory: Deployment) -> None:
    runner = factory.one("managedidentity:UserAssignedIdentity", "runner-identity").outputs["principalId"]
    host = factory.one("managedidentity:UserAssignedIdentity", "host-identity").outputs["principalId"]
    (administration,) = [
        a
        for a in factory.of_type("authorization:RoleAssignment")
        if a.inputs["principalId"] == runner and _role_name(a) == "Role Based Access Control Administrator"
    ]
    condition = administration.inputs["condition"]

    assert "roleAssignments:PrincipalId] ForAnyOfAnyValues:GuidEquals" in condition
    assert host in condition and runner not in condition
    assert BUILT_IN_ROLES["Contributor"] not in condition, "no grantee may get the runner's own roles"


def test_the_observer_only_reads_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    observer = declared_grants(deployment)[matrix.OBSERVER]

    assert observer, "the sample stacks give the runner roles, so the observer reads there"
    assert {role for role, _ in observer} <= set(READ_ONLY_ROLES)


def _job_environment(deployment: Deployment) -> dict[str, Any]:
    (container,) = deployment.one("app:Job").inputs["template"]["containers"]
    return {entry["name"]: entry["value"] for entry in container["env"]}


def test_the_job_exports_telemetry_as_the_runner_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    environment = _job_environment(deployment)
    insights = deployment.one("applicationinsights:Component")
    runner = deployment.one("managedidentity:UserAssignedIdentity", "runner-identity").outputs["clientId"]

    assert environment["APPLICATIONINSIGHTS_CONNECTION_STRING"] == insights.outputs["connectionString"]
    assert environment["APPLICATIONINSIGHTS_AUTHENTICATION_STRING"] == f"Authorization=AAD;ClientId={runner}"
    assert ("Monitoring Metrics Publisher", insights.id) in declared_grants(deployment)[matrix.RUNNER]


def test_the_jobs_environment_sends_its_logs_to_the_workspace_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    environment = deployment.one("app:ManagedEnvironment")
    workspace = deployment.one("operationalinsights:Workspace")
    (diagnostics,) = [
        d for d in deployment.of_type("monitor:DiagnosticSetting") if d.inputs["resourceUri"] == environment.id
    ]

    assert environment.inputs["appLogsConfiguration"] == {"destination": "azure-monitor"}  # no workspace key
    assert diagnostics.inputs["workspaceId"] == workspace.id
    assert diagnostics.inputs["logs"] == [{"enabled": True, "categoryGroup": "allLogs"}]


def test_the_exchange_is_the_one_the_job_is_written_for() -> None:
    from shared.iac.jobs import access

    assert set(runner_job.RUNNER_JOB_TABLES) == access.RUNNER_JOB_TABLES
    assert set(runner_job.RUNNER_JOB_CONTAINERS) == access.RUNNER_JOB_CONTAINERS
    assert set(runner_job.RUNNER_JOB_QUEUES) == access.RUNNER_JOB_QUEUES
    in_matrix = {
        row.resource
        for row in matrix.MATRIX
        if row.identity == matrix.RUNNER and row.resource.split(":", 1)[0] in ("table", "container", "queue")
    }
    assert in_matrix == {
        *(f"table:{name}" for name in access.RUNNER_JOB_TABLES),
        *(f"container:{name}" for name in access.RUNNER_JOB_CONTAINERS),
        *(f"queue:{name}" for name in access.RUNNER_JOB_QUEUES),
    }


def test_the_deploying_page_shows_the_access_matrix() -> None:
    page = (REPO / "docs" / "azure.md").read_text(encoding="utf-8")

    assert matrix.markdown() in page, "docs/azure.md (Deploying) must show tests/infra/access_matrix.py's table"


# What the stack's group (the one a self-hosting runner manages) may hold: nothing that holds the host's data,
# secrets or identities, nor the app that runs as them.
STACK_GROUP_KINDS = {
    "azure-native:app:ManagedEnvironment",
    "azure-native:app:Job",
    "azure-native:app:ContainerApp",
    "azure-native:operationalinsights:Workspace",
    "azure-native:applicationinsights:Component",
    "azure-native:applicationinsights:Workbook",
    "azure-native:monitor:ActionGroup",
    "azure-native:monitor:ScheduledQueryRule",
}


def test_the_stack_group_holds_only_jobs_and_monitoring_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    stack_group = deployment.one("resources:ResourceGroup", "resource-group").inputs["resourceGroupName"]
    host_group = deployment.one("resources:ResourceGroup", "host-resource-group").inputs["resourceGroupName"]
    placed = {
        (resource.type, resource.inputs["resourceGroupName"])
        for resource in deployment.resources
        if "resourceGroupName" in resource.inputs and resource.type != "azure-native:resources:ResourceGroup"
    }

    in_stack_group = {kind for kind, group in placed if group == stack_group}
    warm = {"azure-native:app:ContainerApp"} if deployment.of_type("app:ContainerApp") else set()

    assert in_stack_group == STACK_GROUP_KINDS - {"azure-native:app:ContainerApp"} | warm  # warm runners when asked for
    assert {group for kind, group in placed if kind not in STACK_GROUP_KINDS} == {host_group}

"""Who may do what: the host identity on its own store only, the runner identity where the stack says."""

from __future__ import annotations

import json

from runtime_cloud_infra.roles import BUILT_IN_ROLES, PRIVILEGED_ROLES

from tests.infra.conftest import Declared, Deployment

HOST_STORE_ROLES = {"Storage Blob Data Owner", "Storage Queue Data Contributor", "Storage Table Data Contributor"}


def _role_name(assignment: Declared) -> str:
    guid = assignment.inputs["roleDefinitionId"].rsplit("/", 1)[-1]
    return next((name for name, known in BUILT_IN_ROLES.items() if known == guid), guid)


def _identity(deployment: Deployment, kind: str) -> Declared:
    return deployment.one("managedidentity:UserAssignedIdentity", f"{kind}-identity")


def _grants_to(deployment: Deployment, identity: Declared) -> list[Declared]:
    principal = identity.outputs["principalId"]
    return [a for a in deployment.of_type("authorization:RoleAssignment") if a.inputs["principalId"] == principal]


def test_host_identity_has_data_roles_on_its_own_store_only_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    host = _identity(deployment, "host")
    store = deployment.one("storage:StorageAccount", "host-store")
    vault = deployment.one("keyvault:Vault")
    insights = deployment.one("applicationinsights:Component")
    state_key = deployment.one("keyvault:Key")
    backup = deployment.one("storage:StorageAccount", "backup-store")

    grants = {(_role_name(a), a.inputs["scope"]) for a in _grants_to(deployment, host)}

    assert grants == {
        *((role, store.id) for role in HOST_STORE_ROLES),
        ("Monitoring Metrics Publisher", insights.id),
        ("Key Vault Secrets User", vault.id),
        ("Key Vault Crypto User", state_key.id),
        ("Storage Blob Data Contributor", backup.id),  # its exports, in an account of their own
    }
    assert all(a.inputs["principalType"] == "ServicePrincipal" for a in _grants_to(deployment, host))


def test_runner_roles_are_exactly_the_stack_configuration_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    runner = _identity(deployment, "runner")
    group = deployment.one("resources:ResourceGroup")
    configured = json.loads(deployment.config["runtime-cloud-infra:runnerRoles"])
    expected = {
        (entry["role"], group.id if entry["scope"] == "resource-group" else entry["scope"]) for entry in configured
    }

    state = deployment.one("storage:BlobContainer", "pulumi-state")
    state_key = deployment.one("keyvault:Key")
    # The runner job reaches the Pulumi state (azblob backend) and its secrets key with the runner identity.
    expected |= {("Storage Blob Data Contributor", state.id), ("Key Vault Crypto User", state_key.id)}

    grants = _grants_to(deployment, runner)

    assert {(_role_name(a), a.inputs["scope"]) for a in grants} == expected
    store = deployment.one("storage:StorageAccount", "host-store")
    others = [a for a in grants if a.inputs["scope"].startswith(store.id) and a.inputs["scope"] != state.id]
    assert not others, "the runner reads no host data but the Pulumi state"


def test_runner_role_administration_is_constrained_with_mocked_pulumi_engine(factory: Deployment) -> None:
    runner = _identity(factory, "runner")
    administration = [
        a for a in _grants_to(factory, runner) if _role_name(a) == "Role Based Access Control Administrator"
    ]

    assert len(administration) == 1, "the factory stack lets the runner keep its own role assignments"
    condition = administration[0].inputs["condition"]
    assert administration[0].inputs["conditionVersion"] == "2.0"
    assert "Microsoft.Authorization/roleAssignments/write" in condition
    assert "Microsoft.Authorization/roleAssignments/delete" in condition
    for role in PRIVILEGED_ROLES:
        assert BUILT_IN_ROLES[role] not in condition, f"the runner could grant {role}"
    for role in HOST_STORE_ROLES:
        assert BUILT_IN_ROLES[role] in condition


def test_function_app_carries_both_identities_and_resolves_references_as_the_host_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    app = deployment.one("web:WebApp").inputs
    host, runner = _identity(deployment, "host"), _identity(deployment, "runner")

    assert app["identity"]["type"] == "UserAssigned"
    assert set(app["identity"]["userAssignedIdentities"]) == {host.id, runner.id}
    assert app["keyVaultReferenceIdentity"] == host.id


def test_operators_set_secret_values_and_keep_the_state_and_nobody_else_is_granted_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    operator = deployment.config["runtime-cloud-infra:operatorPrincipalId"]
    grants = [a for a in deployment.of_type("authorization:RoleAssignment") if a.inputs["principalId"] == operator]
    state = deployment.one("storage:BlobContainer", "pulumi-state")

    assert {(_role_name(a), a.inputs["scope"]) for a in grants} == {
        ("Key Vault Secrets Officer", deployment.one("keyvault:Vault").id),
        ("Storage Blob Data Contributor", state.id),
        ("Key Vault Crypto User", deployment.one("keyvault:Key").id),
    }
    assert all(a.inputs["principalType"] == "Group" for a in grants)
    identities = {_identity(deployment, kind).outputs["principalId"] for kind in ("host", "runner")}
    principals = {a.inputs["principalId"] for a in deployment.of_type("authorization:RoleAssignment")}
    assert principals == identities | {operator}

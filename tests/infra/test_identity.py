"""Identity details the access matrix (test_access_matrix.py) does not show: scopes, conditions, principal types."""

from __future__ import annotations

import json
import re

from runtime_cloud_infra.roles import BUILT_IN_ROLES, PRIVILEGED_ROLES, READ_ONLY_ROLES

from tests.infra import access_matrix as matrix
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


def test_host_identity_resolves_each_catalogued_secret_never_the_vault_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    host = _identity(deployment, "host")
    vault = deployment.one("keyvault:Vault")
    catalogue = [entry["name"] for entry in json.loads(deployment.config["runtime-cloud-infra:secrets"])]

    secrets = {a.inputs["scope"] for a in _grants_to(deployment, host) if _role_name(a) == "Key Vault Secrets User"}

    assert secrets == {f"{vault.id}/secrets/{name}" for name in catalogue}
    assert not [
        a for a in _grants_to(deployment, host) if a.inputs["scope"] in (vault.id, deployment.one("keyvault:Key").id)
    ]
    assert all(a.inputs["principalType"] == "ServicePrincipal" for a in _grants_to(deployment, host))


def test_observer_reads_where_the_runner_may_change_things_with_mocked_pulumi_engine(dev: Deployment) -> None:
    observer = _identity(dev, "observer")
    group = "/subscriptions/00000000-0000-0000-0000-000000000001/resourceGroups/rg-targets-dev"
    account = f"{group}/providers/Microsoft.Storage/storageAccounts/rtclouddevtarget01"  # infra/Pulumi.dev.yaml

    grants = {(_role_name(a), a.inputs["scope"]) for a in _grants_to(dev, observer)}

    # Reader on the account is left out: Reader on its resource group already covers it.
    assert grants == {
        ("Reader", group),
        ("Storage Blob Data Reader", account),
        ("Storage Queue Data Reader", account),
        ("Storage Table Data Reader", account),
    }


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
    granted_roles = set(re.findall(r"GuidEquals \{([^}]*)\}", condition)[0].split(", "))
    # Only what the host and the observer hold outside the host's group: telemetry and read-only roles.
    assert granted_roles == {
        BUILT_IN_ROLES[role] for role in ("Monitoring Metrics Publisher", "Reader", *READ_ONLY_ROLES)
    }
    for role in (*PRIVILEGED_ROLES, *HOST_STORE_ROLES, "Key Vault Secrets User", "Key Vault Secrets Officer"):
        assert BUILT_IN_ROLES[role] not in condition, f"the runner could grant {role}"
    for kind in ("host", "observer"):
        assert _identity(factory, kind).outputs["principalId"] in condition
    assert runner.outputs["principalId"] not in condition, "the runner could grant itself"
    operators = factory.config["runtime-cloud-infra:operatorPrincipalId"]
    assert operators not in condition, "the operators' roles are in the host's group, where the runner has none"


def test_the_function_app_resolves_references_as_the_host_with_mocked_pulumi_engine(deployment: Deployment) -> None:
    app = deployment.one("web:WebApp").inputs

    assert app["identity"]["type"] == "UserAssigned"
    assert app["keyVaultReferenceIdentity"] == _identity(deployment, "host").id


def test_operators_set_secret_values_and_keep_the_state_and_nobody_else_is_granted_with_mocked_pulumi_engine(
    deployment: Deployment,
) -> None:
    operator = deployment.config["runtime-cloud-infra:operatorPrincipalId"]
    grants = [a for a in deployment.of_type("authorization:RoleAssignment") if a.inputs["principalId"] == operator]

    assert all(a.inputs["principalType"] == "Group" for a in grants)
    identities = {_identity(deployment, kind).outputs["principalId"] for kind in ("host", "observer", "runner")}
    named = {matrix.named_principal(deployment, who) for who in matrix.NAMED_BY_THE_STACK} - {None}
    principals = {a.inputs["principalId"] for a in deployment.of_type("authorization:RoleAssignment")}
    assert operator in named
    assert principals == identities | named, "only the program's identities and the principals the stack names"

"""Azure built-in roles this program assigns, by name, and role assignment helpers.

Role definition ids of built-in roles are the same in every subscription
(``/subscriptions/{id}/providers/Microsoft.Authorization/roleDefinitions/{guid}``).
"""

from __future__ import annotations

import re
from collections.abc import Sequence

import pulumi
from pulumi_azure_native import authorization

BUILT_IN_ROLES: dict[str, str] = {
    "Reader": "acdd72a7-3385-48ef-bd42-f606fba81ae7",
    "Contributor": "b24988ac-6180-42a0-ab88-20f7382dd24c",
    "Owner": "8e3af657-a8ff-443c-a75c-2fe8c4bcb635",
    "User Access Administrator": "18d7d88d-d35e-4fb5-a5c3-7773c20a72d9",
    "Role Based Access Control Administrator": "f58310d9-a9f6-439a-9e8d-f62e7b41a168",
    "Storage Account Contributor": "17d1049b-9a84-46fb-8f53-869881c3d3ab",
    "Storage Blob Data Owner": "b7e6dc6d-f1e8-4753-8033-0f276bb0955b",
    "Storage Blob Data Contributor": "ba92f5b4-2d11-453d-a403-e96b0029c9fe",
    "Storage Blob Data Reader": "2a2b9908-6ea1-4ae2-8e65-a410df84e7d1",
    "Storage Queue Data Contributor": "974c5e8b-45b9-4653-ba55-5f855dd0fb88",
    "Storage Queue Data Reader": "19e7f393-937e-4f77-808e-94535e297925",
    "Storage Queue Data Message Processor": "8a0f0c08-91a1-4084-bc3d-661d67233fed",
    "Storage Queue Data Message Sender": "c6a89b2d-59bc-44d0-9896-0f6e12d7b80a",
    "Storage Table Data Contributor": "0a9a7e1f-b9d0-4cc4-a60d-0319b160aaa3",
    "Storage Table Data Reader": "76199698-9eea-4c19-bc75-cec21354c6b6",
    "Monitoring Metrics Publisher": "3913510d-42f4-4e42-8a64-420c390055eb",
    "Key Vault Secrets User": "4633458b-17de-408a-b874-0445c86b69e6",
    "Key Vault Secrets Officer": "b86a8fe4-44ce-4948-aee5-eccb2c155cd7",
    "Key Vault Crypto User": "12338af0-0e69-4776-bea7-57ae8d297424",
}
# Roles that only read: the observer identity holds nothing else.
READ_ONLY_ROLES = ("Reader", "Storage Blob Data Reader", "Storage Queue Data Reader", "Storage Table Data Reader")
# Roles that can grant access or take ownership: never delegated to the runner through its own
# constrained RBAC administration (see constrained_delegation).
PRIVILEGED_ROLES = ("Owner", "User Access Administrator", "Role Based Access Control Administrator")

_GUID = re.compile(r"[0-9a-fA-F]{8}-([0-9a-fA-F]{4}-){3}[0-9a-fA-F]{12}")


def known_role(name: str) -> bool:
    return name in BUILT_IN_ROLES


def role_guid(role: str) -> str:
    """The role definition GUID of a built-in role name, or the GUID itself."""
    if role in BUILT_IN_ROLES:
        return BUILT_IN_ROLES[role]
    if _GUID.fullmatch(role):
        return role.lower()
    raise ValueError(f"unknown role {role!r}")


def role_definition_id(subscription_id: pulumi.Input[str], role: str) -> pulumi.Output[str]:
    return pulumi.Output.concat(
        "/subscriptions/", subscription_id, "/providers/Microsoft.Authorization/roleDefinitions/", role_guid(role)
    )


def constrained_delegation(assignable: list[str], principals: Sequence[pulumi.Input[str]]) -> pulumi.Output[str]:
    """An ABAC condition (version 2.0): role assignments may be written and deleted only for ``assignable``
    roles and only for ``principals``.

    This is how Azure lets a principal manage role assignments without being able to grant itself,
    or anyone, a role outside the list ("constrained delegation"); leaving the delegate out of
    ``principals`` keeps it from granting anything to itself."""
    guids = "{" + ", ".join(sorted({role_guid(role) for role in assignable})) + "}"
    role_of = "Microsoft.Authorization/roleAssignments:RoleDefinitionId"
    principal_of = "Microsoft.Authorization/roleAssignments:PrincipalId"

    def condition(ids: list[str]) -> str:
        who = "{" + ", ".join(sorted(set(ids))) + "}"
        return (
            "((!(ActionMatches{'Microsoft.Authorization/roleAssignments/write'})) OR "
            f"(@Request[{role_of}] ForAnyOfAnyValues:GuidEquals {guids}"
            f" AND @Request[{principal_of}] ForAnyOfAnyValues:GuidEquals {who}))"
            " AND "
            "((!(ActionMatches{'Microsoft.Authorization/roleAssignments/delete'})) OR "
            f"(@Resource[{role_of}] ForAnyOfAnyValues:GuidEquals {guids}"
            f" AND @Resource[{principal_of}] ForAnyOfAnyValues:GuidEquals {who}))"
        )

    return pulumi.Output.all(*principals).apply(condition)


def assign(
    name: str,
    *,
    scope: pulumi.Input[str],
    principal_id: pulumi.Input[str],
    role: str,
    subscription_id: pulumi.Input[str],
    description: str,
    condition: pulumi.Input[str] | None = None,
    principal_type: str = "ServicePrincipal",
    opts: pulumi.ResourceOptions | None = None,
) -> authorization.RoleAssignment:
    """One role assignment. ``principal_type`` is given so that a new identity's assignment does not
    fail while Entra ID is still replicating it."""
    return authorization.RoleAssignment(
        name,
        scope=scope,
        principal_id=principal_id,
        principal_type=principal_type,
        role_definition_id=role_definition_id(subscription_id, role),
        description=description,
        condition=condition,
        condition_version="2.0" if condition else None,
        opts=opts,
    )

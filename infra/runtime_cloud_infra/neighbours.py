"""The neighbours that send the host messages, and the one queue of its store each may write.

DeliveryHost promotes through the host store's ``promotions`` queue, and ControlPlaneApi, while it is
the environments' authority, approves production runs through its ``approvals`` queue
(docs/neighbours.md). The host takes a message on either queue as that neighbour's word (an approval
names its approver), so the only thing that decides who may say it is who may write the queue: that
neighbour's identity alone, with ``Storage Queue Data Message Sender`` (add a message; never read,
peek, update or delete one) scoped to its one queue, for the Entra object id the stack names
(``deliveryPrincipalId``, ``controlPlanePrincipalId``). A stack that names neither grants nothing:
then only the host's own identity can write those queues.

The queue names are the app's queue triggers' (functions/provisioning.py; ``tests/infra`` compares
them). A role assignment needs its scope to exist, so the program declares each granted queue; the host
also creates it at start when missing, so on a stack whose host already ran, ``pulumi import`` it first
(docs/azure.md, Deploying).
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
from pulumi_azure_native import authorization, storage

from runtime_cloud_infra.roles import assign
from runtime_cloud_infra.settings import StackSettings

SENDER_ROLE = "Storage Queue Data Message Sender"


@dataclass(frozen=True)
class Neighbour:
    name: str  # as the access matrix and the resources' names say it
    queue: str  # the one queue of the host's store it may send to
    what: str  # what it sends there


DELIVERY = Neighbour("delivery", "promotions", "promotions of desired state")
CONTROL_PLANE = Neighbour("control-plane", "approvals", "production approvals, while it is the environments' authority")
NEIGHBOURS = (DELIVERY, CONTROL_PLANE)


def principals(settings: StackSettings) -> dict[Neighbour, str]:
    """The neighbours this stack names, with their Entra object ids."""
    named = {DELIVERY: settings.delivery_principal_id, CONTROL_PLANE: settings.control_plane_principal_id}
    return {neighbour: principal for neighbour, principal in named.items() if principal is not None}


def grant_neighbours(
    settings: StackSettings,
    resource_group: pulumi.Input[str],
    account: storage.StorageAccount,
    subscription: pulumi.Input[str],
) -> list[pulumi.Resource]:
    """Each named neighbour's queue, and its right to send to that queue and nothing else."""
    declared: list[pulumi.Resource] = []
    for neighbour, principal in principals(settings).items():
        queue = storage.Queue(
            f"neighbour-queue-{neighbour.queue}",
            account_name=account.name,
            resource_group_name=resource_group,
            queue_name=neighbour.queue,
        )
        declared += [queue, _sender(neighbour, principal, account, queue, subscription)]
    return declared


def _sender(
    neighbour: Neighbour,
    principal: str,
    account: storage.StorageAccount,
    queue: storage.Queue,
    subscription: pulumi.Input[str],
) -> authorization.RoleAssignment:
    return assign(
        f"{neighbour.name}-sends-{neighbour.queue}",
        scope=pulumi.Output.concat(account.id, "/queueServices/default/queues/", neighbour.queue),
        principal_id=principal,
        role=SENDER_ROLE,
        subscription_id=subscription,
        description=f"{neighbour.name}: sends {neighbour.what} to the host's {neighbour.queue} queue, only",
        opts=pulumi.ResourceOptions(depends_on=[queue]),
    )

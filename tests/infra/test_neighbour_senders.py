"""The neighbours that send the host messages may write their one queue and nothing else
(runtime_cloud_infra/neighbours.py; docs/azure.md, Deploying: who may do what).

Run under Pulumi's mocks (the engine and Azure are the edge of the world here): these are the role
assignments and queues the program would ask Azure Resource Manager for. That Azure enforces
Storage Queue Data Message Sender as "add a message, nothing else" is Azure's documented role, not
checked here.
"""

from __future__ import annotations

import pytest
from runtime_cloud_infra import neighbours

from shared.platform.storage.resources import QUEUES
from shared.wiring.provisioning import MANIFEST
from tests.infra import access_matrix as matrix
from tests.infra.conftest import INFRA, PROJECT, Deployment, run_program, stack_file_config
from tests.infra.test_access_matrix import declared_grants

SENDER = "Storage Queue Data Message Sender"


def _queue(deployment: Deployment, name: str) -> str:
    return matrix.store_child(deployment, "queue", name)


@pytest.mark.parametrize(
    "identity, own, other",
    [(matrix.DELIVERY, "promotions", "approvals"), (matrix.CONTROL_PLANE, "approvals", "promotions")],
)
def test_a_neighbour_sends_to_its_queue_and_reaches_nothing_else_with_mocked_pulumi_engine(
    dev: Deployment, identity: str, own: str, other: str
) -> None:
    grants = declared_grants(dev)[identity]
    store = dev.one("storage:StorageAccount", "host-store").id

    assert grants == {(SENDER, _queue(dev, own))}
    assert matrix.rights(grants, _queue(dev, other)) == set()
    assert matrix.rights(grants, store) == set(), "nothing on the account: no other queue, table or blob"
    assert matrix.rights(grants, matrix.store_child(dev, "table", "ProvisioningRuns")) == set()


def test_each_granted_queue_is_declared_before_its_grant_with_mocked_pulumi_engine(dev: Deployment) -> None:
    for neighbour in neighbours.NEIGHBOURS:
        queue = dev.one("storage:Queue", f"neighbour-queue-{neighbour.queue}")
        (grant,) = [a for a in dev.of_type("authorization:RoleAssignment") if a.name.startswith(neighbour.name)]

        assert queue.inputs["queueName"] == neighbour.queue
        assert queue.id == grant.inputs["scope"]
        assert grant.inputs["principalType"] == "ServicePrincipal"


def test_a_stack_that_names_no_neighbour_leaves_their_queues_to_the_host_with_mocked_pulumi_engine() -> None:
    config = stack_file_config(INFRA / "Pulumi.dev.yaml")
    for key in ("deliveryPrincipalId", "controlPlanePrincipalId"):
        config.pop(f"{PROJECT}:{key}")

    deployment = run_program("no-neighbours", config)
    grants = declared_grants(deployment)

    for name in ("promotions", "approvals"):
        writers = {who for who, held in grants.items() if matrix.rights(held, _queue(deployment, name))}
        assert writers == {matrix.HOST}, name
    assert not [queue for queue in deployment.of_type("storage:Queue") if queue.name.startswith("neighbour-")]


def test_a_neighbour_principal_that_is_not_an_object_id_is_refused_with_mocked_pulumi_engine() -> None:
    config = {**stack_file_config(INFRA / "Pulumi.dev.yaml"), f"{PROJECT}:controlPlanePrincipalId": "control-plane"}

    with pytest.raises(Exception, match=r"controlPlanePrincipalId must be an Entra object id"):
        run_program("bad-neighbour", config)


def test_the_neighbours_queues_are_the_ones_the_app_reads() -> None:
    queues = {neighbour.queue for neighbour in neighbours.NEIGHBOURS}

    assert queues == set(MANIFEST.inbound_queues)
    assert queues <= set(QUEUES)

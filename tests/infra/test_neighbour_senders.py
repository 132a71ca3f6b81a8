"""The neighbours that send the host messages may write their one queue and nothing else
(runtime_cloud_infra/neighbours.py; docs/azure.md, Deploying: who may do what).

Run under Pulumi's mocks (the engine and Azure are the edge of the world here): these are the role
assignments and queues the program would ask Azure Resource Manager for. That Azure enforces
Storage Queue Data Message Sender as "add a message, nothing else" is Azure's documented role, not
checked here.
"""

from __future__ import annotations

import json

import pytest
from runtime_cloud_infra import neighbours

from shared.platform.storage.resources import QUEUES
from shared.wiring.provisioning import MANIFEST
from tests.infra import access_matrix as matrix
from tests.infra.conftest import INFRA, PROJECT, Deployment, run_program, stack_file_config
from tests.infra.test_access_matrix import declared_grants, differences

SENDER = "Storage Queue Data Message Sender"
CONTROL_PLANE_PRINCIPAL = "00000000-0000-0000-0000-00000000c0a1"


def _queue(deployment: Deployment, name: str) -> str:
    return matrix.store_child(deployment, "queue", name)


def control_plane_config(**host: str) -> dict[str, str]:
    """The sample stack with ControlPlaneApi named; ``host``: settings over the sample's host settings."""
    config = stack_file_config(INFRA / "Pulumi.dev.yaml")
    settings = json.loads(config[f"{PROJECT}:hostSettings"])
    config[f"{PROJECT}:hostSettings"] = json.dumps({**settings, **host})
    config[f"{PROJECT}:controlPlanePrincipalId"] = CONTROL_PLANE_PRINCIPAL
    return config


@pytest.fixture(scope="module")
def authority() -> Deployment:
    """A stack whose host takes its environments, and so its approvals, from ControlPlaneApi."""
    return run_program(
        "authority",
        control_plane_config(
            RuntimeCloud__Environments__Source="control-plane",
            RuntimeCloud__ControlPlane__BaseUrl="https://control-plane.example.com",
        ),
    )


def test_the_stack_that_names_both_neighbours_has_exactly_the_access_matrix_with_mocked_pulumi_engine(
    authority: Deployment,
) -> None:
    assert differences(authority, declared_grants(authority)) == []


@pytest.mark.parametrize(
    "identity, own, other",
    [(matrix.DELIVERY, "promotions", "approvals"), (matrix.CONTROL_PLANE, "approvals", "promotions")],
)
def test_a_neighbour_sends_to_its_queue_and_reaches_nothing_else_with_mocked_pulumi_engine(
    authority: Deployment, identity: str, own: str, other: str
) -> None:
    grants = declared_grants(authority)[identity]
    store = authority.one("storage:StorageAccount", "host-store").id

    assert grants == {(SENDER, _queue(authority, own))}
    assert matrix.rights(grants, _queue(authority, other)) == set()
    assert matrix.rights(grants, store) == set(), "nothing on the account: no other queue, table or blob"
    assert matrix.rights(grants, matrix.store_child(authority, "table", "ProvisioningRuns")) == set()


def test_each_granted_queue_is_declared_before_its_grant_with_mocked_pulumi_engine(authority: Deployment) -> None:
    for neighbour in neighbours.NEIGHBOURS:
        queue = authority.one("storage:Queue", f"neighbour-queue-{neighbour.queue}")
        grants = authority.of_type("authorization:RoleAssignment")
        (grant,) = [a for a in grants if a.name.startswith(neighbour.name)]

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
    config = {**stack_file_config(INFRA / "Pulumi.dev.yaml"), f"{PROJECT}:deliveryPrincipalId": "delivery"}

    with pytest.raises(Exception, match=r"deliveryPrincipalId must be an Entra object id"):
        run_program("bad-neighbour", config)


def test_control_plane_s_identity_where_it_is_not_the_authority_is_refused_with_mocked_pulumi_engine() -> None:
    """Such a host refuses every approval on the queue: the right to send them would serve nothing."""
    with pytest.raises(Exception, match=r"controlPlanePrincipalId lets ControlPlaneApi send approvals"):
        run_program("no-authority", control_plane_config())


def test_the_sample_stacks_name_control_plane_s_identity_only_where_it_is_the_authority(
    deployment: Deployment,
) -> None:
    granted = set(declared_grants(deployment))

    assert matrix.DELIVERY in granted
    assert matrix.CONTROL_PLANE not in granted, "the sample host keeps its own environments"


def test_the_neighbours_queues_are_the_ones_the_app_reads() -> None:
    queues = {neighbour.queue for neighbour in neighbours.NEIGHBOURS}

    assert queues == set(MANIFEST.inbound_queues)
    assert queues <= set(QUEUES)

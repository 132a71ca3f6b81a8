"""Each neighbour's stand-in (tests.support.neighbours), started per test on a free loopback port."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.support.neighbours import ControlPlaneStandIn, DeliveryHostStandIn, KnowledgeHostStandIn


@pytest.fixture
def control_plane_stand_in() -> Iterator[ControlPlaneStandIn]:
    with ControlPlaneStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def knowledge_host_stand_in() -> Iterator[KnowledgeHostStandIn]:
    with KnowledgeHostStandIn() as stand_in:
        yield stand_in


@pytest.fixture
def delivery_host_stand_in() -> Iterator[DeliveryHostStandIn]:
    with DeliveryHostStandIn() as stand_in:
        yield stand_in

"""Health through the local host: each neighbour configured or not, reachable or not, with latency.

ControlPlaneApi is a stand-in that the test takes down and brings back; KnowledgeHost
points at a port nothing listens on; DeliveryHost is not configured.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess
from tests.support.neighbours import ControlPlaneStandIn
from tests.support.ports import closed_port

HEALTH_SCOPE = ["factory.health.read"]


@pytest.fixture(scope="module")
def control_plane() -> Iterator[ControlPlaneStandIn]:
    with ControlPlaneStandIn() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def neighbour_host(
    azurite: Azurite, key_dir: Path, control_plane: ControlPlaneStandIn, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[HostProcess]:
    settings = app_settings(
        azurite,
        key_dir,
        RuntimeCloud__ControlPlane__BaseUrl=control_plane.url,
        RuntimeCloud__KnowledgeHost__BaseUrl=f"http://127.0.0.1:{closed_port()}/",
    )
    host = HostProcess(REPO, settings, tmp_path_factory.mktemp("logs") / "neighbour-host.log").start()
    yield host
    host.stop()


def health(host: HostProcess, token: str) -> tuple[dict, dict, dict]:
    answer = host.request("GET", "runtime-cloud/health", token=token)
    assert answer.status_code == 200, answer.text
    document = answer.json()
    checks = {check["name"]: check for check in document["checks"]}
    neighbours = {entry["name"]: entry for entry in document["neighbours"]}
    return document, checks, neighbours


def test_health_shows_each_neighbour_configured_or_not_and_reachable_or_not(neighbour_host, control_plane, mint):
    document, checks, neighbours = health(neighbour_host, mint(scopes=HEALTH_SCOPE))

    assert set(neighbours) == {"control-plane", "knowledge-host", "delivery-host"}
    control = neighbours["control-plane"]
    assert control["service"] == "ControlPlaneApi" and control["configured"] is True and control["reachable"] is True
    assert control["latency_ms"] >= 0 and checks["control-plane"]["status"] == "healthy"
    assert control_plane.count("GET", "/") >= 1  # health asked the stand-in itself

    knowledge = neighbours["knowledge-host"]
    assert knowledge["configured"] is True and knowledge["reachable"] is False and knowledge["fail_fast"] is False
    assert checks["knowledge-host"]["status"] == "degraded" and checks["knowledge-host"]["required"] is False
    assert "could not be reached" in knowledge["detail"]

    delivery = neighbours["delivery-host"]
    assert delivery["configured"] is False and delivery["reachable"] is None and delivery["fail_fast"] is True
    assert checks["delivery-host"]["status"] == "healthy"
    assert "RuntimeCloud:DeliveryHost:BaseUrl" in delivery["detail"]

    assert document["status"] == "degraded" and document["ready"] is True  # neighbours never make it unready


def test_a_neighbour_that_goes_down_degrades_health_and_recovers_when_it_is_back(neighbour_host, control_plane, mint):
    token = mint(scopes=HEALTH_SCOPE)
    control_plane.stop()
    try:
        document, checks, neighbours = health(neighbour_host, token)
    finally:
        control_plane.start()

    assert neighbours["control-plane"]["reachable"] is False and checks["control-plane"]["status"] == "degraded"
    assert "ControlPlaneApi" in neighbours["control-plane"]["detail"]
    assert document["ready"] is True

    _, checks, neighbours = health(neighbour_host, token)
    assert neighbours["control-plane"]["reachable"] is True and checks["control-plane"]["status"] == "healthy"


def test_a_neighbour_answering_5xx_is_unreachable(neighbour_host, control_plane, mint):
    control_plane.failing(503)
    try:
        _, checks, neighbours = health(neighbour_host, mint(scopes=HEALTH_SCOPE))
    finally:
        control_plane.heal()

    assert neighbours["control-plane"]["reachable"] is False and "HTTP 503" in neighbours["control-plane"]["detail"]
    assert checks["control-plane"]["status"] == "degraded"

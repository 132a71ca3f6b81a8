"""ControlPlaneApi's client against its stand-in (a real local HTTP server speaking the contract)."""

from __future__ import annotations

import pytest

from shared.platform.neighbours.control_plane import ControlPlaneApi
from shared.platform.neighbours.errors import (
    EditionUnknown,
    EnvironmentNotRegistered,
    NeighbourAnswerInvalid,
    NeighbourNotFound,
    NeighbourUnavailable,
)
from shared.platform.neighbours.settings import ControlPlaneSettings
from tests.support.neighbours import ControlPlaneStandIn

ENVIRONMENT_PATH = "/v1/tenants/tenant-a/environments/shop"


def client(stand_in: ControlPlaneStandIn, **settings: object) -> ControlPlaneApi:
    values = {"BaseUrl": stand_in.url, "TimeoutSeconds": 1, "Retries": 2, "CacheSeconds": 0} | settings
    return ControlPlaneApi(ControlPlaneSettings.model_validate(values))


def test_a_registered_environment_is_answered_with_its_class_target_and_existence(control_plane_stand_in):
    control_plane_stand_in.register("tenant-a", "shop", "production", target="local-storage")

    record = client(control_plane_stand_in).environment("tenant-a", "shop")

    assert (record.tenant, record.name, record.environment_class) == ("tenant-a", "shop", "production")
    assert record.target == "local-storage" and record.exists is True
    assert control_plane_stand_in.count("GET", ENVIRONMENT_PATH) == 1


def test_an_unregistered_environment_is_environment_not_registered(control_plane_stand_in):
    with pytest.raises(EnvironmentNotRegistered) as raised:
        client(control_plane_stand_in).environment("tenant-a", "shop")

    assert isinstance(raised.value, NeighbourNotFound)
    assert "shop" in str(raised.value) and "tenant-a" in str(raised.value)


def test_names_are_one_path_segment_each(control_plane_stand_in):
    with pytest.raises(EnvironmentNotRegistered):
        client(control_plane_stand_in).environment("tenant-a", "../../editions/gold/quotas")

    assert control_plane_stand_in.requests[0].path == (
        "/v1/tenants/tenant-a/environments/..%2F..%2Feditions%2Fgold%2Fquotas"
    )


def test_edition_quotas_per_pool_kind_and_an_unknown_edition(control_plane_stand_in):
    control_plane_stand_in.edition("gold", {"agent-runtime": 20, "sandbox": 5})
    api = client(control_plane_stand_in)

    quotas = api.edition_quotas("gold")

    assert quotas.edition == "gold" and quotas.quotas == {"agent-runtime": 20, "sandbox": 5}
    with pytest.raises(EditionUnknown):
        api.edition_quotas("platinum")


def test_a_503_is_retried_then_unavailable_naming_the_status(control_plane_stand_in):
    control_plane_stand_in.register("tenant-a", "shop")
    control_plane_stand_in.failing(503)

    with pytest.raises(NeighbourUnavailable) as raised:
        client(control_plane_stand_in, Retries=2).environment("tenant-a", "shop")

    assert raised.value.status == 503 and "after 3 attempts" in str(raised.value)
    assert control_plane_stand_in.count("GET", ENVIRONMENT_PATH) == 3


def test_a_500_is_not_retried(control_plane_stand_in):
    control_plane_stand_in.failing(500)

    with pytest.raises(NeighbourUnavailable) as raised:
        client(control_plane_stand_in, Retries=2).environment("tenant-a", "shop")

    assert raised.value.status == 500
    assert control_plane_stand_in.count() == 1


def test_a_503_that_clears_is_answered_by_the_retry(control_plane_stand_in):
    control_plane_stand_in.register("tenant-a", "shop", "production")
    control_plane_stand_in.failing(503, times=1)
    api = client(control_plane_stand_in, Retries=5)

    assert api.environment("tenant-a", "shop").environment_class == "production"
    assert control_plane_stand_in.count() == 2


def test_slower_than_the_time_out_is_unavailable_and_not_retried(control_plane_stand_in):
    control_plane_stand_in.register("tenant-a", "shop")
    control_plane_stand_in.slow(3)

    with pytest.raises(NeighbourUnavailable) as raised:
        client(control_plane_stand_in, TimeoutSeconds=0.3).environment("tenant-a", "shop")

    assert "did not answer within 0.3 s" in str(raised.value) and raised.value.status is None
    assert control_plane_stand_in.count() == 1


@pytest.mark.parametrize(
    "body",
    [
        b'{"tenant": "tenant-a", "name": "shop", "class": "staging", "target": "t", "exists": true}',
        b'{"tenant": "tenant-a", "name": "shop", "class": "production", "target": "t", "exists": "yes"}',
        b'{"tenant": "tenant-a", "name": "shop"}',
        b"[]",
        b"<html>not json</html>",
        b'{"tenant": "tenant-b", "name": "shop", "class": "production", "target": "t", "exists": true}',
    ],
    ids=["unknown-class", "string-for-bool", "missing-fields", "not-an-object", "not-json", "another-tenant"],
)
def test_an_answer_off_the_contract_is_answer_invalid(control_plane_stand_in, body):
    control_plane_stand_in.answering(body)

    with pytest.raises(NeighbourAnswerInvalid) as raised:
        client(control_plane_stand_in).environment("tenant-a", "shop")

    assert "ControlPlaneApi" in str(raised.value) and "environment shop of tenant tenant-a" in str(raised.value)


def test_down_is_unavailable_after_its_retries(control_plane_stand_in):
    api = client(control_plane_stand_in, Retries=1)
    control_plane_stand_in.stop()

    with pytest.raises(NeighbourUnavailable) as raised:
        api.environment("tenant-a", "shop")

    assert "could not be reached" in str(raised.value) and "after 2 attempts" in str(raised.value)
    control_plane_stand_in.start()
    control_plane_stand_in.register("tenant-a", "shop")
    assert api.environment("tenant-a", "shop").name == "shop"  # back up: answered again


def test_answers_are_cached_for_cache_seconds_but_not_registered_is_asked_again(control_plane_stand_in):
    api = client(control_plane_stand_in, CacheSeconds=300)
    with pytest.raises(EnvironmentNotRegistered):
        api.environment("tenant-a", "shop")
    control_plane_stand_in.register("tenant-a", "shop", "production")

    first = api.environment("tenant-a", "shop")
    control_plane_stand_in.register("tenant-a", "shop", "non-production")
    second = api.environment("tenant-a", "shop")

    assert first.environment_class == second.environment_class == "production"
    assert control_plane_stand_in.count("GET", ENVIRONMENT_PATH) == 2
    api.forget_cached()
    assert api.environment("tenant-a", "shop").environment_class == "non-production"


def test_without_a_cache_every_lookup_asks(control_plane_stand_in):
    control_plane_stand_in.register("tenant-a", "shop")
    api = client(control_plane_stand_in, CacheSeconds=0)

    api.environment("tenant-a", "shop")
    api.environment("tenant-a", "shop")

    assert control_plane_stand_in.count("GET", ENVIRONMENT_PATH) == 2

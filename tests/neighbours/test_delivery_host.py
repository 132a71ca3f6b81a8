"""DeliveryHost's client against its stand-in (a real local HTTP server speaking the contract)."""

from __future__ import annotations

import pytest

from shared.platform.neighbours.delivery_host import DeliveryHost
from shared.platform.neighbours.errors import NeighbourAnswerInvalid, NeighbourUnavailable, ReleaseUnknown
from shared.platform.neighbours.settings import DeliveryHostSettings
from tests.support.neighbours import DeliveryHostStandIn

SPECIFICATION = '{"environment": "shop", "environment_class": "non-production"}'


def client(stand_in: DeliveryHostStandIn, **settings: object) -> DeliveryHost:
    values = {"BaseUrl": stand_in.url, "TimeoutSeconds": 1, "Retries": 1} | settings
    return DeliveryHost(DeliveryHostSettings.model_validate(values))


def test_a_release_resolves_to_its_specification_text_and_commit(delivery_host_stand_in):
    published = delivery_host_stand_in.publish("release-42", "shop", SPECIFICATION)

    release = client(delivery_host_stand_in).release("release-42", "shop")

    assert release.specification_text == SPECIFICATION and release.commit == published["commit"]
    assert delivery_host_stand_in.count("GET", "/v1/releases/release-42/environments/shop") == 1


def test_an_unknown_release_or_one_not_for_that_environment_is_release_unknown(delivery_host_stand_in):
    delivery_host_stand_in.publish("release-42", "shop", SPECIFICATION)

    with pytest.raises(ReleaseUnknown):
        client(delivery_host_stand_in).release("release-43", "shop")
    with pytest.raises(ReleaseUnknown):
        client(delivery_host_stand_in).release("release-42", "warehouse")


def test_a_504_is_retried_then_unavailable(delivery_host_stand_in):
    delivery_host_stand_in.failing(504)

    with pytest.raises(NeighbourUnavailable) as raised:
        client(delivery_host_stand_in, Retries=1).release("release-42", "shop")

    assert raised.value.status == 504 and delivery_host_stand_in.count() == 2


def test_slower_than_the_time_out_is_unavailable(delivery_host_stand_in):
    delivery_host_stand_in.publish("release-42", "shop", SPECIFICATION)
    delivery_host_stand_in.slow(3)

    with pytest.raises(NeighbourUnavailable):
        client(delivery_host_stand_in, TimeoutSeconds=0.3).release("release-42", "shop")


def test_down_is_unavailable(delivery_host_stand_in):
    delivery_host_stand_in.stop()

    with pytest.raises(NeighbourUnavailable) as raised:
        client(delivery_host_stand_in, Retries=0).release("release-42", "shop")

    assert "DeliveryHost" in str(raised.value) and raised.value.status is None


@pytest.mark.parametrize(
    "body",
    [
        b'{"release_id": "release-42", "environment": "shop", "specification_text": "", "commit": "'
        + b"a" * 40
        + b'"}',
        b'{"release_id": "release-42", "environment": "shop", "specification_text": "x", "commit": "main"}',
        b'{"release_id": "release-41", "environment": "shop", "specification_text": "x", "commit": "'
        + b"a" * 40
        + b'"}',
        b"null",
    ],
    ids=["empty-specification", "branch-for-commit", "another-release", "null"],
)
def test_an_answer_off_the_contract_is_answer_invalid(delivery_host_stand_in, body):
    delivery_host_stand_in.answering(body)

    with pytest.raises(NeighbourAnswerInvalid):
        client(delivery_host_stand_in).release("release-42", "shop")

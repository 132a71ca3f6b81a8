"""What every neighbour's client shares (shared.platform.neighbours.http_client and settings), against a stand-in.

Entra ID is the one edge mocked here: a token provider in the credential's place
(``stand_in_entra_id``), since no token can be issued on this machine.
"""

from __future__ import annotations

import os

import pytest
from azure.core.exceptions import ClientAuthenticationError

from shared.platform.errors import InvalidSettings
from shared.platform.neighbours.control_plane import ControlPlaneApi
from shared.platform.neighbours.delivery_host import DeliveryHost
from shared.platform.neighbours.errors import NeighbourAnswerInvalid, NeighbourUnavailable
from shared.platform.neighbours.http_client import MAX_ANSWER_BYTES
from shared.platform.neighbours.settings import ControlPlaneSettings, DeliveryHostSettings
from shared.wiring.settings import load_settings
from tests.support.neighbours import ControlPlaneStandIn, DeliveryHostStandIn


def settings_for(stand_in: ControlPlaneStandIn, **values: object) -> ControlPlaneSettings:
    return ControlPlaneSettings.model_validate({"BaseUrl": stand_in.url, "CacheSeconds": 0, **values})


def stand_in_entra_id(token: str | None):
    """The Entra ID edge: a fixed token, or the failure of an identity with nothing to sign in with."""

    def issue() -> str:
        if token is None:
            raise ClientAuthenticationError("no identity to sign in with")
        return token

    return issue


def test_with_a_scope_each_request_carries_the_hosts_bearer_token_from_stand_in_entra_id(control_plane_stand_in):
    control_plane_stand_in.register("tenant-a", "shop")
    scoped = settings_for(control_plane_stand_in, Scope="api://control-plane/.default")

    ControlPlaneApi(scoped, stand_in_entra_id("token-123")).environment("tenant-a", "shop")

    assert control_plane_stand_in.requests[-1].authorization == "Bearer token-123"


def test_without_a_scope_no_authorization_header_is_sent(control_plane_stand_in):
    control_plane_stand_in.register("tenant-a", "shop")

    ControlPlaneApi(settings_for(control_plane_stand_in), stand_in_entra_id("token-123")).environment(
        "tenant-a", "shop"
    )

    assert control_plane_stand_in.requests[-1].authorization is None


def test_no_token_from_stand_in_entra_id_is_unavailable_and_nothing_is_asked_anonymously(control_plane_stand_in):
    scoped = settings_for(control_plane_stand_in, Scope="api://control-plane/.default")

    with pytest.raises(NeighbourUnavailable) as raised:
        ControlPlaneApi(scoped, stand_in_entra_id(None)).environment("tenant-a", "shop")

    assert "no token" in str(raised.value) and "ClientAuthenticationError" in str(raised.value)
    assert control_plane_stand_in.count() == 0


@pytest.mark.parametrize("status", [401, 403])
def test_refused_credentials_are_unavailable_and_not_retried(control_plane_stand_in, status):
    control_plane_stand_in.failing(status)

    with pytest.raises(NeighbourUnavailable) as raised:
        ControlPlaneApi(settings_for(control_plane_stand_in, Retries=3)).environment("tenant-a", "shop")

    assert raised.value.status == status and control_plane_stand_in.count() == 1


def test_a_redirect_is_never_followed(control_plane_stand_in):
    control_plane_stand_in.failing(302)

    with pytest.raises(NeighbourAnswerInvalid) as raised:
        ControlPlaneApi(settings_for(control_plane_stand_in)).environment("tenant-a", "shop")

    assert "redirect" in str(raised.value) and control_plane_stand_in.count() == 1


def test_a_status_the_contract_lacks_is_answer_invalid(delivery_host_stand_in):
    delivery_host_stand_in.failing(418)
    settings = DeliveryHostSettings.model_validate({"BaseUrl": delivery_host_stand_in.url})

    with pytest.raises(NeighbourAnswerInvalid) as raised:
        DeliveryHost(settings).release("release-1", "shop")

    assert "HTTP 418" in str(raised.value)


def test_an_oversized_answer_is_answer_invalid(delivery_host_stand_in: DeliveryHostStandIn):
    delivery_host_stand_in.answering(b" " * (MAX_ANSWER_BYTES + 1))
    settings = DeliveryHostSettings.model_validate({"BaseUrl": delivery_host_stand_in.url})

    with pytest.raises(NeighbourAnswerInvalid) as raised:
        DeliveryHost(settings).release("release-1", "shop")

    assert "more than" in str(raised.value)


@pytest.mark.parametrize(
    "url",
    ["http://control-plane.example/", "ftp://127.0.0.1/", "https://user:secret@control-plane.example/", "no-url"],
)
def test_a_base_url_that_would_send_the_token_in_clear_text_or_carries_credentials_is_refused(url):
    with pytest.raises(ValueError, match="https"):
        ControlPlaneSettings.model_validate({"BaseUrl": url})


def test_https_or_loopback_http_is_accepted_and_empty_is_not_configured():
    assert ControlPlaneSettings.model_validate({"BaseUrl": "https://control-plane.example/api"}).configured
    assert ControlPlaneSettings.model_validate({"BaseUrl": "http://localhost:8140/"}).configured
    assert not ControlPlaneSettings.model_validate({}).configured


def test_the_host_refuses_to_start_naming_the_neighbours_setting(monkeypatch):
    for key in list(os.environ):
        if key.startswith(("RuntimeCloud__", "AzureWebJobsStorage")):
            monkeypatch.delenv(key)
    monkeypatch.setenv("AzureWebJobsStorage", "UseDevelopmentStorage=true")
    monkeypatch.setenv("RuntimeCloud__Auth__LocalSigningKeyDirectory", "/tmp/keys")
    monkeypatch.setenv("RuntimeCloud__KnowledgeHost__BaseUrl", "http://knowledge-host.example/")

    with pytest.raises(InvalidSettings) as raised:
        load_settings()

    assert "RuntimeCloud:KnowledgeHost:BaseUrl" in str(raised.value)
    assert "RuntimeCloud__KnowledgeHost__BaseUrl" in str(raised.value)


def test_healths_probe_takes_any_answer_below_500_as_reachable_and_a_5xx_or_silence_as_not(control_plane_stand_in):
    http = ControlPlaneApi(settings_for(control_plane_stand_in)).http

    assert http.probe(1) == "answered HTTP 200"
    control_plane_stand_in.failing(302)
    assert "redirect" in http.probe(1)
    control_plane_stand_in.failing(503)
    with pytest.raises(NeighbourUnavailable):
        http.probe(1)
    control_plane_stand_in.stop()
    with pytest.raises(NeighbourUnavailable):
        http.probe(1)

"""Editions' quotas through ControlPlaneApi's client (against its stand-in, a real local HTTP server):
what capacity does with its answers, its 404s and its outages (shared.capacity.edition_authority)."""

from __future__ import annotations

import pytest

from shared.capacity import edition_authority
from shared.capacity.edition_authority import EditionsAuthority
from shared.capacity.errors import QuotasUnavailable
from shared.capacity.models import PoolKind
from shared.platform.neighbours.control_plane import ControlPlaneApi
from shared.platform.neighbours.settings import ControlPlaneSettings
from tests.support.neighbours import ControlPlaneStandIn

QUOTAS = "/v1/editions/gold/quotas"


def authority(stand_in: ControlPlaneStandIn) -> EditionsAuthority:
    settings = {"BaseUrl": stand_in.url, "TimeoutSeconds": 1, "Retries": 0, "CacheSeconds": 0}  # always asks
    return EditionsAuthority(ControlPlaneApi(ControlPlaneSettings.model_validate(settings)))


def test_its_quotas_are_the_limits_and_a_kind_this_host_does_not_know_is_ignored(control_plane_stand_in):
    control_plane_stand_in.edition("gold", {"sandbox": 3, "build": 0, "quantum": 7})

    assert authority(control_plane_stand_in).limits("gold") == {PoolKind.SANDBOX: 3, PoolKind.BUILD: 0}


def test_an_edition_it_does_not_know_is_none_and_its_last_quotas_are_forgotten(control_plane_stand_in, monkeypatch):
    monkeypatch.setattr(edition_authority, "QUIET_SECONDS", 0.0)
    control_plane_stand_in.edition("gold", {"sandbox": 3})
    editions = authority(control_plane_stand_in)
    editions.limits("gold")
    control_plane_stand_in.editions.clear()

    assert editions.limits("gold") is None
    control_plane_stand_in.failing(503)
    with pytest.raises(QuotasUnavailable):  # nothing known any more: not the quotas it had before the 404
        editions.limits("gold")


def test_while_it_is_down_an_edition_read_before_keeps_its_last_quotas_and_one_never_read_is_unavailable(
    control_plane_stand_in, monkeypatch
):
    monkeypatch.setattr(edition_authority, "QUIET_SECONDS", 0.0)
    control_plane_stand_in.edition("gold", {"sandbox": 3})
    editions = authority(control_plane_stand_in)
    editions.limits("gold")
    control_plane_stand_in.stop()

    assert editions.limits("gold") == {PoolKind.SANDBOX: 3}
    with pytest.raises(QuotasUnavailable) as raised:
        editions.limits("silver")
    assert (raised.value.authority, raised.value.edition) == ("ControlPlaneApi", "silver")
    assert raised.value.retry_after_seconds > 0


def test_last_quotas_older_than_the_stale_bound_are_not_used(control_plane_stand_in, monkeypatch):
    monkeypatch.setattr(edition_authority, "QUIET_SECONDS", 0.0)
    monkeypatch.setattr(edition_authority, "STALE_SECONDS", 0.0)
    control_plane_stand_in.edition("gold", {"sandbox": 3})
    editions = authority(control_plane_stand_in)
    editions.limits("gold")
    control_plane_stand_in.answering(b'{"edition": "gold", "quotas": {"sandbox": "many"}}')  # off the contract

    with pytest.raises(QuotasUnavailable):
        editions.limits("gold")


def test_after_a_failure_it_is_left_alone_for_the_quiet_time(control_plane_stand_in, monkeypatch):
    monkeypatch.setattr(edition_authority, "QUIET_SECONDS", 3600.0)
    control_plane_stand_in.edition("gold", {"sandbox": 3})
    editions = authority(control_plane_stand_in)
    editions.limits("gold")
    control_plane_stand_in.failing(503)
    assert editions.limits("gold") == {PoolKind.SANDBOX: 3}  # asked, failed: the last quotas
    asked = control_plane_stand_in.count("GET", QUOTAS)
    control_plane_stand_in.heal()

    for _ in range(5):
        assert editions.limits("gold") == {PoolKind.SANDBOX: 3}
    with pytest.raises(QuotasUnavailable):
        editions.limits("silver")
    assert control_plane_stand_in.count("GET", QUOTAS) == asked == 2

"""The wiring makes health's view of each neighbour from the settings an operator writes (in process, no I/O)."""

from __future__ import annotations

import pytest

from shared.wiring.health import health_sections
from shared.wiring.settings import Settings


def probes_by_check(settings: Settings) -> dict:
    return {probe.check: probe for probe in health_sections(settings).neighbours}


def test_by_default_no_neighbour_is_configured(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("ControlPlane", "KnowledgeHost", "DeliveryHost"):
        monkeypatch.delenv(f"RuntimeCloud__{name}__BaseUrl", raising=False)
    monkeypatch.delenv("RuntimeCloud__Environments__Source", raising=False)

    probes = probes_by_check(Settings())

    assert set(probes) == {"control-plane", "knowledge-host", "delivery-host"}
    assert not any(probe.configured for probe in probes.values())
    assert probes["delivery-host"].fail_fast and not probes["knowledge-host"].fail_fast


def test_control_plane_is_fail_fast_only_as_the_environments_authority(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RuntimeCloud__ControlPlane__BaseUrl", "https://control-plane.example/")
    monkeypatch.setenv("RuntimeCloud__ControlPlane__Scope", "api://control-plane/.default")

    monkeypatch.setenv("RuntimeCloud__Environments__Source", "local")
    configured_only = probes_by_check(Settings())["control-plane"]
    monkeypatch.setenv("RuntimeCloud__Environments__Source", "control-plane")
    authority = probes_by_check(Settings())["control-plane"]

    assert configured_only.configured and not configured_only.fail_fast
    assert authority.configured and authority.fail_fast
    assert authority.http is not None and authority.http.base_url == "https://control-plane.example/"

"""Issue 10: health and the request pipeline take their settings sections, never the settings root.

The host tests (test_auth.py, test_health_and_meta.py) show the app hands the
sections over; these show what happens where it does not, and that the wiring
builds health's sections from the settings an operator writes.
"""

from __future__ import annotations

import asyncio
import json

import azure.functions as func
import pytest

from shared.platform.http import endpoint as pipeline
from shared.wiring.health import health_sections
from shared.wiring.settings import Settings


def test_without_an_auth_section_the_pipeline_refuses_every_call_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    called = []

    @pipeline.endpoint(scopes=["factory.health.read"])
    def handler(req: func.HttpRequest) -> dict:
        called.append(req)
        return {"ok": True}

    monkeypatch.setattr(pipeline, "_auth", None)
    pipeline.token_validator.cache_clear()
    request = func.HttpRequest(
        "GET", "http://127.0.0.1/runtime-cloud/x", headers={"Authorization": "Bearer a.b.c"}, body=b""
    )
    try:
        answer = asyncio.run(handler(request))
    finally:
        pipeline.token_validator.cache_clear()

    assert answer.status_code == 500
    assert answer.mimetype == "application/problem+json"
    assert "Auth" not in json.loads(answer.get_body())["detail"]  # the reason is logged, not answered
    assert called == []


def test_health_sections_are_the_operators_settings(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("RuntimeCloud__Host__EnabledModules", "inventory,capacity")
    monkeypatch.setenv("RuntimeCloud__Health__CacheSeconds", "7")
    monkeypatch.setenv("OrleansMessaging__ServiceName", "runtime-cloud-eu")
    monkeypatch.setenv("RuntimeCloud__IaC__Runner", "embedded")

    sections = health_sections(Settings())

    assert sections.enabled_modules == ("inventory", "capacity")
    assert sections.health.cache_seconds == 7
    assert sections.service_name == "runtime-cloud-eu"
    assert sections.runner.value == "embedded"

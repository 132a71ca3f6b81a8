"""The host's own endpoints: health (with each dependency) and target metadata."""

from __future__ import annotations

import json

from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess
from tests.support.ports import closed_port

HEALTH_SCOPE = ["factory.health.read"]


def checks_by_name(document: dict) -> dict[str, dict]:
    return {check["name"]: check for check in document["checks"]}


def test_health_reports_every_dependency_with_status_and_latency(runtime_host, mint):
    answer = runtime_host.request("GET", "runtime-cloud/health", token=mint(scopes=HEALTH_SCOPE))

    assert answer.status_code == 200
    document = answer.json()
    assert document["status"] == "degraded"  # one configured target never answers
    assert document["ready"] is True and document["live"] is True
    checks = checks_by_name(document)
    for name in (
        "store.tables",
        "store.blobs",
        "store.queues",
        "iac-runner.embedded",
        "target.local-storage",
        "config-platform",
    ):
        assert checks[name]["status"] == "healthy", checks[name]
        assert checks[name]["latency_ms"] >= 0
    assert checks["target.unreachable-storage"]["status"] == "degraded"
    assert checks["target.unreachable-storage"]["required"] is False
    assert "not configured" in checks["config-platform"]["detail"]
    lag = {(entry["module"], entry["queue"]): entry for entry in document["inbox_lag"]}
    assert set(lag) == {
        ("provisioning", "promotions"),
        ("provisioning", "approvals"),
        ("provisioning", "gitops-sync"),
        ("inventory", "inventory-inbox"),
    }
    assert all(entry["lag_seconds"] is not None for entry in lag.values())


def test_target_metadata_lists_targets_and_the_runner_but_no_credential_location(runtime_host, mint):
    answer = runtime_host.request("GET", "runtime-cloud/meta/targets", token=mint(scopes=["factory.meta.read"]))

    assert answer.status_code == 200
    document = answer.json()
    assert document["iac_runner"]["name"] == "embedded"
    assert document["iac_runner"]["version"]
    assert [t["id"] for t in document["targets"]] == ["local-storage", "unreachable-storage"]
    assert document["targets"][0]["credential"] == "app-setting"
    assert "RuntimeCloudTarget__local_storage__Connection" not in answer.text
    assert "AccountKey" not in answer.text


def test_health_is_degraded_by_a_dead_dependency_and_503_naming_the_store_when_azurite_stops(key_dir, mint, tmp_path):
    private = Azurite(tmp_path / "azurite").start()
    dead_port = closed_port()
    env = app_settings(private, key_dir, RuntimeCloud__ConfigPlatform__Url=f"http://127.0.0.1:{dead_port}/")
    host = HostProcess(REPO, env, tmp_path / "host.log").start()
    token = mint(scopes=HEALTH_SCOPE)
    try:
        degraded = host.request("GET", "runtime-cloud/health", token=token)
        assert degraded.status_code == 200
        assert degraded.json()["status"] == "degraded"
        assert checks_by_name(degraded.json())["config-platform"]["status"] == "degraded"
        assert checks_by_name(degraded.json())["store.tables"]["status"] == "healthy"

        private.stop(grace_seconds=0)  # the store goes down at once (the host's connections do not hold it up)
        down = host.request("GET", "runtime-cloud/health", token=token)

        assert down.status_code == 503
        assert "Retry-After" in down.headers
        document = down.json()
        assert document["status"] == "unhealthy" and document["ready"] is False
        failed = {name for name, check in checks_by_name(document).items() if check["status"] == "unhealthy"}
        assert failed == {"store.tables", "store.blobs", "store.queues"}
        assert checks_by_name(document)["target.local-storage"]["status"] == "degraded"
    finally:
        host.stop()
        private.stop(grace_seconds=0)


def test_an_invalid_setting_stops_the_host_with_a_message_naming_it(azurite, key_dir, tmp_path):
    env = app_settings(azurite, key_dir, RuntimeCloud__IaC__Runner="terraform")
    host = HostProcess(REPO, env, tmp_path / "host.log")

    try:
        host.start(timeout=30)
        raise AssertionError("the host started with an invalid runner")
    except RuntimeError as error:
        assert "RuntimeCloud:IaC:Runner" in str(error)
        assert "RuntimeCloud__IaC__Runner" in str(error)


def test_a_target_with_an_inline_secret_stops_the_host(azurite, key_dir, tmp_path):
    target = {
        "Id": "leaky",
        "Kind": "storage-account",
        "Region": "local",
        "Endpoint": "http://127.0.0.1:1/x?sig=abc",
        "Credential": {"Kind": "managed-identity"},
    }
    env = app_settings(azurite, key_dir, RuntimeCloud__Targets=json.dumps([target]))
    host = HostProcess(REPO, env, tmp_path / "host.log")

    try:
        host.start(timeout=30)
        raise AssertionError("the host started with a secret in a target")
    except RuntimeError as error:
        assert "RuntimeCloud:Targets" in str(error)
        assert "secret" in str(error)

"""Issue 28: with KnowledgeHost configured, every receipt of a run (and its outputs, by reference) is
mirrored there exactly once, through the artifacts' outbox, whatever KnowledgeHost or the host does.

KnowledgeHost is a local stand-in speaking its contract (tests.support.neighbours), counting what it
stores per artifact id (``created``) and every PUT (``puts``). The hosts run on an Azurite of their own:
the artifacts' outbox is one table per store, and every host of a store dispatches it to its own
KnowledgeHost."""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from azure.data.tables import TableClient

from devhost.azurite import Azurite
from shared.platform.events.artifact_outbox import artifact_id
from tests.conftest import REPO, app_settings
from tests.inventory.helpers import applied_environment, names, scan, target_queues
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until
from tests.support.neighbours import KnowledgeHostStandIn

TENANT = "tenant-a"
ATTEMPTS = 4
FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}


@pytest.fixture(scope="module")
def knowledge_host() -> Iterator[KnowledgeHostStandIn]:
    with KnowledgeHostStandIn() as stand_in:
        yield stand_in


@pytest.fixture(autouse=True)
def healed(knowledge_host: KnowledgeHostStandIn) -> Iterator[None]:
    yield
    knowledge_host.heal()


@pytest.fixture(scope="module")
def own_azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    azurite = Azurite(tmp_path_factory.mktemp("knowledge-host-azurite"), persist=False).start()
    yield azurite
    azurite.stop(grace_seconds=0.5)


def mirror_settings(azurite: Azurite, key_dir: Path, stand_in: KnowledgeHostStandIn) -> dict[str, str]:
    return app_settings(
        azurite,
        key_dir,
        RuntimeCloud__KnowledgeHost__BaseUrl=stand_in.url,
        RuntimeCloud__KnowledgeHost__TimeoutSeconds="10",  # longer than the stand-in's slow answers below
        RuntimeCloud__KnowledgeHost__Retries="0",  # every failure is one attempt of the outbox's
        RuntimeCloud__KnowledgeHost__PublishSchedule="*/1 * * * * *",
        RuntimeCloud__KnowledgeHost__PublishAttempts=str(ATTEMPTS),
        RuntimeCloud__KnowledgeHost__PublishBackoffSeconds="0.2",
    )


@pytest.fixture(scope="module")
def mirror_host(
    own_azurite: Azurite,
    key_dir: Path,
    knowledge_host: KnowledgeHostStandIn,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[HostProcess]:
    settings = mirror_settings(own_azurite, key_dir, knowledge_host)
    host = HostProcess(REPO, settings, tmp_path_factory.mktemp("logs") / "knowledge-host-mirror.log").start()
    yield host
    host.stop()


def artifact_ids(environment: str, run_id: str) -> dict[str, str]:
    """The ids a run's artifacts have: the same on every attempt and host (tenant/environment/run/kind)."""
    kinds = ("plan-receipt", "apply-receipt", "run-outputs")
    return {kind: artifact_id(TENANT, environment, run_id, kind) for kind in kinds}  # type: ignore[arg-type]


def record(azurite: Azurite, environment: str, artifact: str) -> dict[str, Any] | None:
    """The artifact's record in the host's outbox (pending, published or dead-lettered)."""
    table = TableClient.from_connection_string(azurite.connection_string(), "KnowledgeArtifacts")
    rows = list(
        table.query_entities(
            "PartitionKey eq @p and RowKey eq @r",
            parameters={"p": f"{TENANT}|{environment}", "r": f"artifact|{artifact}"},
        )
    )
    return dict(rows[0]) if rows else None


def applied_run(host: HostProcess, token: str, environment: str) -> dict[str, Any]:
    answer = declare(host, token, specification(environment))
    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(host, token, answer.json()["run_id"], FINAL)
    assert run["state"] == "applied", run
    return run


def all_published(stand_in: KnowledgeHostStandIn, azurite: Azurite, environment: str, ids: dict[str, str]) -> bool:
    return all(
        stand_in.created[artifact] >= 1 and (record(azurite, environment, artifact) or {}).get("State") == "published"
        for artifact in ids.values()
    )


def assert_mirrored_once(stand_in: KnowledgeHostStandIn, run: dict[str, Any], ids: dict[str, str]) -> None:
    """Each artifact stored exactly once, each receipt with the digest its run recorded."""
    assert {kind: stand_in.created[artifact] for kind, artifact in ids.items()} == dict.fromkeys(ids, 1)
    plan, apply = stand_in.stored[ids["plan-receipt"]], stand_in.stored[ids["apply-receipt"]]
    assert plan["sha256"] == run["plan_digest"] == hashlib.sha256(plan["content"].encode()).hexdigest()
    assert apply["sha256"] == run["apply_receipt_digest"]
    outputs = stand_in.stored[ids["run-outputs"]]
    assert outputs["content_ref"] == f"/runtime-cloud/runs/{run['id']}/outputs" and "content" not in outputs
    assert {plan["run_id"], apply["run_id"], outputs["run_id"]} == {run["id"]}


def test_every_artifact_of_a_run_is_stored_once_even_when_knowledge_host_answers_503_first(
    mirror_host, own_azurite, knowledge_host, mint
):
    writer = mint(TENANT, scopes=WRITE)
    environment = unique("kh-503")
    knowledge_host.failing(503, times=ATTEMPTS - 1)  # the first PUTs fail; the last attempt allowed succeeds

    run = applied_run(mirror_host, writer, environment)
    ids = artifact_ids(environment, run["id"])
    wait_until(lambda: all_published(knowledge_host, own_azurite, environment, ids), timeout=90)

    assert_mirrored_once(knowledge_host, run, ids)
    assert knowledge_host.puts[ids["plan-receipt"]] == ATTEMPTS  # in order: the first artifact took the 503s
    assert record(own_azurite, environment, ids["plan-receipt"])["Attempts"] == ATTEMPTS
    verify = mirror_host.request("GET", f"runtime-cloud/environments/{environment}/receipts/verify", token=writer)
    assert verify.json()["verified"] is True, verify.text
    assert {entry["source"] for entry in verify.json()["receipts"]} == {"store"}


def test_an_artifact_is_dead_lettered_with_its_record_after_its_attempts_and_the_run_goes_on(
    mirror_host, own_azurite, knowledge_host, mint
):
    writer = mint(TENANT, scopes=WRITE)
    environment = unique("kh-dead")
    knowledge_host.failing(503)  # never answers otherwise

    run = applied_run(mirror_host, writer, environment)  # the run does not wait on KnowledgeHost
    ids = artifact_ids(environment, run["id"])

    def dead_lettered() -> dict[str, Any] | None:
        found = record(own_azurite, environment, ids["plan-receipt"])
        return found if found and found["State"] == "dead-lettered" else None

    dead = wait_until(dead_lettered, timeout=90, message="the plan receipt dead-lettered")
    assert dead["Attempts"] == ATTEMPTS and "503" in dead["LastError"], dead
    assert dead["Sha256"] == run["plan_digest"]
    assert knowledge_host.puts[ids["plan-receipt"]] == ATTEMPTS and knowledge_host.created[ids["plan-receipt"]] == 0
    knowledge_host.heal()  # the artifacts after it in the environment's order go on
    wait_until(lambda: knowledge_host.created[ids["apply-receipt"]] == 1, timeout=90)
    verify = mirror_host.request("GET", f"runtime-cloud/environments/{environment}/receipts/verify", token=writer)
    assert verify.json()["verified"] is True, verify.text


@pytest.fixture
def kill_azurite(tmp_path: Path) -> Iterator[Azurite]:
    """An Azurite for this test alone: no other host may publish what the killed host was publishing."""
    azurite = Azurite(tmp_path / "azurite", persist=False).start()
    yield azurite
    azurite.stop(grace_seconds=0.5)


def test_a_host_killed_mid_publish_leaves_every_artifact_stored_exactly_once(
    kill_azurite, key_dir, knowledge_host, mint, tmp_path
):
    """The first host PUTs an artifact and dies before it can note that it did (SIGKILL while the stand-in
    is answering slowly); the next host PUTs it again, and KnowledgeHost still stores it once."""
    own_azurite = kill_azurite
    writer = mint(TENANT, scopes=WRITE)
    environment = unique("kh-kill")
    settings = mirror_settings(own_azurite, key_dir, knowledge_host) | {
        "RuntimeCloud__KnowledgeHost__PublishAttempts": "100",  # waits out the outage below
    }
    first = HostProcess(REPO, settings, tmp_path / "first.log").start()
    try:
        knowledge_host.failing(503)  # the run's artifacts wait in the outbox
        run = applied_run(first, writer, environment)
        ids = artifact_ids(environment, run["id"])
        wait_until(lambda: all(record(own_azurite, environment, a) for a in ids.values()), timeout=30)
        before = knowledge_host.puts.copy()
        knowledge_host.heal()
        knowledge_host.slow(4)  # the next PUT is taken, and stored, while the host is killed
        in_flight = wait_until(
            lambda: next((a for a in ids.values() if knowledge_host.puts[a] > before[a]), None),
            timeout=60,
            interval=0.05,
            message="a PUT in flight",
        )
        first.kill()
    finally:
        first.stop()
    knowledge_host.slow(0)
    wait_until(lambda: knowledge_host.created[in_flight] == 1, timeout=30, message="the killed PUT stored")
    assert record(own_azurite, environment, in_flight)["State"] == "pending"  # the host never knew

    second = HostProcess(REPO, settings, tmp_path / "second.log").start()
    try:
        wait_until(lambda: all_published(knowledge_host, own_azurite, environment, ids), timeout=120)
    finally:
        second.stop()

    assert_mirrored_once(knowledge_host, run, ids)
    assert knowledge_host.puts[in_flight] >= before[in_flight] + 2  # sent again after the kill, stored once


def test_each_scans_drift_report_is_mirrored_with_its_findings(mirror_host, own_azurite, knowledge_host, mint):
    operator = mint(TENANT, scopes=WRITE, roles=["Operator"])
    environment, spec = applied_environment(mirror_host, operator, "kh-drift")
    target_queues(own_azurite).delete_queue(names(spec)["queue"])  # a hands-on change: a finding

    outcomes = [scan(mirror_host, operator, environment) for _ in range(2)]

    def reports() -> list[dict[str, Any]]:
        stored = list(knowledge_host.stored.values())
        found = [a for a in stored if a["environment"] == environment and a["kind"] == "drift-report"]
        return found if len(found) == 2 else []

    mirrored = sorted(wait_until(reports, timeout=60, message="two drift reports"), key=lambda a: a["artifact_id"])
    documents = [json.loads(report["content"]) for report in mirrored]
    assert all("run_id" not in report for report in mirrored)  # a scan's, not a run's
    assert [len(d["open_findings"]) for d in documents] == [o["open_findings"] for o in outcomes] == [1, 1]
    assert documents[0]["opened"] == outcomes[0]["opened_findings"] and documents[1]["opened"] == []
    assert all(knowledge_host.created[report["artifact_id"]] == 1 for report in mirrored)

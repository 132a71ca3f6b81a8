"""Issue 17: a host killed between reserving a commit on the binding row and declaring its run.

The host's table traffic goes through a recording proxy (tests/support/storage_proxy.py)
that passes the reservation's write on to Azurite but holds its answer, so the
reservation is in the store while the sync that made it has not heard so; the
host is killed (SIGKILL) right then, before it could declare anything. The
product is unchanged: no fault injection, only a slow answer and a kill.

A new host on the same storage finishes it: the sync message the dead host
held comes back and declares the reserved commit, and a poll and a redelivered
webhook racing it find the same reservation (one idempotency key), so the
commit is one run.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
from azure.data.tables import TableServiceClient

from devhost.azurite import Azurite
from tests.conftest import REPO, app_settings
from tests.gitops.helpers import FILE, github_push, run_poll, spec_yaml, status, wait_for_syncs
from tests.provisioning.helpers import declare, runs_of, specification, wait_for_run_state
from tests.support.host import HostProcess, wait_until
from tests.support.storage_proxy import StorageProxy


@pytest.fixture(scope="module")
def azurite(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Azurite]:
    """An Azurite of this module's own: every host on an account shares its queues (by design, any host
    may take a sync), so on the session's account another test's host could take the sync this test
    holds behind its proxy, and the write it waits for would never pass the proxy."""
    instance = Azurite(tmp_path_factory.mktemp("gitops-crash-azurite"), persist=False).start()
    yield instance
    instance.stop(grace_seconds=0.5)


def _ledger(azurite, tenant: str, environment: str) -> dict:
    """The binding row's ledger, read straight from the table (the host that wrote it is dead)."""
    table = TableServiceClient.from_connection_string(azurite.connection_string()).get_table_client("GitOpsBindings")
    return json.loads(table.get_entity(tenant, environment)["Document"])["status"]


def test_a_host_killed_between_reserving_a_commit_and_declaring_it_ends_in_one_run(
    azurite, key_dir, mint, operator, tenant, environment, repository, tmp_path: Path
):
    proxy = StorageProxy(azurite.table_port).start()
    storage = azurite.connection_string().replace(f":{azurite.table_port}/", f":{proxy.port}/")
    env = app_settings(azurite, key_dir, AzureWebJobsStorage=storage)
    commit = repository.commit({FILE: spec_yaml(environment)})
    host = HostProcess(REPO, env, tmp_path / "first.log").start()
    try:
        body = {"repository": str(repository.path), "path": FILE, "branch": "main"}
        bound = host.request("PUT", f"runtime-cloud/environments/{environment}/gitops", token=operator, json=body)
        assert bound.status_code == 201, bound.text
        # The binding was inserted (POST); the first replace of its row is the sync's reservation.
        proxy.hold_answers(lambda method, path: method == "PUT" and "GitOpsBindings(" in path and environment in path)
        assert github_push(host, tenant, environment, commit).status_code == 202
        wait_until(lambda: proxy.held, timeout=60, interval=0.05, message="the reservation's write to be in flight")
        host.kill()
    finally:
        host.kill()
        proxy.release()  # its answer goes nowhere: the dead host never heard it

    reserved = _ledger(azurite, tenant, environment)
    assert (reserved["pending_commit"], reserved["pending_sequence"]) == (commit, 1)
    assert reserved["last_declared_commit"] is None and reserved["last_declared_run_id"] is None

    restarted = HostProcess(REPO, env, tmp_path / "second.log", port=host.port).start()
    try:
        # Nothing is asked of the new host: the dead host's sync message comes back by itself.
        [run] = wait_until(
            lambda: runs_of(restarted, operator, environment), timeout=120, interval=0.5, message="the declared run"
        )
        assert run["source"]["commit"] == commit and run["requested_by"] == "gitops"

        # Everything else that could race for the commit now finds it declared (or the same reservation).
        racers = [
            threading.Thread(target=run_poll, args=(restarted,)),
            threading.Thread(target=github_push, args=(restarted, tenant, environment, commit)),
        ]
        for racer in racers:
            racer.start()
        for racer in racers:
            racer.join()
        wait_for_syncs(restarted, operator, environment, 3)

        assert [r["id"] for r in runs_of(restarted, operator, environment)] == [run["id"]]
        assert wait_for_run_state(restarted, operator, run["id"], {"applied", "failed"})["state"] == "applied"
        ledger = _ledger(azurite, tenant, environment)
        assert ledger["pending_commit"] is None and ledger["declarations"] == 1
        assert (ledger["last_declared_commit"], ledger["last_declared_run_id"]) == (commit, run["id"])
        now = status(restarted, operator, environment)
        assert now["last_applied_commit"] == now["head_commit"] == commit and now["behind"] is False
    finally:
        restarted.stop()
        proxy.stop()


def test_a_host_killed_while_self_healing_ends_in_one_healing_run(
    azurite, key_dir, mint, operator, tenant, environment, repository, tmp_path: Path
):
    """The same crash, but the reservation re-declares the head over a hand declaration (self-heal): the
    next host declares it once and records which declaration it overrode, though the sync that knew died."""
    proxy = StorageProxy(azurite.table_port).start()
    storage = azurite.connection_string().replace(f":{azurite.table_port}/", f":{proxy.port}/")
    env = app_settings(azurite, key_dir, AzureWebJobsStorage=storage)
    commit = repository.commit({FILE: spec_yaml(environment)})
    host = HostProcess(REPO, env, tmp_path / "first.log").start()
    try:
        body = {"repository": str(repository.path), "path": FILE, "branch": "main", "self_heal": True}
        path = f"runtime-cloud/environments/{environment}/gitops"
        assert host.request("PUT", path, token=operator, json=body).status_code == 201
        first = host.request("POST", f"{path}/sync", token=operator).json()["run_id"]
        slow = 180  # two hosts and three runs on a machine shared with other test sessions
        assert wait_for_run_state(host, operator, first, {"applied", "failed"}, timeout=slow)["state"] == "applied"
        hand = declare(
            host,
            operator,
            specification(environment, resources=[{"type": "queue", "name": f"hand-{environment[-8:]}"}]),
        )
        assert hand.status_code == 202, hand.text
        wait_for_run_state(host, operator, hand.json()["run_id"], {"applied", "failed"}, timeout=slow)
        # The next write of the binding row is the healing sync's reservation.
        proxy.hold_answers(lambda method, path: method == "PUT" and "GitOpsBindings(" in path and environment in path)
        assert github_push(host, tenant, environment, commit).status_code == 202
        wait_until(lambda: proxy.held, timeout=60, interval=0.05, message="the reservation's write to be in flight")
        host.kill()
    finally:
        host.kill()
        proxy.release()

    reserved = _ledger(azurite, tenant, environment)
    assert (reserved["pending_commit"], reserved["pending_sequence"]) == (commit, 2)
    assert reserved["pending_heal_of"] == hand.json()["run_id"] and reserved["last_self_heal"] is None

    restarted = HostProcess(REPO, env, tmp_path / "second.log", port=host.port).start()
    try:
        runs = wait_until(
            lambda: len(r := runs_of(restarted, operator, environment)) == 3 and r,
            timeout=slow,
            interval=0.5,
            message="the healing run",
        )
        run_poll(restarted)  # a poll racing the recovery finds the same reservation, or the head declared
        now = wait_for_syncs(restarted, operator, environment, reserved["sync_attempts"] + 2)

        heal = runs[0]
        assert [r["id"] for r in runs_of(restarted, operator, environment)] == [r["id"] for r in runs]
        assert heal["source"]["commit"] == commit and heal["requested_by"] == "gitops"
        assert now["last_self_heal"]["overridden_run_id"] == hand.json()["run_id"]
        assert now["last_self_heal"]["run_id"] == heal["id"] and now["overridden"] is False
        assert _ledger(azurite, tenant, environment)["declarations"] == 2
    finally:
        restarted.stop()
        proxy.stop()

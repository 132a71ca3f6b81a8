"""Every HTTP path that starts an orchestration answers a store outage 503 with Retry-After, never 500.

The host's Durable task hub lives on an Azurite of its own here
(``AzureFunctionsJobHost__extensions__durableTask__storageProvider__connectionStringName``, as an app
setting overrides host.json in Azure), so that the task hub can be stopped while the app's store still
answers: each request then gets as far as starting its orchestration, which is where the Durable
client's bare ``Exception`` used to become a 500. With the task hub back, the same request finishes
what it started (nothing half-done). Then the app's store stops too, and every one of them answers
503 again, from its first read.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from devhost.azurite import Azurite
from shared.platform.http.endpoint import task_hub_unavailable
from tests.autoscaling.conftest import AutoscalingApi
from tests.autoscaling.test_pool_autoscaling import EAGER
from tests.conftest import REPO, app_settings, git_sources_root
from tests.gitops.helpers import FILE, OPERATOR, BareRepository, bind, spec_yaml, sync_now
from tests.inventory.helpers import accept, applied_environment, findings, names, proposals, scan, target_queues
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.support.host import HostProcess, wait_until

TENANT = "tenant-hub-outage"
HUB_CONNECTION = "AzureFunctionsJobHost__extensions__durableTask__storageProvider__connectionStringName"


def unavailable(answer: Any) -> None:
    assert answer.status_code == 503, answer.text
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    assert answer.json()["type"].endswith("store-unavailable") and "Retry-After" in answer.headers


def test_starting_orchestrations_answers_503_while_the_task_hub_or_the_store_is_down(key_dir: Path, mint, tmp_path):
    store = Azurite(tmp_path / "store").start()
    hub = Azurite(tmp_path / "hub").start()
    env = app_settings(store, key_dir, **{HUB_CONNECTION: "TaskHubStorage", "TaskHubStorage": hub.connection_string()})
    host = HostProcess(REPO, env, tmp_path / "host.log").start()
    operator = mint(TENANT, scopes=WRITE, roles=["Operator"], client_id="outage-operator")
    gitops_operator = mint(TENANT, **OPERATOR)
    repository = BareRepository(git_sources_root(key_dir) / f"{unique('outage')}.git")
    try:
        drifted, spec = applied_environment(host, operator, "outage-drift")
        target_queues(store).delete_queue(names(spec)["queue"])  # a hands-on change: a revert proposal
        scan(host, operator, drifted)  # (asked again while the scan its applied run started still runs)
        assert findings(host, operator, drifted)
        [proposal] = proposals(host, operator, drifted, state="open")
        followed = unique("outage-git")
        repository.commit({FILE: spec_yaml(followed)})
        assert bind(host, gitops_operator, followed, repository.path).status_code == 201
        declared = unique("outage-declared")
        scaling = AutoscalingApi(host, mint)
        pool = scaling.create_pool("sandbox", size=2)

        hub.stop(grace_seconds=2)  # SIGINT first: Azurite saves its data, so this is an outage, not a loss
        answers = {
            "scan": host.request("POST", f"runtime-cloud/environments/{drifted}/scan", token=operator, timeout=120),
            "declare": declare(host, operator, specification(declared), key="outage-declare"),
            "gitops sync-now": sync_now(host, gitops_operator, followed),
            "accept proposal": accept(host, operator, proposal["id"], "revert"),
            # Setting a policy declares the pool's baseline run; evaluating moves it on (starting its run).
            "autoscaling policy": scaling.put_policy(pool, **EAGER),
            "autoscaling evaluate": scaling.call(
                "POST", f"runtime-cloud/pools/{pool.id}/autoscaling/evaluate", scaling.admin()
            ),
        }
        for name, answer in answers.items():
            assert answer.status_code == 503, (name, answer.text)
            unavailable(answer)

        hub = Azurite(hub.data_dir, ports=(hub.blob_port, hub.queue_port, hub.table_port)).start()
        # A caller retries after Retry-After; the host's task hub client reconnects within a few tries.
        retried = wait_until(
            lambda: _accepted(declare(host, operator, specification(declared), key="outage-declare")),
            timeout=60,
            message="the declaration accepted once the task hub is back",
        )
        run = wait_for_run_state(host, operator, retried.json()["run_id"], {"applied", "failed"}, timeout=180)
        assert run["state"] == "applied", run
        synced = sync_now(host, gitops_operator, followed)
        assert synced.status_code == 200, synced.text
        baseline = scaling.evaluate(pool)["decision"]  # what the outage left half-way is finished now
        assert scaling.wait_for_run(baseline["run_id"], {"applied", "failed"}, timeout=180)["state"] == "applied"

        store.stop(grace_seconds=0)
        down = {
            "scan": host.request("POST", f"runtime-cloud/environments/{drifted}/scan", token=operator, timeout=120),
            "declare": declare(host, operator, specification(unique("outage-late"))),
            "gitops sync-now": sync_now(host, gitops_operator, followed),
            "accept proposal": accept(host, operator, proposal["id"], "revert"),
            "approve": host.request(
                "POST", "runtime-cloud/runs/run-outage/approve", token=operator, json={"plan_digest": "0" * 64}
            ),
            "cancel": host.request("POST", "runtime-cloud/runs/run-outage/cancel", token=operator, json={}),
            "autoscaling evaluate": scaling.call(
                "POST", f"runtime-cloud/pools/{pool.id}/autoscaling/evaluate", scaling.admin()
            ),
        }
        for name, answer in down.items():
            assert answer.status_code == 503, (name, answer.text)
            unavailable(answer)
    finally:
        host.stop()
        repository.close()
        hub.stop(grace_seconds=2)  # SIGINT first: Azurite saves its data, so this is an outage, not a loss
        store.stop(grace_seconds=0)


def test_the_durable_clients_outage_reports_are_told_from_its_other_failures():
    """The shapes azure-durable-functions raises: start_new carries the answer's body, the others a sentence."""
    outage = {"type": "urn:runtime-cloud:problem:service-unavailable", "status": 503, "detail": "down"}
    assert task_hub_unavailable(Exception(outage))
    assert task_hub_unavailable(Exception("Webhook returned unrecognized status code 503"))
    assert task_hub_unavailable(Exception("The operation failed with an unexpected status code 504"))
    assert not task_hub_unavailable(Exception("No instance with ID 'x' found."))
    assert not task_hub_unavailable(Exception({"status": 400, "ExceptionMessage": "no such orchestrator"}))
    assert not task_hub_unavailable(RuntimeError("status code 503"))  # not the client's bare Exception


def _accepted(answer: Any) -> Any:
    """The answer once it is 202; while the hub reconnects, only a 503 with Retry-After is fair."""
    if answer.status_code == 202:
        return answer
    assert answer.status_code == 503, answer.text
    unavailable(answer)
    return None

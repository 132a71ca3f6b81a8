"""Issue 17, beyond the anchors: drift proposals answered by a commit. Git is the source of truth for a
bound environment, so adopting its drift through the API is refused (409) with the specification to
commit; the commit, once synced and applied, closes the proposal as answered. Reverting (Git's state
back) stays allowed, and an Operator who suspended the binding may adopt."""

from __future__ import annotations

from typing import Any

import yaml

from tests.gitops.helpers import FILE, bind, spec_yaml, status, sync_now
from tests.inventory.helpers import accept, findings, proposals, scan, tags_of, target_queues
from tests.provisioning.helpers import runs_of, wait_for_run_state
from tests.support.host import HostProcess, wait_until


def _following(host: HostProcess, token: str, environment: str, repository: Any) -> str:
    """Bound, synced and applied; answers the applied run."""
    repository.commit({FILE: spec_yaml(environment)})
    assert bind(host, token, environment, repository.path).status_code == 201
    declared = sync_now(host, token, environment).json()
    assert wait_for_run_state(host, token, declared["run_id"], {"applied", "failed"})["state"] == "applied"
    run_id: str = declared["run_id"]
    return run_id


def _drifted(host: HostProcess, azurite: Any, token: str, tenant: str, environment: str, team: str) -> dict[str, Any]:
    """Someone sets the queue's metadata by hand; a scan proposes; answers the open proposal."""
    queue = target_queues(azurite).get_queue_client(f"gqa-{environment[-8:]}")
    queue.set_queue_metadata({"team": team, **tags_of(tenant, environment)})
    scan(host, token, environment)
    [proposal] = proposals(host, token, environment, "open")
    return proposal


def _applied(host: HostProcess, token: str, answer: Any) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    run = wait_for_run_state(host, token, answer.json()["run"]["run_id"], {"applied", "failed"})
    assert run["state"] == "applied", run
    return run


def test_adopting_drift_of_a_followed_environment_is_refused_then_answered_by_a_commit(
    runtime_host, azurite, operator, tenant, environment, repository
):
    first = _following(runtime_host, operator, environment, repository)
    proposal = _drifted(runtime_host, azurite, operator, tenant, environment, team="payments")

    refused = accept(runtime_host, operator, proposal["id"], "adopt")
    [finding] = proposal["finding_ids"]
    per_finding = runtime_host.request(
        "POST",
        f"runtime-cloud/proposals/{proposal['id']}/accept",
        token=operator,
        json={"decisions": [{"finding": finding, "option": "adopt"}]},
    )

    assert refused.status_code == 409 and refused.headers["Content-Type"].startswith("application/problem+json")
    problem = refused.json()
    assert problem["type"].endswith(":environment-follows-git") and "commit" in problem["detail"]
    assert (problem["path"], problem["branch"]) == (FILE, "main")
    assert problem["specification_digest"] == proposal["options"]["adopt"]["specification_digest"]
    document = yaml.safe_load(problem["specification_yaml"])
    assert "tenant" not in document and document["environment"] == environment
    assert document["resources"] == [
        {"type": "queue", "name": f"gqa-{environment[-8:]}", "metadata": {"team": "payments"}}
    ]
    assert per_finding.status_code == 409 and per_finding.json()["type"].endswith(":environment-follows-git")
    assert proposals(runtime_host, operator, environment, "open")[0]["id"] == proposal["id"]  # still open
    assert [r["id"] for r in runs_of(runtime_host, operator, environment)] == [first]

    # The operator commits the file the problem gave; the next sync declares it, and its apply answers.
    answer = repository.commit({FILE: problem["specification_yaml"].encode()}, message="adopt the team")
    synced = sync_now(runtime_host, operator, environment).json()
    assert synced["outcome"] == "declared" and synced["commit"] == answer
    wait_for_run_state(runtime_host, operator, synced["run_id"], {"applied", "failed"})
    closed = wait_until(
        lambda: (p := proposals(runtime_host, operator, environment, "superseded")) and p[0],
        timeout=60,
        message="the applied commit to close the proposal",
    )
    assert closed["id"] == proposal["id"] and closed["answered"] is True
    assert closed["superseded_by"]["run_id"] == synced["run_id"] and closed["note"].startswith("answered")
    scan(runtime_host, operator, environment)
    assert findings(runtime_host, operator, environment) == []  # the drift is now the desired state
    assert status(runtime_host, operator, environment)["overridden"] is False


def test_revert_stays_allowed_and_a_suspended_binding_lets_an_operator_adopt(
    runtime_host, azurite, operator, tenant, environment, repository
):
    _following(runtime_host, operator, environment, repository)
    drift = _drifted(runtime_host, azurite, operator, tenant, environment, team="payments")

    reverted = _applied(runtime_host, operator, accept(runtime_host, operator, drift["id"], "revert"))
    # Git's state put back: the revert's run declares the branch's specification, so it overrides nothing.
    assert status(runtime_host, operator, environment)["overridden"] is False
    assert reverted["source"]["kind"] == "proposal"
    scan(runtime_host, operator, environment)
    assert findings(runtime_host, operator, environment) == []  # reverted: the drift episode is over

    again = _drifted(runtime_host, azurite, operator, tenant, environment, team="search")
    path = f"runtime-cloud/environments/{environment}/gitops"
    assert runtime_host.request("POST", f"{path}/suspend", token=operator, json={"reason": "adopt"}).status_code == 200
    adopted = _applied(runtime_host, operator, accept(runtime_host, operator, again["id"], "adopt"))
    assert adopted["source"]["kind"] == "proposal"

    resumed = runtime_host.request("POST", f"{path}/resume", token=operator)
    assert resumed.status_code == 200
    now = status(runtime_host, operator, environment)
    assert now["overridden"] is True and now["overridden_by_run_id"] == adopted["id"]
    assert now["overridden_by_source"] == "proposal"  # until the file says the same (or self-heal puts Git back)

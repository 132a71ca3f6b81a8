"""Issue 17: a push webhook and a poll both lead to exactly one run per commit, however many arrive
and however they race; production runs still wait for an Operator."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

from tests.gitops.helpers import (
    FILE,
    OPERATOR,
    azure_devops_push,
    bind,
    github_push,
    run_poll,
    spec_yaml,
    status,
    sync_now,
    wait_for_syncs,
)
from tests.provisioning.helpers import runs_of, wait_for_run_state


def test_a_push_webhook_and_a_poll_lead_to_exactly_one_run_per_commit(
    runtime_host, operator, tenant, environment, repository
):
    first = repository.commit({FILE: spec_yaml(environment)})
    assert bind(runtime_host, operator, environment, repository.path).status_code == 201

    for _ in range(2):  # a redelivered webhook, and the poll finding the same commit twice
        assert github_push(runtime_host, tenant, environment, first).status_code == 202
        run_poll(runtime_host)
    wait_for_syncs(runtime_host, operator, environment, 4)

    [run] = runs_of(runtime_host, operator, environment)
    assert run["source"]["commit"] == first
    assert run["source"]["kind"] == "git" and run["source"]["path"] == FILE
    assert run["requested_by"] == "gitops"
    assert wait_for_run_state(runtime_host, operator, run["id"], {"applied", "failed"})["state"] == "applied"

    second = repository.commit({FILE: spec_yaml(environment, queues=("a", "b"))})
    for _ in range(2):  # Azure DevOps' payload shape this time
        assert azure_devops_push(runtime_host, tenant, environment, second).status_code == 202
    run_poll(runtime_host)
    wait_for_syncs(runtime_host, operator, environment, 7)

    runs = runs_of(runtime_host, operator, environment)
    assert [r["source"]["commit"] for r in runs] == [second, first]  # newest first
    applied = wait_for_run_state(runtime_host, operator, runs[0]["id"], {"applied", "failed"})
    assert applied["state"] == "applied"
    now = status(runtime_host, operator, environment)
    assert now["last_declared_commit"] == now["last_applied_commit"] == now["head_commit"] == second
    assert now["behind"] is False and now["behind_commits"] == 0 and now["last_error"] is None


def test_triggers_racing_for_one_commit_declare_it_once(runtime_host, operator, tenant, environment, repository):
    commit = repository.commit({FILE: spec_yaml(environment)})
    assert bind(runtime_host, operator, environment, repository.path).status_code == 201

    def trigger(index: int) -> int:
        if index % 3 == 0:
            return sync_now(runtime_host, operator, environment).status_code
        if index % 3 == 1:
            return github_push(runtime_host, tenant, environment, commit).status_code
        run_poll(runtime_host)
        return 202

    with ThreadPoolExecutor(max_workers=9) as pool:
        answers = list(pool.map(trigger, range(9)))
    assert answers.count(200) == 3 and answers.count(202) == 6
    wait_for_syncs(runtime_host, operator, environment, 9)

    runs = runs_of(runtime_host, operator, environment)
    assert [r["source"]["commit"] for r in runs] == [commit]
    again = sync_now(runtime_host, operator, environment).json()
    assert again["outcome"] == "up-to-date" and again["run_id"] == runs[0]["id"]


def test_production_waits_for_an_operator_and_status_counts_the_commits_behind(
    runtime_host, mint, operator, tenant, environment, repository
):
    first = repository.commit({FILE: spec_yaml(environment, "production")})
    assert bind(runtime_host, operator, environment, repository.path).status_code == 201

    declared = sync_now(runtime_host, operator, environment).json()
    assert declared["outcome"] == "declared" and declared["commit"] == first
    run = wait_for_run_state(runtime_host, operator, declared["run_id"], {"awaiting-approval"})
    assert sync_now(runtime_host, operator, environment).json()["outcome"] == "up-to-date"

    approver = mint(tenant, object_id="approver-1", **OPERATOR)
    approval = runtime_host.request(
        "POST",
        f"runtime-cloud/runs/{run['id']}/approve",
        token=approver,
        json={"plan_digest": run["plan_digest"], "reason": "reviewed"},
    )
    assert approval.status_code == 200, approval.text
    assert wait_for_run_state(runtime_host, operator, run["id"], {"applied", "failed"})["state"] == "applied"

    repository.commit({FILE: spec_yaml(environment, "production", queues=("a", "b"))})
    head = repository.commit({FILE: spec_yaml(environment, "production", queues=("a", "b", "c"))})
    behind = status(runtime_host, operator, environment)
    assert behind["last_applied_commit"] == first and behind["head_commit"] == head
    assert behind["behind"] is True and behind["behind_commits"] == 2 and behind["behind_capped"] is False

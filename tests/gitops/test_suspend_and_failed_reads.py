"""Issue 17: a suspended binding starts no run; an unreachable repository, a missing file or a file
that is not a specification changes nothing (never read as "everything deleted"); sync windows gate
automatic syncs only."""

from __future__ import annotations

import base64
import json

from azure.storage.queue import QueueClient

from tests.gitops.helpers import FILE, bind, github_push, run_poll, spec_yaml, status, sync_now, wait_for_syncs
from tests.provisioning.helpers import runs_of, target_queue_names, wait_for_run_state
from tests.support.host import wait_until


def _applied_first_commit(host, token, environment, repository) -> tuple[str, dict]:
    commit = repository.commit({FILE: spec_yaml(environment)})
    assert bind(host, token, environment, repository.path).status_code == 201
    declared = sync_now(host, token, environment).json()
    assert declared["outcome"] == "declared" and declared["commit"] == commit
    run = wait_for_run_state(host, token, declared["run_id"], {"applied", "failed"})
    assert run["state"] == "applied"
    return commit, run


def test_a_suspended_binding_starts_no_run_until_resumed(
    runtime_host, azurite, operator, tenant, environment, repository
):
    _applied_first_commit(runtime_host, operator, environment, repository)
    path = f"runtime-cloud/environments/{environment}/gitops"
    suspended = runtime_host.request("POST", f"{path}/suspend", token=operator, json={"reason": "change freeze"})
    assert suspended.status_code == 200 and suspended.json()["suspended"] is True
    assert suspended.json()["suspend_reason"] == "change freeze"
    attempts = status(runtime_host, operator, environment)["sync_attempts"]

    second = repository.commit({FILE: spec_yaml(environment, queues=("a", "b"))})
    pushed = github_push(runtime_host, tenant, environment, second)
    run_poll(runtime_host)
    refused = sync_now(runtime_host, operator, environment)
    # A sync queued before the suspension still arrives: it must find the binding suspended.
    message = json.dumps({"tenant": tenant, "environment": environment, "trigger": "poll"})
    QueueClient.from_connection_string(azurite.connection_string(), "gitops-sync").send_message(
        base64.b64encode(message.encode()).decode()
    )
    handled = wait_for_syncs(runtime_host, operator, environment, attempts + 1)

    assert pushed.status_code == 200 and pushed.json()["outcome"] == "suspended"
    assert refused.status_code == 409 and refused.json()["type"].endswith(":binding-suspended")
    assert handled["last_outcome"] == "suspended"
    assert len(runs_of(runtime_host, operator, environment)) == 1

    resumed = runtime_host.request("POST", f"{path}/resume", token=operator)
    assert resumed.status_code == 200 and resumed.json()["suspended"] is False
    newest = wait_until(
        lambda: (runs := runs_of(runtime_host, operator, environment)) and len(runs) == 2 and runs[0],
        timeout=60,
        message="the resumed binding to declare the new commit",
    )
    assert newest["source"]["commit"] == second
    assert newest["requested_by_client"] == "gitops-resume"


def test_an_unreachable_repository_changes_nothing(runtime_host, azurite, operator, tenant, environment, repository):
    commit, run = _applied_first_commit(runtime_host, operator, environment, repository)
    before = runtime_host.request("GET", f"runtime-cloud/environments/{environment}/specification", token=operator)
    moved = repository.path.with_name(repository.path.name + ".away")
    repository.path.rename(moved)  # the repository is gone: as good as a host that does not answer
    try:
        failed = sync_now(runtime_host, operator, environment)
        assert github_push(runtime_host, tenant, environment, commit).status_code == 202
        run_poll(runtime_host)
        now = wait_for_syncs(runtime_host, operator, environment, 4)
    finally:
        moved.rename(repository.path)

    assert failed.status_code == 200
    assert failed.json()["outcome"] == "fetch-failed" and failed.json()["run_id"] is None
    assert failed.json()["error"] == "/git: the repository cannot be read"  # no path, no host, no detail
    assert now["last_error"] == "/git: the repository cannot be read" and now["last_error_at"]
    assert now["last_applied_commit"] == commit
    assert [r["id"] for r in runs_of(runtime_host, operator, environment)] == [run["id"]]
    after = runtime_host.request("GET", f"runtime-cloud/environments/{environment}/specification", token=operator)
    assert after.json() == before.json()
    assert f"gqa-{environment[-8:]}" in target_queue_names(azurite)  # nothing was deleted

    recovered = sync_now(runtime_host, operator, environment).json()
    assert recovered["outcome"] == "up-to-date" and recovered["run_id"] == run["id"]
    assert status(runtime_host, operator, environment)["last_error"] is None


def test_a_file_that_is_not_a_specification_declares_nothing(runtime_host, operator, environment, repository):
    commit, run = _applied_first_commit(runtime_host, operator, environment, repository)
    with_secret = spec_yaml(environment) + b"    metadata:\n      password: hunter2hunter2\n"
    cases = {
        "bad YAML": ({FILE: b"environment: [unclosed\n"}, "/git"),
        "file deleted": ({FILE: None}, "does not exist"),
        "another environment": ({FILE: spec_yaml("someone-else")}, "not the bound"),
        "a secret in it": ({FILE: with_secret}, "/specification/resources/0/metadata/password"),
    }
    for name, (change, expected) in cases.items():
        head = repository.commit(change, message=name)
        answer = sync_now(runtime_host, operator, environment).json()
        assert answer["outcome"] == "fetch-failed", name
        assert expected in answer["error"], (name, answer["error"])
        assert answer["commit"] == head, name  # the head is known (local repository) even when its file is bad
        assert "hunter2" not in json.dumps(answer)

    assert [r["id"] for r in runs_of(runtime_host, operator, environment)] == [run["id"]]
    now = status(runtime_host, operator, environment)
    assert now["last_applied_commit"] == commit and now["behind"] is True and now["behind_commits"] == 4


def test_sync_windows_gate_automatic_syncs_but_not_an_operator(runtime_host, operator, tenant, environment, repository):
    commit = repository.commit({FILE: spec_yaml(environment)})
    always_denied = [{"kind": "deny", "schedule": "* * * * * *", "duration_minutes": 1}]
    assert bind(runtime_host, operator, environment, repository.path, sync_windows=always_denied).status_code == 201

    assert github_push(runtime_host, tenant, environment, commit).status_code == 202
    held = wait_for_syncs(runtime_host, operator, environment, 1)
    assert held["last_outcome"] == "outside-sync-window" and held["last_seen_commit"] == commit
    assert held["sync_window_open"] is False
    assert runs_of(runtime_host, operator, environment) == []

    manual = sync_now(runtime_host, operator, environment).json()
    assert manual["outcome"] == "declared" and manual["commit"] == commit

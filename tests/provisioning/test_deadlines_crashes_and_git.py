"""Approval deadlines, a host killed mid-apply, and specifications from Git."""

from __future__ import annotations

from dulwich import porcelain

from tests.conftest import REPO, git_sources_root
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import (
    WRITE,
    declare,
    specification,
    target_queue_names,
    unique,
    wait_for_run_state,
)
from tests.support.host import HostProcess, wait_until


def test_a_run_past_its_approval_deadline_expires(azurite, key_dir, mint, tmp_path):
    env = provisioning_settings(azurite, key_dir, RuntimeCloud__Provisioning__ApprovalTimeoutSeconds="3")
    host = HostProcess(REPO, env, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    try:
        run_id = declare(host, token, specification(unique("late"), "production")).json()["run_id"]

        run = wait_for_run_state(host, token, run_id, {"expired", "applied", "failed"})

        assert run["state"] == "expired"
        assert run["failure_reason"] == "approval-expired"
        assert "awaiting-approval" in [entry["state"] for entry in run["timeline"]]
    finally:
        host.stop()


def test_a_host_killed_during_apply_finishes_the_run_without_applying_twice(azurite, key_dir, mint, tmp_path):
    env = provisioning_settings(azurite, key_dir, RuntimeCloud__IaC__StepIntervalSeconds="1")
    environment = unique("crash")
    suffix = environment[-8:]
    names = [f"crash{n}-{suffix}" for n in range(6)]
    spec = specification(environment, resources=[{"type": "queue", "name": name} for name in names])
    token = mint("tenant-a", scopes=WRITE)
    host = HostProcess(REPO, env, tmp_path / "first.log").start()
    try:
        run_id = declare(host, token, spec).json()["run_id"]
        wait_until(lambda: any(name in target_queue_names(azurite) for name in names), timeout=60,
                   interval=0.1, message="the apply to begin")
        assert not set(names) <= target_queue_names(azurite), "the apply finished before the kill"
    finally:
        host.kill()

    restarted = HostProcess(REPO, env, tmp_path / "second.log", port=host.port).start()
    try:
        run = wait_for_run_state(restarted, token, run_id, {"applied", "failed"}, timeout=120)

        assert run["state"] == "applied", run
        assert set(names) <= target_queue_names(azurite)
        receipt = restarted.request("GET", f"runtime-cloud/runs/{run_id}/receipts/apply", token=token).json()
        addresses = [step["address"] for step in receipt["receipt"]["steps"]]
        assert sorted(addresses) == sorted(f"queue/{name}" for name in names)  # one step per resource
        assert receipt["verified"] is True
    finally:
        restarted.stop()


def test_a_specification_from_git_pins_the_commit(provisioning_host, mint, key_dir):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("git")
    repository = git_sources_root(key_dir) / environment  # the folder the test hosts allow
    repository.mkdir(parents=True)
    repo = porcelain.init(str(repository))
    (repository / "envs").mkdir()
    (repository / "envs" / "dev.yaml").write_text(
        f"environment: {environment}\n"
        "environment_class: non-production\n"
        "target: local-storage\n"
        "runner: embedded\n"
        "resources:\n"
        f"  - type: queue\n    name: fromgit-{environment[-8:]}\n")
    porcelain.add(repo, [str(repository / "envs" / "dev.yaml")])
    commit = porcelain.commit(repo, message=b"desired state", author=b"t <t@example.com>",
                              committer=b"t <t@example.com>").decode()
    branch = porcelain.active_branch(repo).decode()

    answer = provisioning_host.request("POST", "runtime-cloud/specifications", token=token, json={
        "git": {"repository": str(repository), "path": "envs/dev.yaml", "revision": branch}})
    assert answer.status_code == 202, answer.text

    run = wait_for_run_state(provisioning_host, token, answer.json()["run_id"], {"applied", "failed"})
    assert run["state"] == "applied"
    assert run["source"] == {"kind": "git", "repository": str(repository), "path": "envs/dev.yaml",
                             "revision": branch, "commit": commit}

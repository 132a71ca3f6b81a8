"""Approval deadlines, a host killed mid-apply, and specifications from Git."""

from __future__ import annotations

from collections import Counter

from dulwich import porcelain

from devhost.azurite import TARGET_ACCOUNT
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
from tests.support.storage_proxy import StorageProxy


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
    """The host dies while a create is in flight (made in the target, its answer not yet heard).

    The target is reached through a recording proxy, so "twice" is counted, not inferred: each
    queue is created (201) exactly once over both hosts, and nothing is deleted or rewritten.
    """
    proxy = StorageProxy(azurite.queue_port).start()
    target = azurite.connection_string(TARGET_ACCOUNT).replace(f":{azurite.queue_port}/", f":{proxy.port}/")
    env = provisioning_settings(
        azurite,
        key_dir,
        RuntimeCloudTarget__local_storage__Connection=target,
        # The dead host's work item comes back after 3 s (the least the host accepts) instead of 5 min.
        AzureFunctionsJobHost__extensions__durableTask__storageProvider__workItemQueueVisibilityTimeout="00:00:03",
        AzureFunctionsJobHost__extensions__durableTask__storageProvider__controlQueueVisibilityTimeout="00:00:03",
    )
    environment = unique("crash")
    names = [f"crash{n}-{environment[-8:]}" for n in range(6)]
    paths = {f"/{TARGET_ACCOUNT}/{name}" for name in names}

    def created() -> list[str]:
        return [
            e.path for e in proxy.exchanges if e.method == "PUT" and e.path in paths and not e.query and e.status == 201
        ]

    spec = specification(environment, resources=[{"type": "queue", "name": name} for name in names])
    token = mint("tenant-a", scopes=WRITE)
    proxy.hold_answers(lambda method, path: method == "PUT" and path in paths and len(created()) >= 3)
    host = HostProcess(REPO, env, tmp_path / "first.log").start()
    try:
        run_id = declare(host, token, spec).json()["run_id"]
        wait_until(lambda: proxy.held, timeout=60, interval=0.05, message="the third create to be in flight")
        host.kill()
        assert len(created()) == 3, "the kill came with the third create in flight, before the fourth"
    finally:
        host.kill()
        proxy.release()  # its answer goes nowhere: the dead host never heard it

    restarted = HostProcess(REPO, env, tmp_path / "second.log", port=host.port).start()
    try:
        run = wait_for_run_state(restarted, token, run_id, {"applied", "failed"}, timeout=120)

        assert run["state"] == "applied", run
        assert set(names) <= target_queue_names(azurite)
        assert Counter(created()) == Counter(paths), "every queue created exactly once over both hosts"
        rewrites = [
            e for e in proxy.exchanges if e.path in paths and (e.method == "DELETE" or e.query) and e.method != "GET"
        ]
        assert rewrites == [], "nothing deleted, and no metadata written again"
        receipt = restarted.request("GET", f"runtime-cloud/runs/{run_id}/receipts/apply", token=token).json()
        steps = receipt["receipt"]["steps"]
        assert sorted(step["address"] for step in steps) == sorted(f"queue/{name}" for name in names)
        assert {step["status"] for step in steps} == {"applied"}
        assert receipt["verified"] is True
    finally:
        restarted.stop()
        proxy.stop()


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
        f"  - type: queue\n    name: fromgit-{environment[-8:]}\n"
    )
    porcelain.add(repo, [str(repository / "envs" / "dev.yaml")])
    commit = porcelain.commit(
        repo, message=b"desired state", author=b"t <t@example.com>", committer=b"t <t@example.com>"
    ).decode()
    branch = porcelain.active_branch(repo).decode()

    answer = provisioning_host.request(
        "POST",
        "runtime-cloud/specifications",
        token=token,
        json={"git": {"repository": str(repository), "path": "envs/dev.yaml", "revision": branch}},
    )
    assert answer.status_code == 202, answer.text

    run = wait_for_run_state(provisioning_host, token, answer.json()["run_id"], {"applied", "failed"})
    assert run["state"] == "applied"
    assert run["source"] == {
        "kind": "git",
        "repository": str(repository),
        "path": "envs/dev.yaml",
        "revision": branch,
        "commit": commit,
        "release": None,
    }

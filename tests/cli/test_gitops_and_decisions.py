"""The CLI's GitOps commands on a real binding, and `runs watch` ending non-zero when a run is rejected."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

from bench._git import FILE, BareRepository
from tests.cli.conftest import Cli, as_person
from tests.conftest import git_sources_root
from tests.gitops.helpers import spec_yaml
from tests.provisioning.helpers import specification, unique


def test_gitops_bind_sync_status_suspend_resume(cli: Cli, key_dir: Path):
    operator = as_person(f"cli-git-{uuid.uuid4().hex[:6]}", "olivia", "Operator")
    environment = unique("cli-follow")
    repository = BareRepository(git_sources_root(key_dir) / f"{environment}.git")
    try:
        commit = repository.commit({FILE: spec_yaml(environment)})
        bound = cli(*operator, "--json", "gitops", "bind", environment, "--repository", str(repository.path),
                    "--path", FILE)  # fmt: skip
        assert bound.code == 0, bound.stderr
        assert bound.json()["branch"] == "main"

        synced = cli(*operator, "--json", "gitops", "sync", environment)
        assert synced.code == 0, synced.stderr
        assert synced.json()["outcome"] == "declared" and synced.json()["commit"] == commit
        applied = cli(*operator, "--json", "runs", "watch", synced.json()["run_id"], "--interval", "0.5")
        assert applied.code == 0 and applied.json()["source"]["commit"] == commit

        suspended = cli(*operator, "--json", "gitops", "suspend", environment, "--reason", "change freeze")
        assert suspended.code == 0 and suspended.json()["suspended"] is True
        refused = cli(*operator, "gitops", "sync", environment)
        assert refused.code == 4 and "binding-suspended" in refused.stderr
        resumed = cli(*operator, "--json", "gitops", "resume", environment)
        assert resumed.code == 0 and resumed.json()["suspended"] is False

        status = cli(*operator, "--json", "gitops", "status", environment)
        assert status.code == 0, status.stderr
        assert status.json()["last_declared_commit"] == commit
    finally:
        repository.close()
    assert cli(*operator, "gitops", "status", unique("never-bound")).code == 3


def test_watch_exits_1_when_the_run_is_rejected(cli: Cli, tmp_path: Path):
    alice, bob = as_person("tenant-a", "alice", "Operator"), as_person("tenant-a", "bob", "Operator")
    spec_file = tmp_path / "spec.json"
    spec_file.write_text(json.dumps({"specification": specification(unique("cli-no"), "production")}))
    run_id = cli(*alice, "--json", "declare", str(spec_file)).json()["run_id"]
    waiting = cli(*alice, "runs", "watch", run_id, "--until", "awaiting-approval", "--interval", "0.5")
    assert waiting.code == 0, waiting.stderr
    assert f"{run_id} (" in waiting.stderr and "awaiting approval by another person" in waiting.stderr  # its states
    assert "awaiting-approval" in waiting.stdout  # the run, for people

    rejected = cli(*bob, "--json", "runs", "reject", run_id, "--reason", "not this week")
    watched = cli(*alice, "--json", "runs", "watch", run_id, "--interval", "0.5")

    assert rejected.code == 0, rejected.stderr
    assert watched.code == 1 and watched.json()["state"] == "rejected"
    again = cli(*bob, "runs", "approve", run_id)  # decided already: refused
    assert again.code == 4 and again.stderr.startswith("error: 409")

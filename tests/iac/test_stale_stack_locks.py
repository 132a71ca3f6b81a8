"""A stack lock left in a self-managed Pulumi backend by a runner job that died: removed only when its owner
is proven dead (its job rows say so), reported in the run's log; any other lock is left and reported.

The backend's lock blobs and the job rows are real (the session's Azurite); where the Pulumi CLI would run,
a stand-in stack plays it (the test names say so): the CLI cannot be installed here.
"""

from __future__ import annotations

import json
import uuid
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from azure.core.exceptions import ResourceExistsError
from azure.storage.blob import BlobServiceClient, ContainerClient

from shared.desired_state.api import EnvironmentSpecification
from shared.iac.jobs.lock_owners import JobLockOwners
from shared.iac.jobs.store import JOBS_TABLE, JobStore
from shared.iac.model import Action, PlanResult, ResourceChange
from shared.iac.pulumi import runner as pulumi_runner
from shared.iac.pulumi.locks import BlobLockStore, clear_stale_locks
from shared.iac.pulumi.runner import PulumiRunner
from shared.iac.pulumi.saved_plans import BINDING_KEY, STACK_KEY, SavedPlans
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from tests.iac.conftest import DictJournal

STALE_SECONDS = 90


@pytest.fixture
def storage(azurite) -> StorageClients:
    clients = clients_from_connection_string(azurite.connection_string())
    try:
        clients.tables.create_table(JOBS_TABLE)
    except ResourceExistsError:
        pass
    return clients


@pytest.fixture
def state(azurite) -> ContainerClient:
    """The backend's container (``azblob://pulumi-state`` in Azure), one per test."""
    service = BlobServiceClient.from_connection_string(azurite.connection_string())
    container = service.get_container_client(f"pulumi-state-{uuid.uuid4().hex[:8]}")
    container.create_container()
    return container


def leave_lock(state: ContainerClient, project: str, stack: str, host: str, age_seconds: float) -> str:
    name = f".pulumi/locks/organization/{project}/{stack}/{uuid.uuid4()}.json"
    taken = (datetime.now(UTC) - timedelta(seconds=age_seconds)).isoformat().replace("+00:00", "Z")
    state.upload_blob(name, json.dumps({"pid": 4242, "username": "runner", "hostname": host, "timestamp": taken}))
    return name


def job_row(storage: StorageClients, environment: str, host: str, *, claimed_ago: float, beat_ago: float) -> str:
    job_id = f"run-{uuid.uuid4().hex[:8]}-apply-1"
    now = datetime.now(UTC)  # at the call: the code under test reads the clock when it runs
    storage.tables.get_table_client(JOBS_TABLE).upsert_entity(
        {
            "PartitionKey": job_id.rsplit("-apply-", 1)[0],
            "RowKey": job_id,
            "State": "running",
            "Attempt": 1,
            "Tenant": "tenant-a",
            "Environment": environment,
            "Host": host,
            "Pid": 77,
            "LaunchedAt": (now - timedelta(seconds=claimed_ago + 1)).isoformat(),
            "ClaimedAt": (now - timedelta(seconds=claimed_ago)).isoformat(),
            "HeartbeatAt": (now - timedelta(seconds=beat_ago)).isoformat(),
        }
    )
    return job_id


def owners(storage: StorageClients, environment: str) -> JobLockOwners:
    return JobLockOwners(
        JobStore(storage),
        tenant="tenant-a",
        environment=environment,
        current_job_id="this-job",
        stale_seconds=STALE_SECONDS,
        start_seconds=600,
    )


def names(state: ContainerClient) -> set[str]:
    return {blob.name for blob in state.list_blobs(name_starts_with=".pulumi/locks/")}


class StackWithoutCli:
    """The Automation API stack's surface an apply uses, recorded (the Pulumi CLI is mocked here)."""

    def __init__(self, state: ContainerClient) -> None:
        self._state = state
        self.locks_at_up: set[str] | None = None

    def set_all_config(self, values: dict[str, Any]) -> None:
        pass

    def export_stack(self) -> Any:
        from types import SimpleNamespace

        return SimpleNamespace(deployment={"resources": [], "pending_operations": []})

    def up(self, **_: Any) -> None:
        self.locks_at_up = names(self._state)


def test_a_lock_left_by_a_dead_job_is_removed_before_the_update_and_reported_with_the_cli_mocked(
    storage, state, target, tmp_path: Path, monkeypatch
):
    environment = f"prod-{uuid.uuid4().hex[:6]}"
    stack_name = f"tenant-a.{environment}"
    dead_job = job_row(storage, environment, "replica-7", claimed_ago=400, beat_ago=300)  # silent 300 s > 90 s
    lock = leave_lock(state, "shop", stack_name, "replica-7", age_seconds=310)
    program = tmp_path / "programs" / "shop"
    program.mkdir(parents=True)
    (program / "Pulumi.yaml").write_text("name: shop\nruntime: python\n")
    specification = EnvironmentSpecification.model_validate(
        {
            "tenant": "tenant-a",
            "environment": environment,
            "environment_class": "production",
            "target": "iac-tests",
            "runner": "pulumi",
            "pulumi": {"project": "shop", "stack": stack_name, "work_dir": "programs/shop"},
        }
    )
    plans = SavedPlans(state, tmp_path / "scratch")
    scratch = plans.scratch_path()
    scratch.write_text('{"resourcePlans": {}}')
    digest = plans.seal(specification, scratch)
    stack = StackWithoutCli(state)
    monkeypatch.setattr(PulumiRunner, "available", staticmethod(lambda: True))
    monkeypatch.setattr(pulumi_runner, "open_stack", lambda *args, **kwargs: stack)
    runner = PulumiRunner(
        work_root=str(tmp_path),
        saved_plans=plans,
        lock_owners=owners(storage, environment),
        lock_stale_seconds=STALE_SECONDS,
        lock_store=BlobLockStore(state),
    )
    plan = PlanResult(
        runner="pulumi",
        runner_version="3",
        changes=[ResourceChange(address="urn:x", type="t", name="n", action=Action.CREATE)],
        binding={BINDING_KEY: digest, STACK_KEY: f"shop/{stack_name}"},
    )

    result = runner.apply(specification, target, plan, DictJournal(), {})

    assert stack.locks_at_up == set()  # gone before the update ran
    removed = [line for line in result.logs if "removed the stale lock" in line]
    assert len(removed) == 1 and lock in removed[0] and dead_job in removed[0] and "replica-7" in removed[0]


def test_a_lock_whose_owner_lives_is_unknown_or_is_recent_is_left_and_reported_with_the_cli_mocked(storage, state):
    environment = f"prod-{uuid.uuid4().hex[:6]}"
    stack_name = f"tenant-a.{environment}"
    job_row(storage, environment, "replica-live", claimed_ago=400, beat_ago=2)  # heartbeat fresh: alive
    alive = leave_lock(state, "shop", stack_name, "replica-live", age_seconds=300)
    unknown = leave_lock(state, "shop", stack_name, "an-operator-laptop", age_seconds=3000)  # no job ran there
    job_row(storage, environment, "replica-8", claimed_ago=60, beat_ago=50)
    recent = leave_lock(state, "shop", stack_name, "replica-8", age_seconds=30)  # younger than the limit
    other = leave_lock(state, "shop", "tenant-a.elsewhere", "replica-live", age_seconds=3000)  # another stack

    lines = clear_stale_locks(
        BlobLockStore(state), "shop", stack_name, owners(storage, environment), stale_seconds=STALE_SECONDS
    )

    assert names(state) == {alive, unknown, recent, other}  # nothing removed
    assert len(lines) == 3 and all("left the lock" in line for line in lines)
    by_lock = {name: next(line for line in lines if name in line) for name in (alive, unknown, recent)}
    assert "its owner is alive" in by_lock[alive]
    assert "its owner is unknown" in by_lock[unknown]
    assert "younger than the job staleness limit" in by_lock[recent]

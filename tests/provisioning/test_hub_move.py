"""A run whose task hub moves A -> B -> A in the middle of its apply ends right (issue 30).

Two hosts of the app share one Azurite and one task hub: one holds the hub's
lease, the other waits for it. The holder is killed with SIGKILL while the
run's apply job runs, the other takes the lease over, a new host starts to
wait beside it, and the holder is killed again: the lease comes back to a
fresh host. The apply job runs on in its own process throughout. The run
must end applied with its receipt, its orchestration completed (a replay
that differed would fail it), and its checks few: each one a step call.
"""

from __future__ import annotations

from typing import Any

from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, target_queue_names, unique, wait_for_run_state
from tests.provisioning.test_runner_jobs import apply_receipt, job_settings, orchestration_history
from tests.support.host import HostProcess, wait_until

# The start's call, the checks of a 100 s apply backing off to 60 s (eight), the one the job's notice
# wakes, and one call in flight repeated by each of the two hub moves: a replay that looped would pass it.
MAX_APPLY_CALLS = 12
TAKEN_OVER = "taking over its lease"  # the local host's log line as it takes a dead holder's hub lease
WAITING = "the task hub is in use by another host"


def test_a_run_applies_once_and_its_orchestration_completes_while_the_task_hub_moves_twice(
    azurite, key_dir, mint, tmp_path
):
    settings = provisioning_settings(
        # 20 steps of 5 s: 100 s of apply, so that a kill, a takeover and a new host's start (each slower on a
        # loaded machine: the suite runs this module first, beside the other workers' starts) all fit inside
        # it before the hub moves back; on a quiet machine they take about 15 s. Checks back off from 0.25 s
        # to 60 s: seven in the first 32 s, one at 64 s, the next not before 124 s, and the job's notice wakes
        # the run when it ends (MAX_APPLY_CALLS).
        azurite,
        key_dir,
        **job_settings(
            unique("move"), RuntimeCloud__IaC__StepIntervalSeconds="5", RuntimeCloud__IaC__JobCheckSeconds="60"
        ),
    )
    hosts: list[HostProcess] = []

    def host() -> HostProcess:
        started = HostProcess(REPO, settings, tmp_path / f"host-{len(hosts) + 1}.log").start()
        hosts.append(started)
        return started

    token = mint("tenant-a", scopes=WRITE)
    environment = unique("move")
    names = [f"m{n}-{environment[-8:]}" for n in range(20)]
    try:
        first, second = host(), host()  # the second waits for the hub's lease
        run_id = declare(
            first, token, specification(environment, resources=[{"type": "queue", "name": name} for name in names])
        ).json()["run_id"]
        wait_until(lambda: names[0] in target_queue_names(azurite), timeout=60, interval=0.05, message="the apply")
        first.kill()  # A -> B
        wait_until(lambda: TAKEN_OVER in second.log(), timeout=30, message="the second host to take the hub over")
        third = host()
        wait_until(lambda: WAITING in third.log(), timeout=30, message="the third host to wait for the hub")
        assert names[-1] not in target_queue_names(azurite), "the apply finished before the hub moved back"
        second.kill()  # B -> A'

        run = wait_for_run_state(third, token, run_id, {"applied", "failed"}, timeout=180)

        assert run["state"] == "applied", run
        assert TAKEN_OVER in third.log()
        history = orchestration_history(third, run_id)
        assert history[-1]["EventType"] == "ExecutionCompleted" and history[-1]["OrchestrationStatus"] == "Completed"
        assert _apply_calls(history) <= MAX_APPLY_CALLS
        receipt = apply_receipt(third, token, run_id)
        assert sorted(step["address"] for step in receipt["steps"]) == sorted(f"queue/{name}" for name in names)
    finally:
        for each in hosts:
            each.stop()


def _apply_calls(history: list[dict[str, Any]]) -> int:
    scheduled = [event for event in history if event["EventType"] == "TaskScheduled"]
    return sum(1 for event in scheduled if event["Name"] == "provisioning_apply")

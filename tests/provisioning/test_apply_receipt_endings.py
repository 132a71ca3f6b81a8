"""Every run that started applying ends with an apply receipt, whatever ended it (issue 30).

Through the local host where the ending can be provoked from outside: a run
whose apply job was killed and whose orchestration ended is failed by the
reconciler, and its receipt lists what the step journal holds. At the
lifecycle level for each failure reason (most cannot be provoked while a run
applies): a run moved to ``applying`` with a step in its journal, ended by the
finish step the orchestration and the reconciler call.
"""

from __future__ import annotations

import os
import signal
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from shared.iac.model import Action, StepResult, StepStatus
from shared.platform.clock import now_iso
from shared.platform.storage.clients import clients_from_connection_string, shared_host_storage
from shared.provisioning.journal import TableStepJournal
from shared.provisioning.lifecycle import RunRef, RunSteps
from shared.provisioning.outcomes import Outcome
from shared.provisioning.runs import FailureReason, RunState
from shared.wiring import provisioning as wiring
from tests.conftest import REPO, app_settings
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, target_queue_names, unique, wait_for_run_state
from tests.provisioning.test_runner_jobs import job_rows, job_settings
from tests.support.azurite import Azurite
from tests.support.host import HostProcess, wait_until


def apply_receipt(host: HostProcess, token: str, run_id: str) -> dict[str, Any]:
    answer = host.request("GET", f"runtime-cloud/runs/{run_id}/receipts/apply", token=token)
    assert answer.status_code == 200, answer.text
    assert answer.json()["verified"] is True
    return answer.json()["receipt"]


def terminate(host: HostProcess, run_id: str) -> None:
    answer = host.request("POST", f"runtime/webhooks/durabletask/instances/{run_id}/terminate?reason=fault+test")
    assert answer.status_code in (200, 202), answer.text
    wait_until(
        lambda: (
            host.request("GET", f"runtime/webhooks/durabletask/instances/{run_id}").json().get("runtimeStatus")
            == "Terminated"
        ),
        timeout=30,
        message="the termination",
    )


def test_the_reconciler_s_apply_failed_ending_has_a_receipt_of_what_the_killed_job_applied(
    azurite, key_dir, mint, tmp_path
):
    # A pause between changes makes the apply last long enough to stop it half-way.
    settings = provisioning_settings(
        azurite, key_dir, **job_settings(unique("ends"), RuntimeCloud__IaC__StepIntervalSeconds="0.4")
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("ends")
    # Twelve changes 0.4 s apart: the ten left after the second is seen leave 4 s to terminate the orchestration
    # before the job ends the apply, on a loaded machine too.
    names = [f"e{n}-{environment[-8:]}" for n in range(12)]
    try:
        run_id = declare(
            host, token, specification(environment, resources=[{"type": "queue", "name": name} for name in names])
        ).json()["run_id"]
        wait_until(lambda: names[1] in target_queue_names(azurite), timeout=60, interval=0.05, message="apply")
        terminate(host, run_id)  # the orchestration ends without finishing the run (as a failed replay did)
        os.kill(int(job_rows(azurite, run_id)[f"{run_id}-apply-1"]["Pid"]), signal.SIGKILL)
        applied = {name for name in names if name in target_queue_names(azurite)}
        assert len(applied) < len(names), "the job finished before it was stopped"

        reconciled = host.request("POST", "admin/functions/provisioning_reconciler", json={"input": ""})
        assert reconciled.status_code == 202

        run = wait_for_run_state(host, token, run_id, {"failed"})
        assert run["failure_reason"] == "apply-failed" and "Terminated" in run["failure_detail"]
        receipt = apply_receipt(host, token, run_id)
        assert (receipt["outcome"], receipt["failure_reason"]) == ("failed", "apply-failed")
        journal = TableStepJournal(clients_from_connection_string(azurite.connection_string()), run_id).all()
        listed = [step["address"] for step in receipt["steps"]]
        assert sorted(listed) == sorted(step.address for step in journal)  # what the journal holds (it batches)
        assert {address.removeprefix("queue/") for address in listed} <= applied
    finally:
        host.stop()


# -- each failure reason, at the lifecycle level --------------------------------------------------


@pytest.fixture
def in_process_steps(azurite: Azurite, key_dir: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[RunSteps]:
    """The app's run steps in this process, on the same storage and settings as the session's host."""
    from shared.platform.storage import clients
    from shared.wiring import settings as app_settings_module

    for name, value in app_settings(azurite, key_dir).items():
        monkeypatch.setenv(name, value)

    def forget() -> None:
        app_settings_module.get_settings.cache_clear()
        monkeypatch.setattr(clients, "_shared", None)
        for value in vars(wiring).values():
            if callable(getattr(value, "cache_clear", None)) and getattr(value, "__module__", "") == wiring.__name__:
                value.cache_clear()

    forget()
    yield wiring.steps()
    forget()


def applying_with_one_step(host: HostProcess, token: str) -> tuple[RunRef, str]:
    """A production run reviewed and moved to ``applying`` with its first change in the step journal (its
    orchestration terminated: nothing else moves it). Returns the run and the journalled address."""
    environment = unique("ending")
    run_id = declare(host, token, specification(environment, "production")).json()["run_id"]
    wait_for_run_state(host, token, run_id, {"awaiting-approval"})
    terminate(host, run_id)
    plan = host.request("GET", f"runtime-cloud/runs/{run_id}/receipts/plan", token=token).json()["receipt"]
    address = plan["changes"][0]["address"]
    store = wiring.store()  # the run's row, moved as the apply step moves it
    run, etag = store.run_with_etag("tenant-a", environment, run_id)
    store.save_run(run.moved_to(RunState.APPLYING), etag)
    journal = TableStepJournal(shared_host_storage(), run_id)
    at = now_iso()
    journal.record(
        StepResult(address=address, action=Action.CREATE, status=StepStatus.APPLIED, started_at=at, finished_at=at)
    )
    journal.flush()
    return RunRef("tenant-a", environment, run_id), address


@pytest.mark.parametrize("reason", list(FailureReason))
def test_a_run_that_started_applying_ends_with_its_apply_receipt_for_every_reason(
    reason, runtime_host, in_process_steps, mint
):
    token = mint("tenant-a", scopes=WRITE)
    ref, address = applying_with_one_step(runtime_host, token)
    outcome = Outcome.CANCELLED if reason is FailureReason.CANCELLED else Outcome.FAILED

    in_process_steps.finish(ref, outcome, reason.value, f"ended: {reason.value}")

    run = wait_for_run_state(runtime_host, token, ref.run_id, {"failed", "cancelled"})
    assert run["failure_reason"] == reason.value
    receipt = apply_receipt(runtime_host, token, ref.run_id)
    assert receipt["outcome"] == ("cancelled" if outcome is Outcome.CANCELLED else "failed")
    assert (receipt["failure_reason"], receipt["failure_detail"]) == (reason.value, f"ended: {reason.value}")
    assert [step["address"] for step in receipt["steps"]] == [address]

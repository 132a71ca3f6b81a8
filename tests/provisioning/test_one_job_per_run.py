"""One job start per unattended run, through the local host: a run that needs no approval plans and applies in
one job execution (its plan job is handed the apply); one that waits for a person starts two; a plan job
that waits in vain ends, and the apply takes a job of its own from the queue.

An execution is a process: the rows of two jobs run by one execution carry the same ``Pid`` and ``Host``,
and the apply's row names the plan job it was handed to (``Via``).
"""

from __future__ import annotations

import json

from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.provisioning.test_runner_jobs import apply_receipt, job_rows, job_settings
from tests.support.host import HostProcess


def executions(rows: dict[str, dict]) -> int:
    """Job starts: the rows whose job was not handed to another's execution."""
    return sum(1 for row in rows.values() if not row.get("Via"))


def test_a_non_production_run_plans_and_applies_in_one_job_execution(azurite, key_dir, mint, tmp_path):
    settings = provisioning_settings(azurite, key_dir, **job_settings(unique("one")))
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    try:
        spec = specification(unique("one"))
        run_id = declare(host, token, spec).json()["run_id"]

        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=120)

        assert run["state"] == "applied", run
        rows = job_rows(azurite, run_id)
        plan, apply = rows[f"{run_id}-plan-1"], rows[f"{run_id}-apply-1"]
        assert set(rows) == {plan["RowKey"], apply["RowKey"]}
        assert executions(rows) == 1
        assert apply["Via"] == plan["RowKey"]
        assert (apply["Pid"], apply["Host"]) == (plan["Pid"], plan["Host"])  # the same process applied
        handed = json.loads(plan["Next"])  # the host's go: the apply's request, never queued
        assert handed["job_id"] == apply["RowKey"] and handed["kind"] == "apply"
        receipt = apply_receipt(host, token, run_id)
        assert {step["address"] for step in receipt["steps"]} == {f"{r['type']}/{r['name']}" for r in spec["resources"]}
        assert receipt["plan_digest"] == run["plan_digest"]  # what the job applied is the receipted plan
    finally:
        host.stop()


def test_a_production_run_waits_for_its_approval_and_starts_two_job_executions(azurite, key_dir, mint, tmp_path):
    settings = provisioning_settings(azurite, key_dir, **job_settings(unique("two")))
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    try:
        run_id = declare(host, token, specification(unique("two"), environment_class="production")).json()["run_id"]
        planned = wait_for_run_state(host, token, run_id, {"awaiting-approval", "failed"})
        assert planned["state"] == "awaiting-approval", planned
        plan = job_rows(azurite, run_id)[f"{run_id}-plan-1"]
        assert plan["State"] == "finished" and not plan.get("AwaitsNext")  # it ended at once: a person decides

        approved = host.request(
            "POST",
            f"runtime-cloud/runs/{run_id}/approve",
            token=operator,
            json={"plan_digest": planned["plan_digest"], "reason": "reviewed"},
        )
        assert approved.status_code in (200, 202), approved.text
        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=120)

        assert run["state"] == "applied", run
        rows = job_rows(azurite, run_id)
        assert set(rows) == {f"{run_id}-plan-1", f"{run_id}-apply-1"}
        assert executions(rows) == 2
        assert rows[f"{run_id}-apply-1"]["Pid"] != rows[f"{run_id}-plan-1"]["Pid"]
    finally:
        host.stop()


def test_a_plan_job_whose_go_comes_too_late_ends_and_the_apply_takes_a_job_of_its_own(azurite, key_dir, mint, tmp_path):
    # A millisecond's wait: the job gives up before the host has read its plan, let alone receipted it.
    overrides = {"RuntimeCloud__IaC__JobHandoverSeconds": "0.001"}
    settings = provisioning_settings(azurite, key_dir, **job_settings(unique("late"), **overrides))
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    try:
        run_id = declare(host, token, specification(unique("late"))).json()["run_id"]

        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=120)

        assert run["state"] == "applied", run
        rows = job_rows(azurite, run_id)
        assert rows[f"{run_id}-plan-1"]["Next"] == "gone"
        assert executions(rows) == 2 and not rows[f"{run_id}-apply-1"].get("Via")
        assert rows[f"{run_id}-apply-1"]["State"] == "finished"
    finally:
        host.stop()

"""A job request leaves the queue only once its job has claimed its row (issue 30).

The launcher (the local scaler; the Container Apps job's ``once`` alike)
takes a request hidden and forks the job, which claims its row and only then
deletes the request. Here a scaler is killed with SIGKILL between the two:
it took the plan job's request and stalls where it would fork (its ``_fork``
replaced in that process, to stop it at exactly that point). The request is
still in the queue; a fresh scaler takes it once it shows again and the job
runs as the first attempt: no second attempt was launched, which the run
does only after ``JobStartSeconds``.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

from azure.storage.queue import QueueClient

from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import WRITE, declare, specification, unique, wait_for_run_state
from tests.provisioning.test_runner_jobs import job_rows, job_settings
from tests.support.host import HostProcess, wait_until

# A scaler that takes requests as the real one does but stalls where it would fork its job.
STALLED_SCALER = """
import sys, time
from pathlib import Path
import runner_job.scaler as scaler

def stall(taken, storage):
    Path(sys.argv[1]).write_text(taken.request.job_id)
    time.sleep(3600)

scaler._fork = stall
from runner_job.__main__ import main
main(["scale"])
"""


def scaler(env: dict[str, str], log: Path, *command: str) -> subprocess.Popen[bytes]:
    environment = {**os.environ, **env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
    with log.open("ab") as output:
        return subprocess.Popen(  # stdin stays open: a scaler stops when it closes
            [sys.executable, *command], cwd=REPO, env=environment, stdin=subprocess.PIPE, stdout=output, stderr=output
        )


def test_a_scaler_killed_between_taking_a_request_and_its_job_s_claim_loses_no_job(azurite, key_dir, mint, tmp_path):
    queue = unique("claim")
    # JobStartSeconds 60: a taken request hides for 20 s (a third of it), and a job forked on a loaded machine
    # (the parallel suite) still claims its row in time, so no attempt is launched again; no scaler runs
    # beside the host.
    settings = provisioning_settings(
        azurite,
        key_dir,
        DEVHOST_RUNNER_JOB_COMMAND="off",
        **job_settings(queue, RuntimeCloud__IaC__JobStartSeconds="60"),
    )
    host = HostProcess(REPO, settings, tmp_path / "host.log").start()
    token = mint("tenant-a", scopes=WRITE)
    taken_marker = tmp_path / "taken"
    started: list[subprocess.Popen[bytes]] = []
    try:
        run_id = declare(host, token, specification(unique("claim"))).json()["run_id"]
        stalled = scaler(settings, tmp_path / "stalled.log", "-c", STALLED_SCALER, str(taken_marker))
        started.append(stalled)
        wait_until(taken_marker.exists, timeout=60, message="the stalled scaler to take the request")
        os.kill(stalled.pid, signal.SIGKILL)
        stalled.wait()

        requests = QueueClient.from_connection_string(azurite.connection_string(), queue)
        assert taken_marker.read_text() == f"{run_id}-plan-1"
        assert requests.get_queue_properties().approximate_message_count == 1  # hidden, not deleted
        assert job_rows(azurite, run_id)[f"{run_id}-plan-1"]["State"] == "launched"  # never claimed

        started.append(scaler(settings, tmp_path / "scaler.log", "-m", "runner_job", "scale"))
        run = wait_for_run_state(host, token, run_id, {"applied", "failed"}, timeout=240)

        assert run["state"] == "applied", run
        rows = job_rows(azurite, run_id)
        assert set(rows) == {f"{run_id}-plan-1", f"{run_id}-apply-1"}  # the first attempt ran: none launched again
        assert rows[f"{run_id}-plan-1"]["State"] == "finished"
        wait_until(
            lambda: requests.get_queue_properties().approximate_message_count == 0,
            timeout=30,
            message="each request deleted once its job claimed its row",
        )
    finally:
        for process in started:
            if process.poll() is None:
                assert process.stdin is not None
                process.stdin.close()
                process.wait(timeout=30)
        host.stop()

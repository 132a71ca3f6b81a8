"""``python -m runner_job serve``: a warm runner, taking job requests one at a time and wiping between runs.

A warm runner (infra/runtime_cloud_infra/warm_runners.py) is a long-lived
replica beside the queue-scaled job. It takes a request from the job queue as
an execution's ``once`` does (hidden until its job claims the row, then
deleted), and runs it in a child process that starts a session of its own.
When the child ends (or outlives ``RUNNER_JOB_TIMEOUT_SECONDS``, the job's
``replicaTimeout``, which no platform enforces on a replica), the runner:

1. kills everything left in that session, and with ``--reap-user`` every
   other process of its user but itself and its ancestors (in the container:
   all a tenant's program could have left running, even one that made a
   session of its own);
2. deletes every file and folder its user owns under each ``--wipe`` folder
   (the image's home and ``/tmp``), leaving what another user owns: the
   code, the virtualenvs, the Pulumi CLI and the provider plugins are root's
   and read-only to the runner, so no run can have changed them;
3. makes ``PULUMI_HOME`` and the workspace again, empty, and takes the next one.

It refuses to run as root: its wipe deletes what its user owns, which for
root is everything the image holds. The parent makes no thread and never
reads a run's input, so nothing of a run is in its memory and the fork is safe.
"""

from __future__ import annotations

import os
import signal
import stat
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from runner_job.job import run_request
from runner_job.scaler import Taken, load_engines, take_one
from shared.iac.api import IaCSettings
from shared.platform import telemetry
from shared.platform.logs import app_logger
from shared.platform.storage.clients import StorageClients

log = app_logger("runner_job")

IDLE_POLL_SECONDS = 1.0  # an idle warm runner reads the queue once a second
WAIT_STEP_SECONDS = 0.2
TIMEOUT_VARIABLE = "RUNNER_JOB_TIMEOUT_SECONDS"
DEFAULT_TIMEOUT_SECONDS = 14400.0  # infra's runnerJobTimeoutSeconds default


@dataclass(frozen=True)
class Scrub:
    """What a warm runner clears between two runs."""

    wipe: tuple[Path, ...]  # everything the runner's user owns below these goes; the folders stay
    remake: tuple[Path, ...]  # made again, empty, after the wipe (PULUMI_HOME, the workspace)
    reap_user: bool  # also end every other process of the user (a container's), not only the run's session


def serve(storage: Callable[[], StorageClients], iac: IaCSettings, scrub: Scrub, runs: int | None = None) -> int:
    """Serve requests until ``runs`` of them have run (None: for ever)."""
    if os.geteuid() == 0:
        log.error("serve refuses to run as root: its wipe would delete what the image holds")
        return 2
    clients = storage()
    load_engines()  # once, before the first fork: each run's child starts with it loaded
    timeout = float(os.environ.get(TIMEOUT_VARIABLE) or DEFAULT_TIMEOUT_SECONDS)
    clear(scrub)  # whatever an earlier process of this replica left
    served = 0
    log.info("warm runner serving queue %s", iac.job_queue)
    while runs is None or served < runs:
        try:
            taken = take_one(clients, iac)
        except Exception as error:  # noqa: BLE001 - the store may be down: poll again later
            log.warning("polling %s failed: %s", iac.job_queue, type(error).__name__)
            taken = None
        if taken is None:
            time.sleep(IDLE_POLL_SECONDS)
            continue
        _run_in_session(taken, storage, timeout)
        clear(scrub)
        served += 1
    return 0


def _run_in_session(taken: Taken, storage: Callable[[], StorageClients], timeout: float) -> None:
    pid = os.fork()
    if pid == 0:
        os.setsid()  # the run's session: everything it starts is ended with it
        _child(taken, storage)
    deadline = time.monotonic() + timeout
    while os.waitpid(pid, os.WNOHANG) == (0, 0):
        if time.monotonic() > deadline:
            log.error("runner job %s outlived %.0f s; ended", taken.request.job_id, timeout)
            _kill_group(pid)
        time.sleep(WAIT_STEP_SECONDS)
    _kill_group(pid)  # what the run left running in its session


def _child(taken: Taken, storage: Callable[[], StorageClients]) -> None:
    code = 1
    try:
        telemetry.configure()  # after the fork, as the scaler's children
        clients = storage()
        run_request(taken.request, clients, claimed=lambda: taken.release(clients))
        code = 0
    except BaseException:
        log.exception("runner job %s failed", taken.request.job_id)
    finally:
        try:
            telemetry.flush()
        except Exception as error:  # noqa: BLE001 - telemetry lost is reported, never the job's failure
            log.warning("the job's telemetry could not be exported: %s", type(error).__name__)
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _kill_group(pgid: int) -> None:
    try:
        os.killpg(pgid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass


def clear(scrub: Scrub) -> None:
    """The processes and files a run left, gone; the folders a run needs, there and empty."""
    if scrub.reap_user:
        reap_user_processes()
    _reap_children()
    uid = os.geteuid()
    for folder in scrub.wipe:
        if folder.is_dir():
            wipe(folder, uid)
    for folder in scrub.remake:
        folder.mkdir(parents=True, exist_ok=True)


def wipe(folder: Path, uid: int) -> None:
    """Delete every entry below ``folder`` that ``uid`` owns; another user's entries (and what is in them) stay."""
    for entry in list(folder.iterdir()):
        try:
            info = entry.lstat()
        except FileNotFoundError:
            continue
        if info.st_uid != uid:
            continue  # root's: read-only to the runner, so nothing of a run's is in it
        if stat.S_ISDIR(info.st_mode):
            entry.chmod(0o700)  # a run may have made its folder unreadable to hide it
            wipe(entry, uid)
            try:
                entry.rmdir()
            except OSError:  # holds another user's entry (PULUMI_HOME's root-owned plugins): it stays, emptied
                pass
        else:
            entry.unlink()


def reap_user_processes() -> None:
    """Kill every process of this user but this one and its ancestors (a container's: the run's leftovers)."""
    uid, keep = os.geteuid(), _ancestors()
    for _ in range(10):  # a leftover may fork while it is looked for
        found = [pid for pid in _pids() if pid not in keep and uid in _uids(pid)]
        if not found:
            return
        for pid in found:
            try:
                os.kill(pid, signal.SIGKILL)
            except (ProcessLookupError, PermissionError):
                pass
        _reap_children()


def _reap_children() -> None:
    """Collect ended children (a container's first process adopts the orphans of every run)."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def _pids() -> list[int]:
    return [int(entry.name) for entry in Path("/proc").iterdir() if entry.name.isdigit()]


def _status(pid: int) -> dict[str, str]:
    try:
        lines = Path(f"/proc/{pid}/status").read_text().splitlines()
    except OSError:
        return {}
    return dict(line.split(":", 1) for line in lines if ":" in line)


def _uids(pid: int) -> set[int]:
    """The real, effective, saved and filesystem uids of a live process (none for a zombie or a gone one)."""
    status = _status(pid)
    if status.get("State", "").strip().startswith("Z"):
        return set()
    return {int(value) for value in status.get("Uid", "").split()}


def _ancestors() -> set[int]:
    found, pid = set(), os.getpid()
    while pid > 0 and pid not in found:
        found.add(pid)
        pid = int(_status(pid).get("PPid", "0").strip() or 0)
    return found

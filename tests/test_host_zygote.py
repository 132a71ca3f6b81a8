"""Test hosts forked from the worker's zygote (tests/support/host_zygote.py) are hosts like any other.

A forked host serves requests, stops cleanly on SIGINT with exit code 0 (running the exit handlers
the app registered, as an interpreter does at its end) and reports a SIGKILL as
``-9``, as a ``subprocess.Popen`` would; its parent is the zygote, whose parent is this test process.
A host started from another thread before there is a zygote is a fresh interpreter instead. A forked
host of the app gets a job scaler the zygote forks (through tests/support/scaler_shim.py), which stops
with its host and dies with its shim, unless the host's settings name a scaler command of their own.
"""

from __future__ import annotations

import os
import re
import signal
import socket
import sys
import threading
from pathlib import Path

import pytest

from devhost.azurite import Azurite
from tests.conftest import FIXTURE_APP, REPO, app_settings
from tests.support import host_zygote
from tests.support.host import HostProcess, wait_until
from tests.support.host_zygote import ForkedHost, zygote


def _parent_of(pid: int) -> int:
    return int(Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[1])


def _fixture_host(azurite: Azurite, key_dir: Path, tmp_path: Path, name: str, **overrides: str) -> HostProcess:
    settings = app_settings(azurite, key_dir, FIXTURE_WORK_QUEUE=f"zygote-{name}", **overrides)
    return HostProcess(FIXTURE_APP, settings, tmp_path / f"{name}.log")


def test_a_forked_host_serves_stops_cleanly_and_is_a_child_of_the_zygote(
    azurite: Azurite, key_dir: Path, tmp_path: Path
) -> None:
    host = _fixture_host(azurite, key_dir, tmp_path, "forked").start()
    forks = zygote()
    try:
        assert isinstance(host._process, ForkedHost)
        assert forks is not None and _parent_of(host.pid) == forks._process.pid
        assert _parent_of(forks._process.pid) == os.getpid()
        answer = host.request("GET", "/echo/zygote")
        assert answer.status_code == 200 and answer.json()["route_params"] == {"name": "zygote"}
    finally:
        code = host.stop()
    assert code == 0, host.log()[-2000:]
    assert "Host started" in host.log()


def test_a_forked_host_that_stops_runs_its_exit_handlers_as_an_interpreter_does(
    azurite: Azurite, key_dir: Path, tmp_path: Path
) -> None:
    # The product flushes its telemetry's batches in an exit handler: a forked host that skipped them lost
    # the spans of its last second (a job's parent span, in tests/provisioning/test_runner_jobs.py).
    exit_file = tmp_path / "exit-handlers"
    host = _fixture_host(azurite, key_dir, tmp_path, "exiting", FIXTURE_EXIT_FILE=str(exit_file)).start()
    pid = host.pid
    assert isinstance(host._process, ForkedHost)
    assert host.request("GET", "/echo/exiting").status_code == 200  # the app is imported: its handler is set
    assert not exit_file.exists()
    assert host.stop() == 0, host.log()[-2000:]
    assert exit_file.read_text(encoding="utf-8") == f"exit handlers ran in {pid}"


def test_a_killed_forked_host_reports_the_signal_as_popen_does(azurite: Azurite, key_dir: Path, tmp_path: Path) -> None:
    host = _fixture_host(azurite, key_dir, tmp_path, "killed").start()
    host.kill()
    assert host._process is not None and host._process.returncode == -signal.SIGKILL


def test_a_host_started_first_from_another_thread_is_a_fresh_interpreter(
    azurite: Azurite, key_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The zygote is started from the main thread only (its parent-death signal follows the thread that
    started it): a host started from another thread while there is none is a fresh interpreter."""
    monkeypatch.setattr(host_zygote, "_zygote", None)
    host = _fixture_host(azurite, key_dir, tmp_path, "threaded")
    failures: list[BaseException] = []

    def start() -> None:
        try:
            host.start()
        except BaseException as error:  # reported by the test below
            failures.append(error)

    starter = threading.Thread(target=start)
    starter.start()
    starter.join(timeout=90)
    try:
        assert not failures, failures
        assert host._process is not None and not isinstance(host._process, ForkedHost)
        assert _parent_of(host.pid) == os.getpid()
        assert b"devhost" in Path(f"/proc/{host.pid}/cmdline").read_bytes()
        assert host_zygote._zygote is None
    finally:
        host.stop()


# --- the hosts' job scalers (tests/support/scaler_shim.py) --------------------------------------------


def _scaler_pids(host: HostProcess) -> list[int]:
    """The pids of the job scalers the host has started, in order (each logs its pid as it starts)."""
    return [int(pid) for pid in re.findall(r"runner_job\[(\d+)\]: runner job scaler reading queue", host.log())]


def _shims_of(host: HostProcess) -> set[int]:
    return {pid for pid in _children_of(host.pid) if _is_shim(pid)}


def _is_shim(pid: int) -> bool:
    try:
        return b"scaler_shim.py" in Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:  # it ended while we looked
        return False


def _children_of(pid: int) -> set[int]:
    found = set()
    for entry in Path("/proc").iterdir():
        try:
            if entry.name.isdigit() and _parent_of(int(entry.name)) == pid:
                found.add(int(entry.name))
        except (OSError, IndexError):  # it ended while we looked
            continue
    return found


def _app_host_and_its_scaler(azurite: Azurite, key_dir: Path, tmp_path: Path) -> tuple[HostProcess, int, int]:
    """A forked host of the app, its job scaler's pid (the zygote's child) and its shim's (the host's child)."""
    host = HostProcess(REPO, app_settings(azurite, key_dir), tmp_path / "app.log").start()
    try:
        (scaler,) = wait_until(lambda: _scaler_pids(host), timeout=30, message="the host's job scaler")
        (shim,) = _shims_of(host)
    except BaseException:
        host.stop()
        raise
    return host, scaler, shim


def _gone(pid: int) -> bool:
    return not Path(f"/proc/{pid}").exists()


def test_a_forked_host_s_job_scaler_is_forked_by_the_zygote_and_stops_with_its_host(
    azurite: Azurite, key_dir: Path, tmp_path: Path
) -> None:
    host, scaler, shim = _app_host_and_its_scaler(azurite, key_dir, tmp_path)
    forks = zygote()
    assert forks is not None
    try:
        assert _parent_of(scaler) == forks._process.pid
        assert shim in _children_of(host.pid)  # the host's child, whose standard input is the host's pipe
        assert os.readlink(f"/proc/{shim}/fd/0") == os.readlink(f"/proc/{scaler}/fd/0")
    finally:
        assert host.stop() == 0, host.log()[-2000:]
    wait_until(lambda: _gone(scaler) and _gone(shim), timeout=30, message="the scaler and its shim to end")
    assert "runner job scaler stopping (its host went away)" in host.log()


def test_a_killed_scaler_shim_takes_its_scaler_with_it_and_the_host_starts_another(
    azurite: Azurite, key_dir: Path, tmp_path: Path
) -> None:
    host, scaler, shim = _app_host_and_its_scaler(azurite, key_dir, tmp_path)
    try:
        os.kill(shim, signal.SIGKILL)  # what the host does to a scaler that does not stop in time
        wait_until(lambda: _gone(scaler), timeout=30, message="the killed shim's scaler to end")
        (again,) = wait_until(lambda: _scaler_pids(host)[1:], timeout=60, message="the host to start another")
        assert again != scaler and not _gone(again)
        assert len(_shims_of(host)) == 1
    finally:
        assert host.stop() == 0, host.log()[-2000:]


def test_a_host_whose_settings_name_a_scaler_command_runs_that_command(
    azurite: Azurite, key_dir: Path, tmp_path: Path
) -> None:
    command = f"{sys.executable} -m runner_job scale"
    settings = app_settings(azurite, key_dir, DEVHOST_RUNNER_JOB_COMMAND=command)
    host = HostProcess(REPO, settings, tmp_path / "app.log").start()
    try:
        (scaler,) = wait_until(lambda: _scaler_pids(host), timeout=30, message="the host's job scaler")
        assert _parent_of(scaler) == host.pid  # a fresh interpreter, the host's own child
        assert Path(f"/proc/{scaler}/cmdline").read_bytes().split(b"\0")[1:4] == [b"-m", b"runner_job", b"scale"]
        assert not _shims_of(host)
    finally:
        assert host.stop() == 0, host.log()[-2000:]


def test_a_connection_to_the_scaler_socket_that_is_no_shim_forks_nothing_and_the_zygote_serves_on(
    azurite: Azurite, key_dir: Path, tmp_path: Path
) -> None:
    host, _, shim = _app_host_and_its_scaler(azurite, key_dir, tmp_path)
    forks = zygote()
    assert forks is not None
    try:
        socket_path = Path(f"/proc/{shim}/cmdline").read_bytes().split(b"\0")[-2].decode()
        children = _children_of(forks._process.pid)
        for garbage in (b"not json\n", b'{"env": {}, "cwd": "/"}\n', b""):  # the last: connects and leaves
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as stranger:
                stranger.connect(socket_path)
                stranger.sendall(garbage)
        other = _fixture_host(azurite, key_dir, tmp_path, "after-strangers").start()  # the zygote still forks
        try:
            assert forks.alive and _children_of(forks._process.pid) == children | {other.pid}
        finally:
            assert other.stop() == 0
    finally:
        assert host.stop() == 0, host.log()[-2000:]

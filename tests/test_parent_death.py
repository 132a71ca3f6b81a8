"""Azurite and local hosts end with the process that started them, even when it is killed (Linux).

Test hosts get the same arrangement (tests/support/host.py); a host killed with its worker dies as in a crash.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest

from devhost.azurite import REPO, Azurite
from tests.support.host import wait_until

# A stand-in for a test worker: it starts an Azurite the way the tests do, prints the child's pid, then
# waits to be killed without any chance to stop what it started.
STARTER = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    from devhost.azurite import Azurite
    azurite = Azurite(Path(sys.argv[1])).start()
    print(azurite._process.pid, flush=True)
    time.sleep(600)
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_an_azurite_ends_when_the_process_that_started_it_is_killed(tmp_path: Path) -> None:
    starter = subprocess.Popen(
        [sys.executable, "-c", STARTER, str(tmp_path / "azurite")],
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert starter.stdout is not None
        child = int(starter.stdout.readline())
        assert _alive(child) and b"azurite" in Path(f"/proc/{child}/cmdline").read_bytes()
        starter.send_signal(signal.SIGKILL)
        starter.wait()
        wait_until(lambda: not _alive(child), timeout=30, message="Azurite to end with its parent")
    finally:
        starter.kill()


def _alive(pid: int) -> bool:
    """Running, and not a zombie left for whoever adopted it to reap."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat[stat.rindex(")") + 2] != "Z"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the parent-death signal is Linux's")
def test_an_azurite_started_from_a_thread_outlives_the_thread(tmp_path: Path) -> None:
    """The kernel signals on the end of the starting *thread*: a store brought back by a timer thread must stay."""
    started: list[Azurite] = []
    starter = threading.Thread(target=lambda: started.append(Azurite(tmp_path / "azurite").start()))
    starter.start()
    starter.join()
    [azurite] = started
    try:
        time.sleep(2.0)  # a signal sent when the thread ended would have landed by now
        assert azurite._process is not None and azurite._process.poll() is None
    finally:
        azurite.stop(grace_seconds=0.5)

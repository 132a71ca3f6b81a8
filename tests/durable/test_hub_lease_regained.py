"""A host that takes the task hub's lease back, in the same process, plays no episode on an old copy.

Found by the chaos run (``make chaos``): a host's Durable extension lost the hub's lease and restarted
in the same process; another host ran episodes meanwhile; when the first host held the hub again it
played the next episode on the copy of the instance it remembered from before, wrote that episode's
history rows where the other host's committed rows were, and the replay that followed failed the run's
orchestration as non-deterministic. Here host A is frozen (SIGSTOP) until its lease lapses, host B takes
the hub and commits an episode, A is thawed (its renewal fails, its extension restarts and waits), B is
killed, and A, holding the hub again, must play the next event on the instance as B left it.
"""

from __future__ import annotations

import os
import signal

from tests.conftest import app_settings
from tests.durable.conftest import DURABLE_APP
from tests.durable.support import DurableApp, new_hub, settings_for
from tests.support.host import HostProcess, wait_until

TAKEN_OVER = "taking over its lease"  # the local host's log line as it takes a dead holder's hub lease
WAITING = "the task hub is in use by another host"
EVENTS = "runtime/webhooks/durabletask/instances/{}/raiseEvent/{}"


def test_a_host_that_takes_the_hub_back_plays_on_what_the_other_host_committed(azurite, key_dir, tmp_path):
    hub = new_hub()
    settings = app_settings(azurite, key_dir, **settings_for(hub))
    first = HostProcess(DURABLE_APP, settings, tmp_path / "a.log").start()
    second = HostProcess(DURABLE_APP, settings, tmp_path / "b.log")
    try:
        second.start()
        wait_until(lambda: WAITING in second.log(), timeout=30, message="B to wait for the hub")
        app = DurableApp(first, azurite.connection_string(), hub)
        instance = app.start("two_events")["id"]
        app.wait_for_custom_status(instance, "waiting for First")  # A played it and remembers the instance

        os.kill(first.pid, signal.SIGSTOP)  # A's lease lapses (15 s); B takes the hub and plays the event
        assert second.request("POST", EVENTS.format(instance, "First"), json="one").status_code == 202
        on_b = DurableApp(second, azurite.connection_string(), hub)
        on_b.wait_for_custom_status(instance, "waiting for Second", timeout=60)  # an episode A never saw

        os.kill(first.pid, signal.SIGCONT)  # A's renewal fails: its extension restarts and waits for the hub
        wait_until(lambda: WAITING in first.log(), timeout=60, message="A to wait for the hub")
        second.kill()  # A sees B gone and takes the hub back, in the same process
        wait_until(lambda: TAKEN_OVER in first.log(), timeout=60, message="A to take the hub back")
        assert first.request("POST", EVENTS.format(instance, "Second"), json="two").status_code == 202

        finished = app.wait(instance, timeout=60)
        assert finished["runtimeStatus"] == "Completed", finished
        assert finished["output"] == ["one", "two"]
    finally:
        os.kill(first.pid, signal.SIGCONT)
        first.stop()
        second.stop()

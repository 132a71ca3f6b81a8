"""The local job scaler rides out its store's absence and still stops when its host goes away.

The scaler (``python -m runner_job scale``, what the local host starts beside itself) stops taking work
when its standard input closes, and it looks at its input between polls of the job queue. A poll used
to sit in the storage SDK's retries (15 s and more between tries, about a minute a poll) while the
store was gone, so a scaler whose Azurite had been stopped under it (``make run`` ended, a test's
outage) outlived its host by a minute or more. Its poll no longer retries (the loop polls again), and
it says once that polling fails and once that it works again, not once a second.
"""

from __future__ import annotations

import time
from pathlib import Path

from devhost.azurite import Azurite
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import unique
from tests.provisioning.test_job_request_claim import scaler
from tests.provisioning.test_runner_jobs import job_settings
from tests.support.host import wait_until

# Far above a scaler that sees its input close within a poll (about a second), far below one whose poll
# waits out the SDK's retries (15 + 18 + 24 s, more with jitter).
STOPS_WITHIN_SECONDS = 20
# The scaler polls an idle queue once a second: this many seconds of a dead store is several failed polls.
DOWN_SECONDS = 3


def _log(path: Path) -> str:
    return path.read_text(errors="replace") if path.exists() else ""


def test_a_scaler_says_once_its_store_is_gone_and_back_and_stops_when_its_host_goes_away(key_dir, tmp_path):
    store = Azurite(tmp_path / "store").start()
    queue = unique("gone")
    log = tmp_path / "scaler.log"
    process = scaler(provisioning_settings(store, key_dir, **job_settings(queue)), log, "-m", "runner_job", "scale")
    failed, back = f"polling {queue} failed", f"polling {queue} works again"
    try:
        wait_until(lambda: f"reading queue {queue}" in _log(log), timeout=60, message="the scaler to start")
        store.stop(grace_seconds=0)  # gone at once, whatever connections it holds
        wait_until(lambda: failed in _log(log), timeout=30, message="a poll to fail")
        time.sleep(DOWN_SECONDS)  # a wall-clock moment in the scaler: it polls the dead store again and again
        store = Azurite(store.data_dir, ports=(store.blob_port, store.queue_port, store.table_port)).start()
        wait_until(lambda: back in _log(log), timeout=30, message="polling to work again")

        store.stop(grace_seconds=0)
        wait_until(lambda: _log(log).count(failed) == 2, timeout=30, message="a poll to fail again")
        assert process.stdin is not None
        process.stdin.close()  # the host went away, the store still gone
        code = process.wait(timeout=STOPS_WITHIN_SECONDS)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        store.stop()

    text = _log(log)
    assert code == 0
    assert "scaler stopping (its host went away)" in text
    assert text.count(failed) == 2 and text.count(back) == 1, text

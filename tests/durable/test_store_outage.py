"""The Durable management API during a storage outage: a 503 that says when to come back."""

from __future__ import annotations

from devhost.azurite import Azurite
from tests.conftest import app_settings
from tests.durable.conftest import DURABLE_APP
from tests.durable.support import new_hub, settings_for
from tests.support.host import HostProcess


def test_the_management_api_answers_503_with_retry_after_while_the_store_is_down(key_dir, tmp_path):
    private = Azurite(tmp_path / "azurite").start()
    host = HostProcess(
        DURABLE_APP, app_settings(private, key_dir, **settings_for(new_hub())), tmp_path / "host.log"
    ).start()
    try:
        assert host.request("GET", "runtime/webhooks/durabletask/instances/not-started-yet").status_code == 404

        private.stop(grace_seconds=0)
        answer = host.request("GET", "runtime/webhooks/durabletask/instances/not-started-yet", timeout=120)

        assert answer.status_code == 503
        assert answer.headers["Content-Type"].startswith("application/problem+json")
        assert int(answer.headers["Retry-After"]) > 0
    finally:
        host.stop()
        private.stop(grace_seconds=0)

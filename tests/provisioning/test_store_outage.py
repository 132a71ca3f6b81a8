"""A store outage answers 503 (with Retry-After) on provisioning's reads and writes, never 500."""

from __future__ import annotations

from devhost.azurite import Azurite
from tests.conftest import REPO
from tests.provisioning.conftest import provisioning_settings
from tests.provisioning.helpers import READ, WRITE, declare, specification, unique
from tests.support.host import HostProcess

STORE_UNAVAILABLE = "store-unavailable"


def test_declaring_and_reading_runs_answer_503_while_the_store_is_down(key_dir, mint, tmp_path):
    private = Azurite(tmp_path / "azurite").start()
    host = HostProcess(REPO, provisioning_settings(private, key_dir), tmp_path / "host.log").start()
    writer = mint("tenant-a", scopes=WRITE, roles=["Operator"])
    reader = mint("tenant-a", scopes=READ, roles=["Observer"])
    environment = unique("outage")
    try:
        assert host.request("GET", f"runtime-cloud/runs?environment={environment}", token=reader).status_code == 200

        private.stop(grace_seconds=0)
        declared = declare(host, writer, specification(environment))
        listed = host.request("GET", f"runtime-cloud/runs?environment={environment}", token=reader, timeout=120)

        for answer in (declared, listed):
            assert answer.status_code == 503, answer.text
            assert answer.json()["type"].endswith(STORE_UNAVAILABLE)
            assert "Retry-After" in answer.headers
    finally:
        host.stop()
        private.stop(grace_seconds=0)

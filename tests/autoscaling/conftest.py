"""Fixtures of the autoscaling tests: the capacity API client, plus the autoscaling routes and the platform's runs."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest
import requests
from azure.storage.queue import QueueServiceClient

from devhost.azurite import TARGET_ACCOUNT
from tests.capacity.conftest import CapacityApi, Pool
from tests.support.host import HostProcess, wait_until


@dataclass
class AutoscalingApi(CapacityApi):
    def platform_reader(self) -> str:
        """Shared pools' runs belong to the tenant ``platform``."""
        return self._token("platform", ("factory.runtime.read",), ())

    def put_policy(self, pool: Pool, **policy: Any) -> requests.Response:
        return self.call("PUT", f"runtime-cloud/pools/{pool.id}/autoscaling", self.admin(), json=policy)

    def evaluate(self, pool: Pool) -> dict[str, Any]:
        answer = self.call("POST", f"runtime-cloud/pools/{pool.id}/autoscaling/evaluate", self.admin())
        assert answer.status_code == 200, answer.text
        return answer.json()

    def status(self, pool: Pool) -> dict[str, Any]:
        answer = self.call("GET", f"runtime-cloud/pools/{pool.id}/autoscaling", self.admin())
        assert answer.status_code == 200, answer.text
        return answer.json()

    def settle_baseline(self, pool: Pool) -> dict[str, Any]:
        """Setting a policy declared the baseline run of the pool's current slots: wait for it to apply
        and evaluate once, which completes it (the pool is then free to scale)."""
        baseline = self.status(pool)["active_decision"]
        assert (baseline["direction"], baseline["reason"], baseline["phase"]) == (
            "baseline",
            "baseline",
            "provisioning",
        )
        assert self.wait_for_run(baseline["run_id"], {"applied", "failed"})["state"] == "applied"
        done = self.evaluate(pool)["decision"]
        assert (done["number"], done["phase"]) == (baseline["number"], "completed"), done
        return done

    def decisions(self, pool: Pool) -> list[dict[str, Any]]:
        answer = self.call("GET", f"runtime-cloud/pools/{pool.id}/autoscaling/decisions", self.admin())
        assert answer.status_code == 200, answer.text
        return answer.json()["decisions"]

    def wait_for_run(self, run_id: str, states: set[str], timeout: float = 90) -> dict[str, Any]:
        def current() -> dict[str, Any] | None:
            answer = self.call("GET", f"runtime-cloud/runs/{run_id}", self.platform_reader())
            return answer.json() if answer.status_code == 200 and answer.json()["state"] in states else None

        return wait_until(current, timeout=timeout, interval=0.3, message=f"run {run_id} to reach {states}")


@pytest.fixture(scope="session")
def autoscaling(runtime_host: HostProcess, mint: Any) -> AutoscalingApi:
    return AutoscalingApi(runtime_host, mint)


def slot_queues(azurite: Any, pool: Pool) -> set[str]:
    """The pool's slot queues in the target account."""
    client = QueueServiceClient.from_connection_string(azurite.connection_string(TARGET_ACCOUNT))
    return {q.name for q in client.list_queues(name_starts_with=f"{pool.id}-s")}

"""One Azurite and two local hosts of the app sharing it (and one task hub), reached by any live host."""

from __future__ import annotations

import random
import threading
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import requests

from devhost.azurite import Azurite, free_port
from devhost.tokens import mint_token
from tests.conftest import REPO, app_settings
from tests.support.host import HostProcess

# The reconciler on a one-minute timer (five minutes by default) so that the quiet period after the load
# is short; every other run setting (JobStartSeconds, JobCheckSeconds, deadlines) keeps its default.
CHAOS_SETTINGS = {
    "RuntimeCloud__Provisioning__ReconcileSchedule": "0 */1 * * * *",
    # Applies last a few seconds, so a runner job can be killed in the middle of one.
    "RuntimeCloud__IaC__StepIntervalSeconds": "0.4",
}


@dataclass
class Cluster:
    folder: Path
    rng: random.Random
    azurite: Azurite = field(init=False)
    hosts: list[HostProcess] = field(default_factory=list)
    answers: Counter[str] = field(default_factory=Counter)
    lock: threading.Lock = field(default_factory=threading.Lock)
    settings: dict[str, str] = field(default_factory=dict)
    _tokens: dict[str, str] = field(default_factory=dict)

    @property
    def key_dir(self) -> Path:
        return self.folder / "auth"

    @property
    def git_root(self) -> Path:
        return self.folder / "git-sources"  # tests.conftest.git_sources_root(key_dir): the allowed folder

    def start(self) -> Cluster:
        self.key_dir.mkdir(parents=True, exist_ok=True)
        ports = (free_port(), free_port(), free_port())  # kept, so Azurite comes back where the hosts look
        self.azurite = Azurite(self.folder / "azurite", ports).start()
        self.settings = app_settings(self.azurite, self.key_dir, **CHAOS_SETTINGS)
        for name in ("a", "b"):
            self.hosts.append(HostProcess(REPO, self.settings, self.folder / f"host-{name}.log").start())
        return self

    def stop(self) -> None:
        for host in self.hosts:
            host.stop()
        self.azurite.stop(grace_seconds=1)

    def token(self, tenant: str, scopes: tuple[str, ...], roles: tuple[str, ...] = (), person: str = "") -> str:
        key = f"{tenant}|{scopes}|{roles}|{person}"
        with self.lock:
            if key not in self._tokens:
                claims: dict[str, Any] = {"client_id": "chaos", "object_id": person} if person else {}
                self._tokens[key] = mint_token(self.key_dir, tenant=tenant, scopes=scopes, roles=roles, **claims)
            return self._tokens[key]

    def call(self, method: str, path: str, token: str | None = None, **kwargs: Any) -> requests.Response | None:
        """Through a host picked at random; the other one when it does not answer; None when neither does."""
        timeout = kwargs.pop("timeout", 30)
        for host in self.rng.sample(self.hosts, len(self.hosts)):
            try:
                answer = host.request(method, path, token=token, timeout=timeout, **kwargs)
            except (requests.ConnectionError, requests.Timeout):
                continue
            self.count(f"{method} {_family(path)} {answer.status_code}")
            return answer
        self.count(f"{method} {_family(path)} no-host")
        return None

    def count(self, key: str) -> None:
        with self.lock:
            self.answers[key] += 1

    def connection_string(self, account: str | None = None) -> str:
        return self.azurite.connection_string(account) if account else self.azurite.connection_string()


def _family(path: str) -> str:
    """``runtime-cloud/runs/{id}/approve`` -> ``runs/*/approve``: answers counted per kind of request."""
    parts = path.split("?")[0].removeprefix("runtime-cloud/").split("/")
    return "/".join(part if index % 2 == 0 else "*" for index, part in enumerate(parts))

"""A local host process (``python -m devhost start``) driven the way a caller would."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from devhost.azurite import REPO, free_port
from devhost.host_keys import KEY_HEADER, KEYS_FILE
from devhost.parent_death import signalled_on_parent_death
from tests.support.host_zygote import ForkedHost, zygote


class HostProcess:
    HOST_KEY_PATHS = ("admin/", "runtime/webhooks/", "runtime/rpc/")

    def __init__(self, app_dir: Path, env: dict[str, str], log_path: Path, port: int | None = None) -> None:
        self.app_dir = app_dir
        # The host's keys live beside its log unless the settings say where (never in the repository).
        self.env = {"DEVHOST_KEY_DIRECTORY": str(log_path.parent / "host-keys"), **env}
        self.port = port or free_port()
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | ForkedHost | None = None
        self._log_start = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + "/" + path.lstrip("/")

    def start(self, timeout: float = 60.0) -> HostProcess:
        env = {**os.environ, **self.env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        self._process = self._launch(["start", "--app-dir", str(self.app_dir), "--port", str(self.port)], env)
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"host exited with {self._process.returncode}:\n{self.log()}")
            if "Host started" in self.log()[self._log_start :]:
                return self
            time.sleep(0.1)
        raise TimeoutError(f"host did not start in {timeout} s:\n{self.log()}")

    def _launch(self, argv: list[str], env: dict[str, str]) -> subprocess.Popen[bytes] | ForkedHost:
        """``python -m devhost <argv>``: forked from the worker's zygote (:mod:`tests.support.host_zygote`),
        or a fresh interpreter where there is none (a host started from a thread other than the main one)."""
        forks = zygote()
        if forks is not None:
            return forks.spawn(argv, env, REPO, self.log_path)
        with open(self.log_path, "ab") as log:
            return subprocess.Popen(
                [sys.executable, "-m", "devhost", *argv],
                cwd=REPO,
                env=env,
                stdout=log,
                stderr=subprocess.STDOUT,
                # A test worker killed mid-run takes its hosts with it (as a crash: they get no say).
                preexec_fn=signalled_on_parent_death(signal.SIGKILL),
            )

    @property
    def pid(self) -> int:
        assert self._process is not None, "the host was never started"
        return self._process.pid

    def log(self) -> str:
        return self.log_path.read_text(errors="replace") if self.log_path.exists() else ""

    def kill(self) -> None:
        """SIGKILL: the host gets no chance to clean up, as in a crash."""
        if self._process and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait()

    def stop(self) -> int | None:
        if self._process and self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()
        return self._process.returncode if self._process else None

    @property
    def master_key(self) -> str:
        """The host's master key, as ``python -m devhost keys`` shows it."""
        document = json.loads((Path(self.env["DEVHOST_KEY_DIRECTORY"]) / KEYS_FILE).read_text())
        return str(document["masterKey"])

    def request(
        self, method: str, path: str, token: str | None = None, host_key: bool = True, **kwargs: Any
    ) -> requests.Response:
        """Call the host; its own endpoints (admin, Durable webhooks) get the master key unless ``host_key=False``."""
        headers = dict(kwargs.pop("headers", {}) or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if host_key and path.lstrip("/").startswith(self.HOST_KEY_PATHS):
            headers.setdefault(KEY_HEADER, self.master_key)
        return requests.request(method, self.url(path), headers=headers, timeout=kwargs.pop("timeout", 30), **kwargs)


def wait_until(condition: Any, timeout: float = 30.0, interval: float = 0.2, message: str = "condition") -> Any:
    """Poll ``condition`` until it returns something truthy; fail with ``message`` after ``timeout``."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = condition()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout} s waiting for {message}")

"""A local host process (``python -m devhost start``) driven the way a caller would."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import requests

from devhost.azurite import REPO, free_port


class HostProcess:
    def __init__(self, app_dir: Path, env: dict[str, str], log_path: Path, port: int | None = None) -> None:
        self.app_dir = app_dir
        self.env = env
        self.port = port or free_port()
        self.log_path = log_path
        self._process: subprocess.Popen[bytes] | None = None
        self._log_start = 0

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, path: str) -> str:
        return self.base_url + "/" + path.lstrip("/")

    def start(self, timeout: float = 60.0) -> HostProcess:
        env = {**os.environ, **self.env, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        self._log_start = self.log_path.stat().st_size if self.log_path.exists() else 0
        log = open(self.log_path, "ab")
        self._process = subprocess.Popen(
            [sys.executable, "-m", "devhost", "start", "--app-dir", str(self.app_dir), "--port", str(self.port)],
            cwd=REPO, env=env, stdout=log, stderr=subprocess.STDOUT,
        )
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self._process.poll() is not None:
                raise RuntimeError(f"host exited with {self._process.returncode}:\n{self.log()}")
            if "Host started" in self.log()[self._log_start:]:
                return self
            time.sleep(0.1)
        raise TimeoutError(f"host did not start in {timeout} s:\n{self.log()}")

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

    def request(self, method: str, path: str, token: str | None = None, **kwargs: Any) -> requests.Response:
        headers = dict(kwargs.pop("headers", {}) or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
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

"""Azurite, the Azure Storage emulator (npm package), with the two local accounts.

``devstoreaccount1`` is the host's own store (``AzureWebJobsStorage``);
``targetaccount1`` is the storage account the embedded IaC runner manages as
the local provisioning target. Both keys are development-only constants, like
Azurite's well-known key.
"""

from __future__ import annotations

import os
import random
import signal
import socket
import subprocess
import time
from pathlib import Path

from devhost.parent_death import signalled_on_parent_death

REPO = Path(__file__).resolve().parents[1]
AZURITE_BIN = REPO / "node_modules" / ".bin" / "azurite"

HOST_ACCOUNT = "devstoreaccount1"
HOST_KEY = "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
TARGET_ACCOUNT = "targetaccount1"
TARGET_KEY = "dGFyZ2V0YWNjb3VudDFrZXl0YXJnZXRhY2NvdW50MWtleQ=="
# The backup location's own account: wiping the store (or the target) leaves the backups alone.
BACKUP_ACCOUNT = "backupaccount1"
BACKUP_KEY = "YmFja3VwYWNjb3VudDFrZXliYWNrdXBhY2NvdW50MWtleQ=="
KEYS = {HOST_ACCOUNT: HOST_KEY, TARGET_ACCOUNT: TARGET_KEY, BACKUP_ACCOUNT: BACKUP_KEY}


# Ports handed out below the kernel's ephemeral range (Linux: ip_local_port_range, from 32768), above
# `make run`'s fixed ones (10000-10002, 8130). A port the kernel finds free (bind to 0) is in that range,
# where outgoing connections take their local ports: between finding it and a child process binding it,
# a connection could take it, the more likely the more processes connect (the test suite's workers).
_FIRST_PORT = 10_240


def _ephemeral_start() -> int:
    try:
        return int(Path("/proc/sys/net/ipv4/ip_local_port_range").read_text().split()[0])
    except (OSError, ValueError, IndexError):  # not Linux: the IANA range starts higher still
        return 32_768


def free_port() -> int:
    """A port on 127.0.0.1 that nothing is bound to now, for a process about to listen on it."""
    last = _ephemeral_start()
    for _ in range(200):
        port = random.randrange(_FIRST_PORT, last)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:  # taken: another listener, or a connection's end
                continue
            return port
    with socket.socket() as sock:  # below the range everything is taken: any free port
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])  # (host, port): typed Any in the socket stubs


def wait_for_port(port: int, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return
        time.sleep(0.05)
    raise TimeoutError(f"nothing listens on port {port} after {timeout} s")


# Azurite's own defaults that cost CPU on every request and that nothing here reads: the access log
# (written to the console, which is discarded) and the request telemetry it collects for Microsoft by
# default (nothing of a developer's use should leave the machine anyway). On two cores the suite's Azurites
# serve thousands of requests a minute; these two were about a fifth of their CPU (measured in a bench of
# queue and table calls).
QUIET = ("--silent", "--disableTelemetry")
# With ``persist=False`` Azurite keeps its data in memory only (and writes nothing to disk, where it
# otherwise saves its whole database every few seconds); at most this much of blob content.
IN_MEMORY_LIMIT_MB = 2048


class Azurite:
    def __init__(self, data_dir: Path, ports: tuple[int, int, int] | None = None, persist: bool = True) -> None:
        """``persist=False``: an Azurite whose data is thrown away when it stops (a test's own), held in
        memory; it cannot be stopped and brought back with its data, as a persisted one can."""
        self.data_dir = data_dir
        self.persist = persist
        self.blob_port, self.queue_port, self.table_port = ports or (free_port(), free_port(), free_port())
        self._process: subprocess.Popen[bytes] | None = None

    def start(self) -> Azurite:
        self.data_dir.mkdir(parents=True, exist_ok=True)
        if not AZURITE_BIN.exists():
            raise FileNotFoundError(f"{AZURITE_BIN} is missing: run 'npm ci' (make does it)")
        env = dict(os.environ, AZURITE_ACCOUNTS=";".join(f"{name}:{key}" for name, key in KEYS.items()))
        self._process = subprocess.Popen(
            [
                str(AZURITE_BIN),
                *self._persistence(),
                *QUIET,
                "--skipApiVersionCheck",
                "--loose",
                "--blobPort",
                str(self.blob_port),
                "--queuePort",
                str(self.queue_port),
                "--tablePort",
                str(self.table_port),
            ],
            env=env,
            cwd=self.data_dir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            # Its own session: Ctrl-C in a terminal reaches the host, which stops cleanly
            # (releasing leases in storage) and only then stops Azurite.
            start_new_session=True,
            # and it stops when whatever started it dies, even when it had no chance to stop it
            preexec_fn=signalled_on_parent_death(signal.SIGTERM),
        )
        for port in (self.blob_port, self.queue_port, self.table_port):
            wait_for_port(port)
        return self

    def _persistence(self) -> tuple[str, ...]:
        if self.persist:
            return ("--location", str(self.data_dir))
        # Azurite refuses --location beside --inMemoryPersistence; it runs in data_dir (its working folder).
        return ("--inMemoryPersistence", "--extentMemoryLimit", str(IN_MEMORY_LIMIT_MB))

    def stop(self, grace_seconds: float = 10.0) -> None:
        """SIGINT, then SIGKILL after ``grace_seconds``: Azurite closes at once on SIGINT unless a client
        still holds a keep-alive connection, which it waits for (a test process holds many)."""
        if self._process and self._process.poll() is None:
            self._process.send_signal(signal.SIGINT)
            try:
                self._process.wait(timeout=grace_seconds)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait()

    def connection_string(self, account: str = HOST_ACCOUNT) -> str:
        key = KEYS.get(account, TARGET_KEY)
        base = "http://127.0.0.1"
        return (
            f"DefaultEndpointsProtocol=http;AccountName={account};AccountKey={key};"
            f"BlobEndpoint={base}:{self.blob_port}/{account};"
            f"QueueEndpoint={base}:{self.queue_port}/{account};"
            f"TableEndpoint={base}:{self.table_port}/{account};"
        )

    def blob_endpoint(self, account: str) -> str:
        return f"http://127.0.0.1:{self.blob_port}/{account}"

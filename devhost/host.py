"""The local host: loads the app, serves its triggers, stops cleanly.

Trigger kinds the host serves itself: HTTP, queue and timer. Other trigger and
binding kinds are served by extensions (the Durable engine is one), which claim
them when the host starts; anything unclaimed stops the host with a message
instead of being silently ignored.
"""

from __future__ import annotations

import asyncio
import logging
import os
import signal
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Protocol

from aiohttp import web

from devhost.bad_requests import ProblemAppRunner
from devhost.catalog import FunctionCatalog, FunctionInfo, load_catalog
from devhost.config import ConfigError, HostJson, apply_local_settings
from devhost.host_keys import ensure_host_keys, key_directory
from devhost.http_server import HttpFrontDoor
from devhost.invoker import Invoker
from devhost.queue_listener import QueueListener, admin_message
from devhost.timer_scheduler import TimerRunner, admin_timer_request
from devhost.tokens import ensure_signing_key

log = logging.getLogger("devhost")

SERVED_TRIGGERS = {"httptrigger", "queuetrigger", "timertrigger"}
LOOPBACK_BINDS = ("127.0.0.1", "localhost", "::1")


class HostExtension(Protocol):
    """Serves trigger kinds the core host does not (e.g. Durable orchestrations)."""

    trigger_types: frozenset[str]

    def attach(self, host: LocalHost) -> None: ...

    async def run(self) -> None: ...

    async def stop(self) -> None: ...


class StartupError(Exception):
    pass


class LocalHost:
    def __init__(
        self,
        app_dir: Path,
        port: int = 8130,
        bind: str = "127.0.0.1",
        extensions: list[HostExtension] | None = None,
        allow_remote: bool = False,
    ) -> None:
        self.app_dir = app_dir.resolve()
        self.port = port
        self.bind = bind
        self.allow_remote = allow_remote
        self.extensions = list(extensions or [])
        self.invoker = Invoker()
        self.host_json = HostJson()  # read by start(), where a file it cannot use stops the host
        self.catalog: FunctionCatalog | None = None
        self.front_door: HttpFrontDoor | None = None
        self._runner: web.AppRunner | None = None
        self._tasks: list[asyncio.Task[None]] = []
        self._listeners: list[QueueListener] = []

    @property
    def base_url(self) -> str:
        return f"http://{self.bind}:{self.port}"

    async def start(self) -> None:
        try:
            apply_local_settings(self.app_dir)
            self.host_json = HostJson.load(self.app_dir)  # after the settings: they may override host.json
        except ConfigError as error:
            raise StartupError(str(error)) from None
        _prepare_local_issuer()
        if not self.allow_remote and self.bind not in LOOPBACK_BINDS:
            raise StartupError(
                f"refusing to listen on {self.bind}: the host is for this machine only. "
                "Pass --allow-remote to listen beyond loopback (every endpoint still wants "
                "its token or host key)"
            )
        keys = ensure_host_keys(key_directory(self.app_dir))
        try:
            self.catalog = load_catalog(self.app_dir)
        except Exception as error:
            raise StartupError(f"the function app did not load: {error}") from error
        self._check_served(self.catalog)
        self.front_door = HttpFrontDoor(
            self.catalog,
            self.invoker,
            self.host_json.route_prefix,
            self._run_admin,
            keys,
            loopback_only=not self.allow_remote,
        )
        for extension in self.extensions:
            extension.attach(self)
        for function in self.catalog:
            self.invoker.check_supported(function)
        self._runner = ProblemAppRunner(self.front_door.build(), handle_signals=False, access_log=None)
        await self._runner.setup()
        await web.TCPSite(self._runner, self.bind, self.port).start()
        if self.bind not in LOOPBACK_BINDS:
            log.warning(
                "listening on %s (--allow-remote): plain HTTP, so tokens and host keys cross the "
                "network unencrypted; keep this host off networks you do not trust",
                self.bind,
            )
        self._start_triggers(self.catalog)

    def _check_served(self, catalog: FunctionCatalog) -> None:
        claimed = SERVED_TRIGGERS.union(*(e.trigger_types for e in self.extensions))
        unserved = [f"{f.name} ({f.trigger_type})" for f in catalog if f.trigger_type.lower() not in claimed]
        if unserved:
            raise StartupError(f"the local host cannot serve: {', '.join(unserved)}")

    def _start_triggers(self, catalog: FunctionCatalog) -> None:
        for function in catalog.with_trigger("queueTrigger"):
            listener = QueueListener(function, self.invoker, self.host_json.queues)
            self._listeners.append(listener)
            self.spawn(f"queue {listener.queue_name}", listener.run)
        host_id = os.environ.get("AzureFunctionsWebHost__hostid", "runtime-cloud-local")
        for function in catalog.with_trigger("timerTrigger"):
            timer = TimerRunner(function, self.invoker, host_id, self.host_json.singleton)
            self.spawn(f"timer {function.name}", timer.run)
        for extension in self.extensions:
            self.spawn(type(extension).__name__, extension.run)

    def spawn(self, name: str, factory: Callable[[], Awaitable[None]]) -> None:
        """Run a background loop; if it fails (the store is down, say), start it again."""

        async def supervised() -> None:
            while True:
                try:
                    await factory()
                    return
                except asyncio.CancelledError:
                    raise
                except Exception as error:  # noqa: BLE001 - any failure of a listener: restart it, keep the host up
                    log.warning(
                        "%s stopped (%s: %s); restarting in 2 s",
                        name,
                        type(error).__name__,
                        str(error).splitlines()[0] if str(error) else "",
                    )
                    await asyncio.sleep(2)

        self._tasks.append(asyncio.create_task(supervised(), name=name))

    async def _run_admin(self, function: FunctionInfo, text: str) -> None:
        kind = function.trigger_type.lower()
        value: object = admin_timer_request() if kind == "timertrigger" else admin_message(text)

        async def run() -> None:
            try:
                await self.invoker.invoke(function, value)
            except Exception:
                log.exception("admin run of %s failed", function.name)

        self._tasks.append(asyncio.create_task(run(), name=f"admin {function.name}"))

    async def stop(self) -> None:
        """Stop in order; no phase may hold the host up for long (each is bounded and logged)."""
        for task in self._tasks:
            task.cancel()
        if self._tasks:
            _, pending = await asyncio.wait(self._tasks, timeout=15)
            for task in pending:
                frames = "; ".join(f"{f.f_code.co_filename}:{f.f_lineno}" for f in task.get_stack(limit=8))
                log.warning("background loop %s did not stop when cancelled (at %s)", task.get_name(), frames)
        for listener in self._listeners:
            await _bounded(f"queue {listener.queue_name}", listener.drain())
        for extension in self.extensions:
            await _bounded(type(extension).__name__, extension.stop())
        if self._runner is not None:
            await _bounded("HTTP server", self._runner.cleanup())
        self.invoker.shutdown()

    def describe(self) -> str:
        assert self.catalog is not None and self.front_door is not None
        lines = [f"Runtime Cloud local host on {self.base_url}", "Functions:"]
        for function in self.catalog:
            trigger = function.trigger
            if function.trigger_type.lower() == "httptrigger":
                methods = ",".join(trigger.get("methods") or ["*"])
                # the URL the front door serves: host.json's routePrefix ("api" unless set), then the route
                path = "/".join(
                    p
                    for p in (
                        self.host_json.route_prefix.strip("/"),
                        (trigger.get("route") or function.name).strip("/"),
                    )
                    if p
                )
                lines.append(f"  {function.name}: [{methods}] {self.base_url}/{path}")
            else:
                lines.append(f"  {function.name}: {function.trigger_type}")
        return "\n".join(lines)


async def _bounded(what: str, work: Awaitable[object], seconds: float = 15.0) -> None:
    try:
        await asyncio.wait_for(work, timeout=seconds)
    except TimeoutError:
        log.warning("stopping %s took over %.0f s; going on without it", what, seconds)
    log.debug("stopped %s", what)


def _prepare_local_issuer() -> None:
    """Create the development issuer's key so tokens minted now and later verify."""
    directory = os.environ.get("RuntimeCloud__Auth__LocalSigningKeyDirectory")
    if directory:
        ensure_signing_key(Path(directory))


async def serve(host: LocalHost) -> int:
    stopping = asyncio.Event()
    loop = asyncio.get_running_loop()
    for signum in (signal.SIGINT, signal.SIGTERM):
        loop.add_signal_handler(signum, stopping.set)
    try:
        await host.start()
    except StartupError as error:
        log.error("%s", error)
        await host.stop()
        return 2
    except OSError as error:
        log.error("the host could not listen on %s:%s: %s", host.bind, host.port, error)
        await host.stop()
        return 2
    print(host.describe(), flush=True)
    print("Host started. Press Ctrl-C to stop.", flush=True)
    await stopping.wait()
    print("Stopping the host...", flush=True)
    await host.stop()
    return 0

"""Liveness and readiness: every dependency's status and latency.

Readiness hangs on the runtime-cloud store alone: without it nothing can be
recorded, so the host answers 503. The IaC runner, targets, the Config
Platform, the neighbours (ControlPlaneApi, KnowledgeHost, DeliveryHost, when
configured: :mod:`shared.health.neighbours`), stale inventories, an unreadable
inbound queue, backups and the policy gate (off, or its policy unreadable: runs
fail ``policy-unavailable``) degrade the host (200, ``degraded``) because
reads, leases and queued work still proceed without them: a run whose target
is down fails on its own, and an unreachable Config Platform leaves
configuration references unresolved (README: the ``GET
/runtime-cloud/health`` row of "Calling the API locally", and
``RuntimeCloud__ConfigPlatform__Url`` under "Settings").

Health reads the settings sections of :class:`shared.health.sections.HealthSections`,
which the wiring builds once (:mod:`shared.wiring.health`), never the settings root.
"""

from __future__ import annotations

import functools
import json
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import requests

import shared
from shared.backup.api import BackupLocation, backup_health, open_location
from shared.gitops.api import MIN_SECRET_CHARS, app_setting_status
from shared.health.neighbours import NeighbourHealth, probe_neighbour
from shared.health.sections import HealthSections
from shared.iac.api import describe_runner, job_path_health
from shared.inventory.api import INVENTORY_TABLE, StaleSummary, stale_summary
from shared.platform import clock
from shared.platform.storage.clients import StorageClients, fail_fast_options, host_storage
from shared.platform.target_access import probe_target
from shared.platform.targets import ProvisioningTarget

__all__ = ["HealthAnswer", "HealthReport", "HealthSections", "check_health", "health_answer", "inbox_lags"]

HEALTHY, DEGRADED, UNHEALTHY = "healthy", "degraded", "unhealthy"
WEBHOOK_CHECK = "gitops.webhooks"


@dataclass
class Check:
    name: str
    status: str
    latency_ms: float
    detail: str
    required: bool = False


@dataclass
class InboxLag:
    module: str
    queue: str
    lag_seconds: float | None
    status: str
    detail: str = ""


@dataclass
class HealthReport:
    service: str
    version: str
    status: str
    ready: bool
    checks: list[Check] = field(default_factory=list)
    inbox_lag: list[InboxLag] = field(default_factory=list)
    checked_at: str = ""
    # Environments whose target could not be read at their last scan, counted per target.
    inventory: StaleSummary | None = None
    # The backup settings (schedule, RPO) and the latest export's age; see shared.backup.status.
    backup: dict[str, Any] | None = None
    # ControlPlaneApi, KnowledgeHost, DeliveryHost: configured, reachable, latency (each is a check too).
    neighbours: list[NeighbourHealth] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self) | {"live": True}


def _timed(name: str, probe: Callable[[], str], required: bool, failed_status: str) -> Check:
    started = time.perf_counter()
    try:
        detail, status = probe(), HEALTHY
    except Exception as error:  # noqa: BLE001 - a probe's failure is the finding, never an exception
        detail, status = f"{type(error).__name__}: {_first_line(error)}", failed_status
    return Check(name, status, round((time.perf_counter() - started) * 1000, 1), detail, required)


def _first_line(error: Exception) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else ""


def _store_checks(clients: StorageClients) -> list[Callable[[], Check]]:
    def tables() -> str:
        next(iter(clients.tables.list_tables(results_per_page=1)), None)
        return "tables answered"

    def blobs() -> str:
        clients.blobs.get_service_properties()
        return "blobs answered"

    def queues() -> str:
        clients.queues.get_service_properties()
        return "queues answered"

    return [
        lambda: _timed("store.tables", tables, True, UNHEALTHY),
        lambda: _timed("store.blobs", blobs, True, UNHEALTHY),
        lambda: _timed("store.queues", queues, True, UNHEALTHY),
    ]


def _runner_check(sections: HealthSections) -> Check:
    info = describe_runner(sections.runner)
    if _jobs_on(sections):  # the runner runs in the job image, not here: see the runner-jobs check
        return Check(f"iac-runner.{info.name}", HEALTHY, 0.0, f"{info.name}: runs in runner jobs (see runner-jobs)")
    status = HEALTHY if info.available else DEGRADED
    version = f" {info.version}" if info.version else ""
    return Check(f"iac-runner.{info.name}", status, 0.0, f"{info.name}{version}: {info.detail}")


def _jobs_on(sections: HealthSections) -> bool:
    return sections.iac is not None and sections.iac.job_launcher == "queue"


def _runner_jobs_check(sections: HealthSections, clients: StorageClients) -> Check:
    """The job path (queue reachable, requests taken, heartbeats fresh): see :mod:`shared.iac.jobs.health`."""
    assert sections.iac is not None
    iac = sections.iac

    def probe() -> str:
        found = job_path_health(clients, iac)
        if not found.healthy:
            raise JobPathDegraded(found.detail)
        return found.detail

    return _timed("runner-jobs", probe, False, DEGRADED)


class JobPathDegraded(Exception):
    """The job path answers but is not well (stuck jobs, requests nobody takes)."""


def _target_check(sections: HealthSections, target: ProvisioningTarget) -> Check:
    result = probe_target(target, sections.health.probe_timeout_seconds)
    return Check(f"target.{target.id}", HEALTHY if result.reachable else DEGRADED, result.latency_ms, result.detail)


def _config_platform_check(sections: HealthSections) -> Check:
    url = sections.config_platform.url
    if not url:
        return Check("config-platform", HEALTHY, 0.0, "not configured: configuration references stay unresolved")

    def probe() -> str:
        response = requests.get(url, timeout=sections.health.probe_timeout_seconds)
        return f"answered HTTP {response.status_code}"

    return _timed("config-platform", probe, False, DEGRADED)


def _neighbour_check(found: NeighbourHealth) -> Check:
    status = DEGRADED if found.reachable is False else HEALTHY
    return Check(found.name, status, found.latency_ms, found.detail)


def _webhook_secret_check(sections: HealthSections) -> Check:
    """The GitOps webhooks' default secret: ``degraded`` (webhooks unavailable) when its app setting holds a
    Key Vault reference the platform did not resolve, or a value too short to be a key; the detail names the
    setting, never a value. Deliveries are then refused, never checked against the reference's text."""
    reference = sections.gitops_webhook_secret or ""
    setting = app_setting_status(reference)
    if setting is None:
        return Check(WEBHOOK_CHECK, HEALTHY, 0.0, f"{reference}: a Key Vault secret, read when a delivery arrives")
    if setting.unresolved:
        return Check(WEBHOOK_CHECK, DEGRADED, 0.0, f"webhooks unavailable: {setting.problem}")
    if setting.value is None:
        detail = f"not configured ({setting.problem}): deliveries to bindings without a secret of their own are refused"
        return Check(WEBHOOK_CHECK, HEALTHY, 0.0, detail)
    if len(setting.value) < MIN_SECRET_CHARS:
        detail = f"webhooks unavailable: app setting {setting.name} is shorter than {MIN_SECRET_CHARS} characters"
        return Check(WEBHOOK_CHECK, DEGRADED, 0.0, detail)
    return Check(WEBHOOK_CHECK, HEALTHY, 0.0, f"app setting {setting.name} is set")


def _gitops_on(sections: HealthSections) -> bool:
    return sections.gitops_webhook_secret is not None and "provisioning" in sections.enabled_modules


def _policy_check(sections: HealthSections) -> Check:
    """The gate's source and installation bundle digest; degraded when it is off or cannot read its policy."""
    assert sections.policy is not None
    started = time.perf_counter()
    try:
        status = sections.policy()
    except Exception as error:  # noqa: BLE001 - a probe's failure is the finding, never an exception
        return Check("policy", DEGRADED, _since(started), f"{type(error).__name__}: {_first_line(error)}")
    return Check("policy", HEALTHY if status.enabled else DEGRADED, _since(started), status.detail)


def _since(started: float) -> float:
    return round((time.perf_counter() - started) * 1000, 1)


def _inbox_lag(clients: StorageClients, module: str, queue: str) -> InboxLag:
    try:
        peeked = clients.queues.get_queue_client(queue).peek_messages(max_messages=1)
    except Exception as error:  # noqa: BLE001 - an unreadable queue is a degraded finding
        return InboxLag(module, queue, None, DEGRADED, f"{type(error).__name__}: {_first_line(error)}")
    if not peeked:
        return InboxLag(module, queue, 0.0, HEALTHY, "empty")
    inserted = peeked[0].inserted_on
    lag = max(0.0, (clock.utcnow() - inserted).total_seconds()) if inserted else None
    return InboxLag(module, queue, lag, HEALTHY)


def _inventory_check(clients: StorageClients) -> tuple[Check, StaleSummary | None]:
    """Stale inventories degrade the host: drift cannot be seen where a target cannot be read."""
    started = time.perf_counter()
    try:
        summary = stale_summary(clients.tables.get_table_client(INVENTORY_TABLE))
    except Exception as error:  # noqa: BLE001 - a probe's failure is the finding, never an exception
        latency = round((time.perf_counter() - started) * 1000, 1)
        return Check("inventory.observations", DEGRADED, latency, f"{type(error).__name__}: {_first_line(error)}"), None
    latency = round((time.perf_counter() - started) * 1000, 1)
    stale = summary["stale_environments"]
    if not stale:
        return Check("inventory.observations", HEALTHY, latency, "every scanned target answered its last scan"), summary
    targets = ", ".join(entry["target"] or "?" for entry in summary["targets"])
    detail = f"{stale} environment(s) stale: target(s) {targets} could not be read at the last scan"
    return Check("inventory.observations", DEGRADED, latency, detail), summary


@functools.lru_cache(maxsize=2)
def _backup_location(connection: str, container: str, timeout: float) -> BackupLocation:
    return open_location(connection, container, **fail_fast_options(timeout))


def _backup_check(sections: HealthSections, clients: StorageClients) -> tuple[Check, dict[str, Any]]:
    """Backups degrade the host (never unready): without them it runs, but a lost store loses more. The
    store's record of the last attempt counts too: it holds the failures the location could not record."""
    section = sections.backup
    started = time.perf_counter()
    try:
        location = (
            _backup_location(section.connection, section.container, sections.health.probe_timeout_seconds)
            if section.configured
            else None
        )
        found = backup_health(section, location, clock.utcnow(), store=clients)
        status, detail, summary = (HEALTHY if found.healthy else DEGRADED), found.detail, found.as_dict()
    except Exception as error:  # noqa: BLE001 - a probe's failure is the finding, never an exception
        status, detail = DEGRADED, f"backup location unreadable: {type(error).__name__}: {_first_line(error)}"
        summary = {"configured": True, "schedule": section.schedule, "rpo_minutes": section.rpo_minutes}
    latency = round((time.perf_counter() - started) * 1000, 1)
    return Check("backup", status, latency, detail), summary


@functools.lru_cache(maxsize=2)
def _probe_clients(timeout: float) -> StorageClients:
    """Clients without retries, kept for the process: probes must fail fast, and making clients
    (in Azure: a managed-identity credential) on every probe would cost more than the probe."""
    return host_storage(**fail_fast_options(timeout))


@dataclass(frozen=True)
class HealthAnswer:
    """One round's report and its JSON, encoded once for every call the round answers."""

    report: HealthReport
    body: bytes

    @property
    def ready(self) -> bool:
        return self.report.ready


def _answer(report: HealthReport) -> HealthAnswer:
    # Encoding the report (dataclasses.asdict, then JSON) cost more than the rest of a cached
    # health call; 200 callers of one round now share one encoding.
    return HealthAnswer(report, json.dumps(report.as_dict(), default=str).encode("utf-8"))


class _Round:
    """One round of probes that concurrent health calls share (see :func:`check_health`)."""

    def __init__(self, sections: HealthSections) -> None:
        self.sections = sections
        self.future: Future[HealthAnswer] = Future()
        self.finished_at: float | None = None

    def serves(self, sections: HealthSections, now: float, cache_seconds: float) -> bool:
        return self.sections is sections and (self.finished_at is None or now - self.finished_at <= cache_seconds)


_rounds_lock = threading.Lock()
_round: _Round | None = None  # the latest round (the sections object is made once per process)


def check_health(sections: HealthSections) -> HealthReport:
    """Every dependency's status, probed once for all calls that arrive together.

    A call that arrives while a round of probes is running waits for that
    round (single flight), and a finished round answers further calls for
    ``CacheSeconds`` (1 s by default): 200 callers at once cost one round of
    store probes, not 200, and the answer is never older than the setting plus
    one round (``checked_at`` says when it ran). With ``0`` only calls that
    overlap a running round share it.
    """
    return replace(health_answer(sections).report)


def finished_answer(sections: HealthSections) -> HealthAnswer | None:
    """The answer :func:`health_answer` would give now if a finished round still serves it, else None.

    Never waits and never probes, so an async caller can answer from it on its own thread and hand
    only the calls that must probe (or wait for a running round) to a worker thread.
    """
    with _rounds_lock:
        current = _round
        serves = current is not None and current.serves(sections, time.monotonic(), sections.health.cache_seconds)
    if current is None or not serves or current.finished_at is None or not current.future.done():
        return None
    if current.future.exception() is not None:
        return None  # a failed round is not kept: the next call probes (through health_answer)
    return current.future.result()


def health_answer(sections: HealthSections) -> HealthAnswer:
    """:func:`check_health` with the report's JSON, encoded once per round (what the endpoint sends)."""
    global _round
    cache_seconds = sections.health.cache_seconds
    with _rounds_lock:
        current = _round
        leader = current is None or not current.serves(sections, time.monotonic(), cache_seconds)
        if leader:
            current = _round = _Round(sections)
    assert current is not None
    if leader:
        try:
            current.future.set_result(_answer(_probe_all(sections)))
            current.finished_at = time.monotonic()
        except BaseException as error:  # noqa: BLE001 - handed to the callers waiting on this round; the next call probes
            current.finished_at = float("-inf")
            current.future.set_exception(error)
    return current.future.result()


def _probe_all(sections: HealthSections) -> HealthReport:
    clients = _probe_clients(sections.health.probe_timeout_seconds)
    checks: list[Callable[[], Check]] = [
        *_store_checks(clients),
        lambda: _runner_check(sections),
        *([functools.partial(_runner_jobs_check, sections, clients)] if _jobs_on(sections) else []),
        *[functools.partial(_target_check, sections, target) for target in sections.targets],
        lambda: _config_platform_check(sections),
        *([functools.partial(_webhook_secret_check, sections)] if _gitops_on(sections) else []),
        *([functools.partial(_policy_check, sections)] if sections.policy is not None else []),
    ]
    lags = list(sections.inbound_queues)
    with_inventory = "inventory" in sections.enabled_modules
    # Probes run side by side so the answer takes as long as the slowest one.
    with ThreadPoolExecutor(max_workers=8) as pool:
        check_futures = [pool.submit(check) for check in checks]
        lag_futures = [pool.submit(_inbox_lag, clients, module, queue) for module, queue in lags]
        inventory_future = pool.submit(_inventory_check, clients) if with_inventory else None
        backup_future = pool.submit(_backup_check, sections, clients)
        timeout = sections.health.probe_timeout_seconds
        neighbour_futures = [pool.submit(probe_neighbour, probe, timeout) for probe in sections.neighbours]
        results = [future.result() for future in check_futures]
        inbox = [future.result() for future in lag_futures]
        inventory_check, inventory = inventory_future.result() if inventory_future else (None, None)
        backup_check, backup = backup_future.result()
        neighbours = [future.result() for future in neighbour_futures]
    found = results + ([inventory_check] if inventory_check else []) + [backup_check]
    report = _report(sections, found + [_neighbour_check(neighbour) for neighbour in neighbours], inbox)
    report.inventory = inventory
    report.backup = backup
    report.neighbours = neighbours
    return report


def _report(sections: HealthSections, checks: list[Check], inbox: list[InboxLag]) -> HealthReport:
    ready = all(check.status == HEALTHY for check in checks if check.required)
    if not ready:
        status = UNHEALTHY
    elif any(check.status != HEALTHY for check in checks) or any(lag.status != HEALTHY for lag in inbox):
        status = DEGRADED
    else:
        status = HEALTHY
    return HealthReport(
        service=sections.service_name,
        version=shared.__version__,
        status=status,
        ready=ready,
        checks=checks,
        inbox_lag=inbox,
        checked_at=clock.now_iso(),
    )


def inbox_lags(sections: HealthSections) -> list[InboxLag]:
    """The lag of every inbound queue of the enabled modules (the ``host.inbox_lag`` gauge reads it)."""
    clients = _probe_clients(sections.health.probe_timeout_seconds)
    return [_inbox_lag(clients, module, queue) for module, queue in sections.inbound_queues]

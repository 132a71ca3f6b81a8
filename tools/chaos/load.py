"""Run load: promotions by HTTP and by queue (production ones approved by a second person), drift scans,
GitOps syncs from a local repository on the allow-list, and autoscaling evaluations."""

from __future__ import annotations

import base64
import json
import random
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from azure.core.exceptions import AzureError
from azure.storage.queue import QueueClient

from bench._git import FILE, BareRepository
from tools.chaos.cluster import Cluster
from tools.chaos.leases import ADMIN_SCOPES

TENANT = "chaos-tenant"
WRITE = ("factory.runtime.write", "factory.runtime.read")
READ = ("factory.runtime.read",)
PREFIX = "cq"  # every queue the chaos specifications declare starts so (tools.chaos.canaries watches them)


@dataclass
class RunBook:
    declared: dict[str, str] = field(default_factory=dict)  # run id -> how it was declared
    promotions_sent: int = 0
    approvals: dict[str, int] = field(default_factory=dict)  # approve answer -> count
    environments: set[str] = field(default_factory=set)
    lock: threading.Lock = field(default_factory=threading.Lock)


def specification(environment: str, environment_class: str, queues: int) -> dict[str, Any]:
    """Queues only ever added (never removed), so no queue of these environments is ever deleted."""
    suffix = environment[-6:]
    resources: list[dict[str, Any]] = [{"type": "queue", "name": f"{PREFIX}{n}-{suffix}"} for n in range(queues)]
    resources.append({"type": "blob-container", "name": f"cb-{suffix}", "metadata": {"size": str(queues)}})
    return {
        "environment": environment,
        "environment_class": environment_class,
        "target": "local-storage",
        "runner": "embedded",
        "resources": resources,
    }


def promoter(cluster: Cluster, book: RunBook, seed: int, stop: threading.Event) -> None:
    rng = random.Random(seed)
    environments = [f"chaos-dev-{n}-{uuid.uuid4().hex[:4]}" for n in range(3)]
    production = [f"chaos-prod-{n}-{uuid.uuid4().hex[:4]}" for n in range(2)]
    sizes = dict.fromkeys(environments + production, 2)
    requester = cluster.token(TENANT, WRITE, ("Operator",), person="alice")
    while not stop.wait(rng.uniform(4, 12)):
        kind = rng.choice(("http", "http", "queue", "production"))
        environment = rng.choice(production if kind == "production" else environments)
        sizes[environment] += rng.randint(1, 4)
        spec = specification(
            environment, "production" if kind == "production" else "non-production", sizes[environment]
        )
        with book.lock:
            book.environments.add(environment)
        if kind == "queue":
            _send_promotion(cluster, spec)
            with book.lock:
                book.promotions_sent += 1
            continue
        answer = cluster.call("POST", "runtime-cloud/specifications", requester, json={"specification": spec})
        if answer is not None and answer.status_code == 202:
            with book.lock:
                book.declared[answer.json()["run_id"]] = kind


def _send_promotion(cluster: Cluster, spec: dict[str, Any]) -> None:
    document = {
        "promotion_id": f"promo-{uuid.uuid4().hex[:10]}",
        "tenant": TENANT,
        "environment": spec["environment"],
        "requested_by": "delivery",
        "specification": spec,
    }
    queue = QueueClient.from_connection_string(cluster.connection_string(), "promotions")
    try:
        queue.send_message(base64.b64encode(json.dumps(document).encode()).decode())
    except AzureError:  # the store is down: the delivery system would send again later; this one gives up
        cluster.count("promotion not sent (store down)")


def approver(cluster: Cluster, book: RunBook, stop: threading.Event) -> None:
    """Bob approves every production run awaiting approval (Alice declared them)."""
    token = cluster.token(TENANT, WRITE, ("Operator",), person="bob")
    while not stop.wait(3):
        with book.lock:
            production = [run for run, kind in book.declared.items() if kind == "production"]
        for run_id in production:
            run = cluster.call("GET", f"runtime-cloud/runs/{run_id}", token)
            if run is None or run.status_code != 200 or run.json()["state"] != "awaiting-approval":
                continue
            body = {"plan_digest": run.json()["plan_digest"], "reason": "chaos review"}
            answer = cluster.call("POST", f"runtime-cloud/runs/{run_id}/approve", token, json=body)
            key = str(answer.status_code) if answer is not None else "no-host"
            with book.lock:
                book.approvals[key] = book.approvals.get(key, 0) + 1


def scanner(cluster: Cluster, book: RunBook, seed: int, stop: threading.Event) -> None:
    rng = random.Random(seed)
    token = cluster.token(TENANT, WRITE, ("Operator",))
    while not stop.wait(rng.uniform(10, 25)):
        with book.lock:
            environments = sorted(book.environments)
        if environments:
            cluster.call("POST", f"runtime-cloud/environments/{rng.choice(environments)}/scan", token)


def gitops(cluster: Cluster, seed: int, stop: threading.Event) -> str:
    """Bind one environment to a local repository; commit and sync now and then. Answers the environment."""
    rng = random.Random(seed)
    environment = f"chaos-git-{uuid.uuid4().hex[:4]}"
    repository = BareRepository(cluster.git_root / f"{environment}.git")
    token = cluster.token(TENANT, WRITE, ("Operator",))
    queues = 1
    repository.commit({FILE: _yaml(environment, queues)})
    body = {"repository": str(repository.path), "path": FILE, "branch": "main"}
    bound = cluster.call("PUT", f"runtime-cloud/environments/{environment}/gitops", token, json=body)
    if bound is None or bound.status_code not in (200, 201):
        raise RuntimeError(f"gitops bind answered {getattr(bound, 'status_code', None)}: {getattr(bound, 'text', '')}")

    def loop() -> None:
        nonlocal queues
        while not stop.wait(rng.uniform(15, 35)):
            queues += 1
            repository.commit({FILE: _yaml(environment, queues)})
            cluster.call("POST", f"runtime-cloud/environments/{environment}/gitops/sync", token)
        repository.close()

    threading.Thread(target=loop, name="gitops", daemon=True).start()
    return environment


def _yaml(environment: str, queues: int) -> bytes:
    suffix = environment[-6:]
    names = "".join(f"  - type: queue\n    name: {PREFIX}g{n}-{suffix}\n" for n in range(queues))
    return (
        f"environment: {environment}\nenvironment_class: non-production\n"
        f"target: local-storage\nrunner: embedded\nresources:\n{names}"
    ).encode()


AUTOSCALING = {
    "min_slots": 1,
    "max_slots": 6,
    "target_utilization": 0.5,
    "scale_up_step": 2,
    "scale_down_step": 1,
    "scale_up_cooldown_seconds": 0,
    "scale_down_cooldown_seconds": 0,
    "window_seconds": 120,
    "stabilization_seconds": 0,
    "idle_seconds": 0,
    "infrastructure": {"target": "local-storage"},
}


def autoscaler(cluster: Cluster, pool: str, seed: int, stop: threading.Event) -> None:
    """The pool gets a policy, then an evaluation every so often (its lease clients make it busy or idle)."""
    rng = random.Random(seed)
    admin = cluster.token("platform-ops", ADMIN_SCOPES, ("PlatformAdmin",))
    policy = cluster.call("PUT", f"runtime-cloud/pools/{pool}/autoscaling", admin, json=AUTOSCALING)
    if policy is None or policy.status_code not in (200, 201):
        raise RuntimeError(f"autoscaling policy answered {getattr(policy, 'status_code', None)}")
    while not stop.wait(rng.uniform(8, 20)):
        cluster.call("POST", f"runtime-cloud/pools/{pool}/autoscaling/evaluate", admin)

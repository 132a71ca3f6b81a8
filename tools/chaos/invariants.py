"""The checks at the end of a chaos run: each answers how many things it looked at and what broke."""

from __future__ import annotations

from collections import Counter, defaultdict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any

from tools.chaos import evidence
from tools.chaos.cluster import Cluster
from tools.chaos.leases import LeaseBook

READ = ("factory.runtime.read",)
MAX_APPLY_CALLS = 10
STUCK_AFTER = timedelta(minutes=3)  # unmoved this long with no timer ahead: stuck (activities here take seconds)


@dataclass
class Check:
    name: str
    meaning: str
    count: int = 0
    violations: list[Any] = field(default_factory=list)

    @property
    def held(self) -> bool:
        return not self.violations


def leases_exclusive(cluster: Cluster, pools: list[str]) -> Check:
    check = Check("lease-slots-exclusive", "no slot held by two live leases; fencing tokens strictly increase per slot")
    for pool in pools:
        by_slot: dict[int, list[dict[str, Any]]] = defaultdict(list)
        for grant in evidence.grant_history(cluster, pool):
            by_slot[int(grant["Slot"])].append(grant)
        for slot, grants in by_slot.items():
            check.count += len(grants)
            grants.sort(key=lambda g: g["GrantedAt"])
            tokens = [int(g["FencingToken"]) for g in grants]
            if any(b <= a for a, b in zip(tokens, tokens[1:], strict=False)):
                check.violations.append({"pool": pool, "slot": slot, "tokens_in_grant_order": tokens})
            for before, after in zip(grants, grants[1:], strict=False):
                ended = before["EndedAt"] if before.get("Outcome") == "released" else before["ExpiresAt"]
                if ended > after["GrantedAt"]:
                    check.violations.append(
                        {"pool": pool, "slot": slot, "overlap": [before["LeaseId"], after["LeaseId"]]}
                    )
    return check


def leases_kept(book: LeaseBook) -> Check:
    check = Check("leases-kept-while-renewed", "no lease lost that its holder kept renewing within its TTL")
    check.count = len(book.grants)
    check.violations = list(book.lost_while_renewed)
    return check


def runs_final(runs: list[dict[str, Any]]) -> Check:
    check = Check("runs-final", "every run (promotion, GitOps, autoscaling) ended in a final state")
    check.count = len(runs)
    check.violations = [{"run": r["id"], "state": r["state"]} for r in runs if r["state"] not in evidence.FINAL]
    return check


def runs_receipted(cluster: Cluster, runs: list[dict[str, Any]]) -> tuple[Check, Check]:
    """Every run that started applying has a verified apply receipt, each step in it once."""
    receipts = Check("apply-receipts", "every run that started applying has its apply receipt, and it verifies")
    once = Check("steps-applied-once", "no step twice in a run's apply receipt")
    for run in runs:
        if "applying" not in [entry["state"] for entry in run.get("timeline", [])]:
            continue
        receipts.count += 1
        token = cluster.token(run["tenant"], READ)
        answer = cluster.call("GET", f"runtime-cloud/runs/{run['id']}/receipts/apply", token)
        if answer is None or answer.status_code != 200 or answer.json().get("verified") is not True:
            status = getattr(answer, "status_code", None)
            receipts.violations.append({"run": run["id"], "state": run["state"], "answer": status})
            continue
        addresses = Counter(step["address"] for step in answer.json()["receipt"].get("steps", []))
        once.count += len(addresses)
        twice = sorted(address for address, n in addresses.items() if n > 1)
        if twice:
            once.violations.append({"run": run["id"], "twice": twice})
    return receipts, once


def target_changes(missing_canaries: list[str], watched: int) -> Check:
    check = Check("target-applied-once", "no queue of the target created twice (its canary message survives)")
    check.count = watched
    check.violations = missing_canaries
    return check


def chains_verify(cluster: Cluster, runs: list[dict[str, Any]]) -> Check:
    check = Check("receipt-chains", "every environment's receipt chain verifies")
    for tenant, environment in sorted({(r["tenant"], r["environment"]) for r in runs}):
        check.count += 1
        answer = cluster.call(
            "GET", f"runtime-cloud/environments/{environment}/receipts/verify", cluster.token(tenant, READ)
        )
        if answer is None or answer.status_code != 200 or answer.json().get("verified") is not True:
            body = (
                answer.json()
                if answer is not None and answer.status_code == 200
                else getattr(answer, "status_code", None)
            )
            check.violations.append({"environment": environment, "answer": body})
    return check


def outbox_delivered(committed: list[dict[str, Any]], delivered: list[dict[str, Any]]) -> tuple[Check, dict[str, int]]:
    """Each committed event delivered, once per id after a consumer's dedupe, and each stream (a producer's
    ``source`` and its ``stream``: two producers may number the same environment apart) numbered 1, 2, 3...
    with no number twice, so a consumer puts every stream in order. Delivery is at-least-once, and an event
    left pending by a crash is sent by the next dispatcher round, after later ones: the facts count the
    repeats and the arrivals out of sequence, which the contract allows."""
    check = Check("outbox-delivery", "every outbox event delivered exactly once per id, in order per stream")
    check.count = len(committed)
    first: dict[str, dict[str, Any]] = {}
    for event in delivered:
        first.setdefault(event["id"], event)
    committed_ids = {event["id"] for event in committed}
    for event in committed:
        if event["id"] not in first:
            check.violations.append({"undelivered": event["id"], "type": event["type"], "stream": event.get("stream")})
    for event_id in first.keys() - committed_ids:
        check.violations.append({"delivered-but-never-committed": event_id})
    by_stream: dict[tuple[str, str], list[int]] = defaultdict(list)
    for event in first.values():
        by_stream[(str(event.get("source")), str(event.get("stream")))].append(int(event.get("sequence", 0)))
    late = 0
    for (source, stream), sequences in by_stream.items():
        late += sum(1 for a, b in zip(sequences, sequences[1:], strict=False) if b < a)
        if sorted(sequences) != list(range(min(sequences), min(sequences) + len(sequences))):
            check.violations.append({"source": source, "stream": stream, "not-one-by-one": sorted(sequences)[:40]})
    return check, {"delivered_more_than_once": len(delivered) - len(first), "arrived_out_of_sequence": late}


def poison(cluster: Cluster) -> Check:
    check = Check("poison-recorded", "no message in a poison queue without its rejection record")
    check.count, check.violations = evidence.poisoned_without_record(cluster)
    return check


def orchestrations(cluster: Cluster, runs: list[dict[str, Any]]) -> tuple[Check, Check, Check]:
    stuck = Check(
        "orchestrations-not-stuck",
        "no orchestration Running or Pending past its deadline (unmoved for 3 minutes with no timer ahead)",
    )
    failed = Check("orchestrations-not-failed", "no orchestration failed")
    calls = Check("apply-calls-bounded", f"no run called provisioning_apply more than {MAX_APPLY_CALLS} times")
    now = datetime.now(UTC)
    instances = evidence.orchestrations(cluster)
    stuck.count = failed.count = len(instances)
    for instance in instances:
        status, instance_id = instance.get("runtimeStatus"), str(instance.get("instanceId"))
        updated = datetime.fromisoformat(str(instance.get("lastUpdatedTime")).replace("Z", "+00:00"))
        if status in ("Running", "Pending") and now - updated > STUCK_AFTER:
            ahead = evidence.next_timer(cluster, instance_id)
            if ahead is None or ahead < now:  # a timer ahead is its deadline: waiting for it is not stuck
                stuck.violations.append({"instance": instance_id, "status": status, "last_updated": str(updated)})
        if status == "Failed":
            failed.violations.append({"instance": instance_id, "output": str(instance.get("output"))[:300]})
    for run in runs:
        if "applying" not in [entry["state"] for entry in run.get("timeline", [])]:
            continue
        n = evidence.apply_calls(cluster, run["id"])
        calls.count += 1
        if n is None or n > MAX_APPLY_CALLS:
            calls.violations.append({"run": run["id"], "apply_calls": n})
    return stuck, failed, calls


def no_internal_errors(answers: Counter[str]) -> Check:
    check = Check("no-500", "no request answered 500 (an outage answers 503 with Retry-After)")
    check.count = sum(answers.values())
    check.violations = [{key: n} for key, n in sorted(answers.items()) if key.endswith(" 500")]
    return check

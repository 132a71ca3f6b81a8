"""Receipts under version-level immutability, as the host asks Azure for it.

Azurite does not emulate immutability policies: it ignores the policy headers
of Put Blob and answers 501 (``APINotImplemented``) to Set Blob Immutability
Policy, which the first test shows. So every request here goes to the test's
Azurite for real (writing receipts, listing them, exporting copies) except
Set Blob Immutability Policy, which a transport at the edge of the world
records (method, URL, ``x-ms-immutability-policy-until-date`` and ``-mode``)
and answers as Azure does (200 with the policy's headers). Each test's name
says so (``..._edge_no_azurite_support_...``).
"""

from __future__ import annotations

import json
import time
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from email.utils import format_datetime, parsedate_to_datetime
from typing import Any
from urllib.parse import unquote, urlsplit

import pytest
import requests
from azure.core.exceptions import HttpResponseError
from azure.core.pipeline.transport import HttpTransport, RequestsTransport, RequestsTransportResponse
from azure.storage.blob import ImmutabilityPolicy

from devhost.azurite import TARGET_ACCOUNT, Azurite
from shared.backup.export import export_store
from shared.backup.location import BackupLocation, object_name
from shared.backup.receipt_copies import ReceiptCopies
from shared.backup.settings import BackupSettings
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from shared.provisioning.receipt_retention import SEVEN_YEARS, PolicyMode
from shared.provisioning.receipt_settings import ReceiptSettings
from shared.provisioning.receipt_sweep import record_environment_deleted, sweep_receipts
from shared.provisioning.receipts import RECEIPTS_CONTAINER, ApplyReceipt, PlanReceipt, ReceiptStore, sha256
from shared.provisioning.runs import SourceInfo
from tools import record_deletion

ON = ReceiptSettings()  # Immutability on, Locked: Azure's defaults
OFF = ReceiptSettings.model_validate({"Immutability": False})
STEP = timedelta(days=30)


@dataclass(frozen=True)
class PolicyRequest:
    method: str
    container: str
    blob: str
    until: datetime
    mode: str


class AzureImmutabilityEdge(HttpTransport):
    """Azurite for every request but Set Blob Immutability Policy, which it records and answers as Azure does."""

    def __init__(self) -> None:
        self._azurite = RequestsTransport(use_env_settings=False)
        self.policy_requests: list[PolicyRequest] = []
        self.uploads: list[tuple[str, dict[str, str]]] = []  # Put Blob: path and headers, as sent

    def send(self, request: Any, **kwargs: Any) -> Any:
        parts = urlsplit(request.url)
        path = unquote(parts.path).split("/", 3)  # "", account, container, blob
        if "comp=immutabilityPolicies" in (parts.query or ""):
            return self._answer_as_azure(request, path)
        if request.method == "PUT" and len(path) == 4 and not parts.query:
            self.uploads.append((f"{path[2]}/{path[3]}", dict(request.headers)))
        return self._azurite.send(request, **kwargs)

    def _answer_as_azure(self, request: Any, path: list[str]) -> Any:
        until = request.headers["x-ms-immutability-policy-until-date"]
        mode = request.headers.get("x-ms-immutability-policy-mode", "Unlocked")
        self.policy_requests.append(PolicyRequest(request.method, path[2], path[3], parsedate_to_datetime(until), mode))
        answer = requests.Response()
        answer.status_code = 200
        answer.headers.update(
            {
                "x-ms-request-id": str(uuid.uuid4()),
                "x-ms-version": request.headers.get("x-ms-version", ""),
                "Date": format_datetime(datetime.now(UTC), usegmt=True),
                "x-ms-immutability-policy-until-date": until,
                "x-ms-immutability-policy-mode": mode,
                "Content-Length": "0",
            }
        )
        answer._content = b""
        return RequestsTransportResponse(request, answer)

    def open(self) -> None:
        self._azurite.open()

    def close(self) -> None:
        self._azurite.close()

    def __enter__(self) -> AzureImmutabilityEdge:
        self._azurite.__enter__()
        return self

    def __exit__(self, *args: Any) -> None:
        self._azurite.__exit__(*args)

    def for_tenant(self, tenant: str) -> list[PolicyRequest]:
        return [request for request in self.policy_requests if request.blob.startswith(f"{tenant}/")]


@pytest.fixture
def edge() -> AzureImmutabilityEdge:
    return AzureImmutabilityEdge()


@pytest.fixture
def store(azurite: Azurite, edge: AzureImmutabilityEdge) -> StorageClients:
    clients = clients_from_connection_string(azurite.connection_string(), transport=edge)
    try:
        clients.blobs.create_container(RECEIPTS_CONTAINER)
    except Exception:
        pass
    return clients


def tenant() -> str:
    return f"tenant-keep-{uuid.uuid4().hex[:8]}"


def plan_receipt(tenant_id: str, environment: str, run_id: str) -> PlanReceipt:
    return PlanReceipt(
        run_id=run_id,
        tenant=tenant_id,
        environment=environment,
        target="local-storage",
        runner="embedded",
        runner_version="1",
        specification_digest="0" * 64,
        source=SourceInfo(kind="inline"),
        changes=[],
        counts={},
        planned_at=datetime.now(UTC).isoformat(),
    )


def apply_receipt(tenant_id: str, environment: str, run_id: str) -> ApplyReceipt:
    now = datetime.now(UTC).isoformat()
    return ApplyReceipt(
        run_id=run_id,
        tenant=tenant_id,
        environment=environment,
        target="local-storage",
        runner="embedded",
        runner_version="1",
        specification_digest="0" * 64,
        plan_digest=None,
        outcome="applied",
        started_at=now,
        finished_at=now,
    )


def close_to(actual: datetime, expected: datetime, slack: timedelta = timedelta(minutes=2)) -> bool:
    return abs(actual - expected) <= slack


def test_azurite_has_no_immutability_policies_hence_the_recording_edge(azurite: Azurite, store: StorageClients) -> None:
    blob = clients_from_connection_string(azurite.connection_string()).blobs.get_blob_client(
        RECEIPTS_CONTAINER, f"{tenant()}/probe/run-1/plan.json"
    )
    policy = ImmutabilityPolicy(expiry_time=datetime.now(UTC) + SEVEN_YEARS, policy_mode="Locked")
    blob.upload_blob(b"{}", immutability_policy=policy)  # accepted...

    assert blob.get_blob_properties().immutability_policy.expiry_time is None  # ...and ignored
    with pytest.raises(HttpResponseError) as refused:
        blob.set_immutability_policy(policy)
    assert refused.value.status_code == 501  # Set Blob Immutability Policy: not implemented


def test_retention_request_edge_no_azurite_support_a_receipt_is_written_under_a_locked_policy(
    store: StorageClients, edge: AzureImmutabilityEdge
) -> None:
    who = tenant()
    before = datetime.now(UTC)
    digest = ReceiptStore(store, ON).write(plan_receipt(who, "prod", "run-1"))

    ((name, headers),) = [(name, headers) for name, headers in edge.uploads if name.startswith(f"receipts/{who}/")]
    assert name == f"receipts/{who}/prod/run-1/plan.json"
    until = parsedate_to_datetime(headers["x-ms-immutability-policy-until-date"])
    assert close_to(until, before + SEVEN_YEARS + STEP)  # seven years and a step ahead, from the write
    assert headers["x-ms-immutability-policy-mode"] == "Locked"
    assert headers["x-ms-meta-sha256"] == digest

    ReceiptStore(store, OFF).write(plan_receipt(who, "dev", "run-2"))  # off (the local sample): no policy headers
    dev = [headers for name, headers in edge.uploads if name == f"receipts/{who}/dev/run-2/plan.json"]
    assert len(dev) == 1 and "x-ms-immutability-policy-until-date" not in dev[0]


def test_retention_request_edge_no_azurite_support_the_timer_extends_living_and_fixes_deleted_environments(
    store: StorageClients, edge: AzureImmutabilityEdge
) -> None:
    who, now = tenant(), datetime.now(UTC)
    receipts = ReceiptStore(store, OFF)  # Azurite keeps no policy anyway: every receipt lists as having none
    receipts.write(plan_receipt(who, "alive", "run-1"))
    receipts.write(apply_receipt(who, "alive", "run-1"))
    receipts.write(plan_receipt(who, "gone", "run-2"))
    container = store.blobs.get_container_client(RECEIPTS_CONTAINER)
    deleted_at = now - timedelta(days=10)
    marker = record_environment_deleted(container, OFF, who, "gone", deleted_at, "operator-1")
    back = record_environment_deleted(container, OFF, who, "back", now - timedelta(days=20), "operator-1")
    time.sleep(1.1)  # listings give creation times to the second: a blob of the marker's second is before it
    receipts.write(plan_receipt(who, "back", "run-3"))  # declared again after its deletion: alive

    report = sweep_receipts(container, ON.rule(), ON.policy_mode, now, send=True)

    sent = {request.blob: request for request in edge.for_tenant(who)}
    assert set(sent) == {
        f"{who}/alive/run-1/plan.json",
        f"{who}/alive/run-1/apply.json",
        f"{who}/gone/run-2/plan.json",
        marker,
        f"{who}/back/run-3/plan.json",
        back,
    }
    assert all(r.method == "PUT" and r.container == RECEIPTS_CONTAINER and r.mode == "Locked" for r in sent.values())
    for name in (f"{who}/alive/run-1/plan.json", f"{who}/back/run-3/plan.json"):
        assert close_to(sent[name].until, now + SEVEN_YEARS + STEP)  # alive: seven years and a step ahead
    for name in (f"{who}/gone/run-2/plan.json", marker):
        assert close_to(sent[name].until, deleted_at + SEVEN_YEARS)  # deleted: seven years from that day
    assert report.failures == 0 and report.changed >= len(sent) and report.deleted_environments >= 1


def test_retention_request_edge_no_azurite_support_with_immutability_off_the_timer_decides_and_sends_nothing(
    store: StorageClients, edge: AzureImmutabilityEdge
) -> None:
    who = tenant()
    ReceiptStore(store, OFF).write(plan_receipt(who, "local", "run-1"))
    container = store.blobs.get_container_client(RECEIPTS_CONTAINER)

    report = sweep_receipts(container, OFF.rule(), OFF.policy_mode, datetime.now(UTC), send=False)

    assert edge.for_tenant(who) == []  # nothing sent: Azurite would answer 501
    assert report.changed >= 1 and report.failures == 0  # but the receipt was listed and decided


def test_retention_request_edge_no_azurite_support_on_azurite_itself_the_timer_reports_what_it_could_not_set(
    azurite: Azurite, store: StorageClients
) -> None:
    plain = clients_from_connection_string(azurite.connection_string())
    who = tenant()
    ReceiptStore(plain, OFF).write(plan_receipt(who, "prod", "run-1"))
    container = plain.blobs.get_container_client(RECEIPTS_CONTAINER)

    report = sweep_receipts(container, ON.rule(), PolicyMode.LOCKED, datetime.now(UTC), send=True)

    assert report.failures == report.blobs >= 1 and report.changed == 0  # every receipt refused...
    assert all(": 501" in line for line in report.failed)  # ...as not implemented


def test_retention_request_edge_no_azurite_support_backup_copies_follow_their_receipts(
    store: StorageClients, edge: AzureImmutabilityEdge, azurite: Azurite
) -> None:
    who, now = tenant(), datetime.now(UTC)
    backup_blobs = clients_from_connection_string(azurite.connection_string(TARGET_ACCOUNT), transport=edge).blobs
    suffix = uuid.uuid4().hex[:8]
    location = BackupLocation(
        backup_blobs.get_container_client(f"backup-{suffix}"), backup_blobs.get_container_client(f"kept-{suffix}")
    )
    receipts = ReceiptStore(store, OFF)
    digest = receipts.write(plan_receipt(who, "prod", "run-1"))
    gone_digest = receipts.write(plan_receipt(who, "gone", "run-2"))
    container = store.blobs.get_container_client(RECEIPTS_CONTAINER)
    deleted_at = now - timedelta(days=3)
    record_environment_deleted(container, OFF, who, "gone", deleted_at, "operator-1")
    export_store(store, location, BackupSettings(), tables=(), containers=(RECEIPTS_CONTAINER,))
    assert location.kept.get_blob_client(object_name(digest)).exists()  # the copy lives in the kept container

    copies = ReceiptCopies(location, ON.rule(), ON.policy_mode, now, send=True)
    report = sweep_receipts(container, ON.rule(), ON.policy_mode, now, send=True, copies=copies)

    kept = {r.blob: r for r in edge.policy_requests if r.container == f"kept-{suffix}"}
    assert close_to(kept[object_name(digest)].until, now + SEVEN_YEARS + STEP)
    assert close_to(kept[object_name(gone_digest)].until, deleted_at + SEVEN_YEARS)
    assert {r.mode for r in kept.values()} == {"Locked"}
    assert report.copies_changed >= 2
    assert sha256(location.read_object(digest, kept=True)) == digest  # the copy is the receipt


def test_retention_request_edge_no_azurite_support_an_operator_records_a_deletion_and_the_timer_follows(
    azurite: Azurite, store: StorageClients, edge: AzureImmutabilityEdge, capsys: pytest.CaptureFixture[str]
) -> None:
    who, now = tenant(), datetime.now(UTC)
    ReceiptStore(store, OFF).write(plan_receipt(who, "retired", "run-1"))
    deleted_at = now - timedelta(days=1)
    common = ["--tenant", who, "--by", "ops@example.com", "--connection-string", azurite.connection_string()]

    assert record_deletion.main([*common, "--environment", "retired", "--at", deleted_at.isoformat()]) == 0
    answer = json.loads(capsys.readouterr().out)
    assert answer["receipts_kept_until"] == (deleted_at + SEVEN_YEARS).isoformat()
    assert record_deletion.main([*common, "--environment", "typo"]) == 2  # no receipts: nothing recorded

    container = store.blobs.get_container_client(RECEIPTS_CONTAINER)
    sweep_receipts(container, ON.rule(), ON.policy_mode, now, send=True)
    sent = {request.blob: request for request in edge.for_tenant(who)}
    assert set(sent) == {f"{who}/retired/run-1/plan.json", answer["marker"].removeprefix(f"{RECEIPTS_CONTAINER}/")}
    assert all(close_to(request.until, deleted_at + SEVEN_YEARS) for request in sent.values())

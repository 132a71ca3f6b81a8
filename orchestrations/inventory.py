"""An on-demand drift scan runs as a Durable orchestration, so it can outlast an HTTP request.

Azure answers an HTTP request within 230 s whatever ``functionTimeout`` says,
and a scan's length is the target's (a Pulumi refresh preview or a large
subscription's listing can take minutes). So ``POST .../scan`` starts
``inventory_scan_run`` (one activity, ``inventory_scan_environment``) and waits
at most ``RuntimeCloud:Inventory:ScanWaitSeconds`` (default 60) for it: a scan
that finishes by then is answered at once (200, its outcome), a longer one
with 202 and the scan's status URL, where the outcome appears when it ends.
The activity runs under ``functionTimeout`` and, being an activity, is run
again if its instance dies; the scan itself is idempotent (its lease, its
conditional writes).

The instance id is ``scan-<random>``; the instance's input names the tenant
and environment, and the status endpoint answers only their caller.
"""

from __future__ import annotations

import asyncio
import re
import time
import uuid
from dataclasses import dataclass
from typing import Any, TypedDict

import azure.durable_functions as df
from azure.core.exceptions import ServiceRequestError, ServiceResponseError

from orchestrations.durable import Activity, DurableClient, OrchestrationContext, Steps, blueprint
from orchestrations.starting import ACTIVE
from shared.inventory.api import ScanInProgress
from shared.platform.errors import NotFound, StoreUnavailable
from shared.platform.logs import app_logger, ids
from shared.wiring import inventory as wiring

bp = blueprint()
log = app_logger("inventory")

SCAN_ORCHESTRATOR = "inventory_scan_run"
STORE_UNAVAILABLE = "store-unavailable"  # a scan's refusal when the store did not answer


class ScanRequest(TypedDict):
    """The scan orchestration's input and its activity's: whose environment (the status URL's caller must match)."""

    tenant: str
    environment: str


class ScanCompleted(TypedDict):
    outcome: dict[str, Any]  # the scan's outcome as the API shows it (JSON)


class ScanRefused(TypedDict):
    refused: str  # another scan runs (its kind), "not-found", or STORE_UNAVAILABLE
    detail: str


# The activity's answer is the orchestration's output, which read_scan reads.
ScanAnswer = ScanCompleted | ScanRefused
SCAN = Activity[ScanRequest, ScanAnswer]("inventory_scan_environment")


@dataclass(frozen=True)
class ScanState:
    """What the status URL shows: the scan is ``running``, ``completed`` (with its outcome),
    ``refused`` (another scan of the environment was running, or there is no such environment) or ``failed``."""

    scan_id: str
    environment: str
    state: str
    outcome: dict[str, Any] | None = None
    refusal: str | None = None
    detail: str = ""

    def public_view(self) -> dict[str, Any]:
        view: dict[str, Any] = {
            "scan_id": self.scan_id,
            "environment": self.environment,
            "state": self.state,
            "status_url": status_url(self.environment, self.scan_id),
        }
        if self.outcome is not None:
            view["outcome"] = self.outcome
        if self.refusal is not None:
            view.update(problem=self.refusal, detail=self.detail)
        if self.state == "failed":
            view["detail"] = self.detail
        return view


SCAN_ID = re.compile(r"scan-[0-9a-f]{32}")


def status_url(environment: str, scan_id: str) -> str:
    return f"/runtime-cloud/environments/{environment}/scans/{scan_id}"


# -- the orchestration ---------------------------------------------------------------------------


@bp.orchestration_trigger(context_name="context", orchestration=SCAN_ORCHESTRATOR)
def inventory_scan_run(context: OrchestrationContext) -> Steps[ScanAnswer]:
    request: ScanRequest = context.get_input()
    return (yield from SCAN.call(context, request))


@SCAN.trigger(bp, input_name="request")
def inventory_scan_environment(request: ScanRequest) -> ScanAnswer:
    """Scan one environment; a refusal (another scan runs, no such environment) is the answer, not a failure."""
    try:
        outcome = wiring.scanner().scan(request["tenant"], request["environment"])
    except ScanInProgress as error:
        return {"refused": error.kind, "detail": str(error)}
    except NotFound as error:
        return {"refused": "not-found", "detail": str(error)}
    except (StoreUnavailable, ServiceRequestError, ServiceResponseError) as error:
        # The store is down: an answer to give (503 over HTTP), not a failed scan to log as a defect.
        return {"refused": STORE_UNAVAILABLE, "detail": f"the store did not answer: {type(error).__name__}"}
    return {"outcome": outcome.public_view()}


# -- starting and reading scans (HTTP) ------------------------------------------------------------


async def start_scan(client: DurableClient, tenant: str, environment: str) -> str:
    scan_id = f"scan-{uuid.uuid4().hex}"
    await client.start_new(SCAN_ORCHESTRATOR, scan_id, ScanRequest(tenant=tenant, environment=environment))
    return scan_id


async def read_scan(client: DurableClient, tenant: str, environment: str, *, scan_id: str) -> ScanState | None:
    """The scan, or None when this tenant's environment has no scan by that id."""
    if not SCAN_ID.fullmatch(scan_id):
        return None
    status = await client.get_status(scan_id, show_input=True)
    # The instance's input and output as its history holds them (JSON): read, not trusted to be the types above.
    subject = status.input_ if isinstance(status.input_, dict) else {}
    if subject.get("tenant") != tenant or subject.get("environment") != environment:
        return None
    if status.runtime_status in ACTIVE:
        return ScanState(scan_id, environment, "running")
    result = status.output if isinstance(status.output, dict) else {}
    if status.runtime_status == df.OrchestrationRuntimeStatus.Completed and "outcome" in result:
        return ScanState(scan_id, environment, "completed", outcome=result["outcome"])
    if status.runtime_status == df.OrchestrationRuntimeStatus.Completed and "refused" in result:
        return ScanState(scan_id, environment, "refused", refusal=result["refused"], detail=result.get("detail", ""))
    log.warning(
        "scan %s of %s/%s ended %s: %s",
        scan_id,
        tenant,
        environment,
        status.runtime_status,
        status.output,
        extra=ids(tenant=tenant, environment=environment),
    )
    return ScanState(scan_id, environment, "failed", detail="the scan failed; scan again (the host log says why)")


async def wait_for_scan(
    client: DurableClient, tenant: str, environment: str, *, scan_id: str, wait_seconds: float
) -> ScanState | None:
    """The scan once it ended, or None if it still runs after ``wait_seconds``."""
    deadline = time.monotonic() + wait_seconds
    interval = 0.05
    while time.monotonic() < deadline:
        state = await read_scan(client, tenant, environment, scan_id=scan_id)
        if state is not None and state.state != "running":
            return state
        await asyncio.sleep(min(interval, max(0.0, deadline - time.monotonic())))
        interval = min(interval * 2, 1.0)
    return None

"""Receipt verification and run outputs: what auditors and delivery read after a run.

- ``GET /runtime-cloud/environments/{environment}/receipts/verify`` walks the
  environment's receipts and reports the first broken digest or link
  (:mod:`shared.provisioning.verification`; the same check runs from the command
  line: ``python -m shared.provisioning.verify_receipts``).
- ``GET /runtime-cloud/runs/{id}/outputs`` serves the outputs that
  ``ProvisioningApplied`` references instead of carrying (a claim check,
  :mod:`shared.provisioning.outputs`).

Both are read-only (``factory.runtime.read``) and tenant-scoped: another
tenant's environment or run answers 404.
"""

from __future__ import annotations

import re

import azure.functions as func

from functions.blueprint import trigger_blueprint
from shared.desired_state.api import NAME_PATTERN
from shared.platform.auth import Caller, Scope
from shared.platform.errors import NotFound
from shared.platform.http.endpoint import endpoint
from shared.provisioning.api import ChainReport, RunOutputs, verify_environment
from shared.wiring import provisioning as wiring

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)

ENVIRONMENT = re.compile(NAME_PATTERN)


@bp.route(route="runtime-cloud/environments/{environment}/receipts/verify", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], path={"environment": NAME_PATTERN}, responses={200: ChainReport})
def verify_receipts(req: func.HttpRequest, caller: Caller) -> ChainReport:
    """200 with the report whether or not the chain verifies: ``verified`` and ``first_broken`` say."""
    environment = req.route_params["environment"]
    if not ENVIRONMENT.fullmatch(environment):  # it becomes part of a table key
        raise NotFound(f"environment {environment}")
    return verify_environment(wiring.store(), wiring.receipts(), caller.tenant, environment)


@bp.route(route="runtime-cloud/runs/{id}/outputs", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], responses={200: RunOutputs})
def get_outputs(req: func.HttpRequest, caller: Caller) -> RunOutputs:
    run = wiring.service().run(caller.tenant, req.route_params["id"])
    outputs, digest = wiring.outputs().read_run(run.tenant, run.environment, run.id)
    return RunOutputs(run_id=run.id, sha256=digest, count=len(outputs), outputs=outputs)

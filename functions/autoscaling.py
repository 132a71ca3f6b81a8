"""Pool autoscaling API and timer (capacity's RuntimeScaling, merged in as pool autoscaling).

Thin triggers: parse, authorise, call :class:`shared.autoscaling.scaler.PoolScaler`,
start the orchestration of any run a decision declared, shape the answer.
Reads need ``factory.runtime.read`` and see the pools the caller may see (a
shared pool, or a pool dedicated to the caller's tenant; every pool for a
``PlatformAdmin``); another tenant's dedicated pool answers 404. Setting a
policy and evaluating now need ``factory.runtime.write`` and ``PlatformAdmin``.
"""

from __future__ import annotations

import re
from asyncio import to_thread

import azure.durable_functions as df
import azure.functions as func

from functions.blueprint import trigger_blueprint
from orchestrations.provisioning_client import start_and_wake
from shared.autoscaling.api import (
    AutoscalingPolicy,
    DecisionList,
    DecisionRecord,
    DecisionsQuery,
    Evaluation,
    EvaluationView,
    ScalerStatus,
)
from shared.capacity.api import POOL_ID, pools
from shared.platform.auth import Caller, Role, Scope
from shared.platform.http import problems
from shared.platform.http.endpoint import endpoint
from shared.platform.http.responses import JsonResult
from shared.platform.logs import app_logger
from shared.wiring import autoscaling as wiring
from shared.wiring import capacity as capacity_wiring
from shared.wiring.settings import setting_binding

bp = trigger_blueprint(http_auth_level=func.AuthLevel.ANONYMOUS)
log = app_logger("autoscaling")

DECISION_NUMBER = re.compile(r"^[1-9][0-9]{0,9}$")


def _visible_pool(req: func.HttpRequest, caller: Caller) -> str:
    """The route's pool if the caller may see it; else the same 404 as a pool that never existed."""
    pool_id: str = req.route_params["id"]  # azure-functions leaves route_params unannotated
    if not POOL_ID.fullmatch(pool_id):
        raise problems.not_found()
    stored = pools.read_pool(capacity_wiring.store(), pool_id)
    if stored is None or not (stored.pool.serves(caller.tenant) or caller.has_role(Role.PLATFORM_ADMIN)):
        raise problems.not_found()
    return pool_id


async def _start_runs(client: df.DurableOrchestrationClient, evaluation: Evaluation) -> None:
    for run, created in evaluation.runs:
        await start_and_wake(client, run, created=created)


@bp.route(route="runtime-cloud/pools/{id}/autoscaling", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], path={"id": POOL_ID}, responses={200: ScalerStatus})
def autoscaling_get(req: func.HttpRequest, caller: Caller) -> ScalerStatus:
    return wiring.scaler().status(_visible_pool(req, caller))


@bp.route(route="runtime-cloud/pools/{id}/autoscaling", methods=["PUT"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.PLATFORM_ADMIN],
    path={"id": POOL_ID},
    body=AutoscalingPolicy,
    responses={200: ScalerStatus, 201: ScalerStatus},
)
async def autoscaling_put_policy(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller, body: AutoscalingPolicy
) -> JsonResult:
    """Set the pool's policy and evaluate it at once: the first decision under a new policy (or new
    infrastructure) is the baseline run that provisions the slots the pool already has."""
    pool_id = _visible_pool(req, caller)
    status, created, evaluation = await to_thread(wiring.scaler().set_policy, pool_id, body, caller.principal)
    if evaluation is not None:
        await _start_runs(client, evaluation)
    return JsonResult(status, status=201 if created else 200)


@bp.route(route="runtime-cloud/pools/{id}/autoscaling/decisions", methods=["GET"])
@endpoint(scopes=[Scope.RUNTIME_READ], path={"id": POOL_ID}, query=DecisionsQuery, responses={200: DecisionList})
def autoscaling_list_decisions(req: func.HttpRequest, caller: Caller, query: DecisionsQuery) -> DecisionList:
    pool_id = _visible_pool(req, caller)
    found = wiring.scaler().decisions(pool_id, query.limit, query.before)
    older = found[-1].number if len(found) == query.limit and found[-1].number > 1 else None
    return DecisionList(decisions=found, before=older)


@bp.route(route="runtime-cloud/pools/{id}/autoscaling/decisions/{decision}", methods=["GET"])
@endpoint(
    scopes=[Scope.RUNTIME_READ], path={"id": POOL_ID, "decision": DECISION_NUMBER}, responses={200: DecisionRecord}
)
def autoscaling_get_decision(req: func.HttpRequest, caller: Caller) -> DecisionRecord:
    pool_id = _visible_pool(req, caller)
    number = req.route_params["decision"]
    if not DECISION_NUMBER.fullmatch(number):
        raise problems.not_found()
    return wiring.scaler().decision(pool_id, int(number))


@bp.route(route="runtime-cloud/pools/{id}/autoscaling/evaluate", methods=["POST"])
@bp.durable_client_input(client_name="client")
@endpoint(
    scopes=[Scope.RUNTIME_WRITE],
    roles=[Role.PLATFORM_ADMIN],
    path={"id": POOL_ID},
    responses={200: EvaluationView},
    problems=(409,),
)
async def autoscaling_evaluate_pool(
    req: func.HttpRequest, client: df.DurableOrchestrationClient, caller: Caller
) -> EvaluationView:
    """Evaluate one pool now (what the timer does for every pool); 409 when another evaluation is under way."""
    pool_id = _visible_pool(req, caller)
    evaluation = await to_thread(wiring.scaler().evaluate, pool_id)
    await _start_runs(client, evaluation)
    return EvaluationView(pool=evaluation.pool, note=evaluation.note, decision=evaluation.decision)


@bp.timer_trigger(
    arg_name="timer",
    schedule=setting_binding("RuntimeCloud:Autoscaling:EvaluateSchedule"),
)
@bp.durable_client_input(client_name="client")
async def autoscaling_evaluate(timer: func.TimerRequest, client: df.DurableOrchestrationClient) -> None:
    """Sample every pool with a policy, decide, and move decisions in flight on (starting their runs)."""
    evaluations = await to_thread(wiring.scaler().evaluate_all)
    for evaluation in evaluations:
        await _start_runs(client, evaluation)
    moving = [e.pool for e in evaluations if e.decision is not None and not e.decision.phase.is_final]
    log.info("autoscaling: %d pool(s) evaluated, decisions in flight: %s", len(evaluations), moving)

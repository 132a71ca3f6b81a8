"""Issue 28: an environment's class and target come from its registration, not from each specification,
and a target reserved for other tenants reads to everyone else as one that does not exist."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor
from typing import Any

from azure.data.tables import TableClient

from tests.conftest import RESERVED_TENANT
from tests.provisioning.helpers import WRITE, declare, specification, target_queue_names, unique, wait_for_run_state

FINAL = {"applied", "failed", "rejected", "expired", "superseded", "cancelled"}


def queues(environment: str, *names: str) -> list[dict[str, Any]]:
    return [{"type": "queue", "name": f"{name}-{environment[-8:]}"} for name in names]


def registration(host, token: str, environment: str) -> dict[str, Any] | None:
    answer = host.request("GET", f"runtime-cloud/environments/{environment}/specification", token=token)
    assert answer.status_code == 200, answer.text
    return answer.json()["registration"]


def approve(host, token: str, run: dict[str, Any]):
    return host.request(
        "POST",
        f"runtime-cloud/runs/{run['id']}/approve",
        token=token,
        json={"plan_digest": run["plan_digest"], "reason": "reviewed"},
    )


def applied_production(host, writer: str, operator: str, environment: str, *names: str) -> dict[str, Any]:
    answer = declare(host, writer, specification(environment, "production", resources=queues(environment, *names)))
    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(host, writer, answer.json()["run_id"], {"awaiting-approval"})
    assert approve(host, operator, run).status_code == 200
    applied = wait_for_run_state(host, writer, run["id"], FINAL)
    assert applied["state"] == "applied", applied
    return applied


def field_paths(answer) -> list[str]:
    return [error["path"] for error in answer.json()["errors"]]


# -- targets: who may use them ------------------------------------------------------------------------


def test_a_target_reserved_for_another_tenant_is_refused_as_an_unknown_one_and_is_not_listed(provisioning_host, mint):
    writer = mint("tenant-a", scopes=WRITE)
    environment = unique("reserved")

    reserved = declare(provisioning_host, writer, specification(environment, target="reserved-storage"))
    unknown = declare(provisioning_host, writer, specification(environment, target="nowhere-storage"))

    assert reserved.status_code == unknown.status_code == 422, reserved.text
    assert reserved.headers["Content-Type"].startswith("application/problem+json")
    assert field_paths(reserved) == field_paths(unknown) == ["/specification/target"]
    # The same document, but for the id the caller wrote: nothing tells a reserved target from a missing one.
    assert reserved.json() == {
        **unknown.json(),
        "detail": unknown.json()["detail"].replace("nowhere-storage", "reserved-storage"),
        "errors": [
            {**error, "message": error["message"].replace("nowhere-storage", "reserved-storage")}
            for error in unknown.json()["errors"]
        ],
    }
    assert RESERVED_TENANT not in reserved.text
    assert "reserved-storage" not in unknown.text  # the list of configured targets leaves it out too
    listed = provisioning_host.request(
        "GET", "runtime-cloud/meta/targets", token=mint("tenant-a", scopes=["factory.meta.read"])
    )
    assert [t["id"] for t in listed.json()["targets"]] == ["local-storage", "unreachable-storage"]
    assert RESERVED_TENANT not in listed.text


def test_the_tenant_a_target_is_reserved_for_sees_it_and_declares_on_it(provisioning_host, mint):
    owner = mint(RESERVED_TENANT, scopes=[*WRITE, "factory.meta.read"])
    listed = provisioning_host.request("GET", "runtime-cloud/meta/targets", token=owner)
    assert [t["id"] for t in listed.json()["targets"]] == ["local-storage", "unreachable-storage", "reserved-storage"]
    assert "tenants" not in listed.json()["targets"][2]  # nobody learns who else may use a target

    environment = unique("own")
    answer = declare(provisioning_host, owner, specification(environment, target="reserved-storage"))

    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(provisioning_host, owner, answer.json()["run_id"], FINAL)
    assert run["state"] == "applied" and run["target"] == "reserved-storage", run


# -- classes: the registered one counts ---------------------------------------------------------------


def test_a_writer_cannot_turn_production_into_non_production_nor_move_it(provisioning_host, mint):
    writer = mint("tenant-a", scopes=WRITE, object_id="writer-wanda")
    environment = unique("prod")
    first = declare(provisioning_host, writer, specification(environment, "production"))
    assert first.status_code == 202, first.text

    laxer = declare(provisioning_host, writer, specification(environment, "non-production"))
    moved = declare(provisioning_host, writer, specification(environment, "production", target="unreachable-storage"))

    assert laxer.status_code == 422, laxer.text
    assert laxer.headers["Content-Type"].startswith("application/problem+json")
    assert field_paths(laxer) == ["/specification/environment_class"]
    assert moved.status_code == 422, moved.text
    assert field_paths(moved) == ["/specification/target"]
    registered = registration(provisioning_host, writer, environment)
    assert registered is not None
    assert (registered["environment_class"], registered["target"]) == ("production", "local-storage")
    assert (registered["registered_by"], registered["registered_run_id"]) == ("writer-wanda", first.json()["run_id"])


def test_a_platform_admin_loosening_production_gets_a_run_under_the_production_rules(provisioning_host, azurite, mint):
    writer = mint("tenant-a", scopes=WRITE, object_id="writer-wanda")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], object_id="operator-olga")
    admin = mint("tenant-a", scopes=WRITE, roles=["PlatformAdmin", "Operator"], object_id="admin-ada")
    environment = unique("prod")
    applied_production(provisioning_host, writer, operator, environment, "a")

    # What the issue saw go through: queue a replaced by b, as non-production. Under the production layer
    # (which the registered class brings), the delete is denied before anyone could approve it.
    dropping = declare(
        provisioning_host, admin, specification(environment, "non-production", resources=queues(environment, "b"))
    )
    assert dropping.status_code == 202, dropping.text
    denied = wait_for_run_state(provisioning_host, admin, dropping.json()["run_id"], FINAL)
    assert denied["environment_class"] == "production"
    assert denied["state"] == "failed" and denied["failure_reason"] == "policy-denied", denied
    assert denied["policy"]["denied_rules"] == ["no-deletes-in-production"]
    assert f"a-{environment[-8:]}" in target_queue_names(azurite)
    assert registration(provisioning_host, writer, environment)["environment_class"] == "production"

    # Keeping a: the run waits for another person's approval, as production does, and is judged by that layer.
    keeping = declare(
        provisioning_host, admin, specification(environment, "non-production", resources=queues(environment, "a", "c"))
    )
    assert keeping.status_code == 202, keeping.text
    run = wait_for_run_state(provisioning_host, admin, keeping.json()["run_id"], {"awaiting-approval", *FINAL})
    assert run["state"] == "awaiting-approval", run
    assert run["environment_class"] == "production" and run["requires_approval"] is True
    assert run["registry_change"]["environment_class"] == "non-production"
    receipt = provisioning_host.request("GET", f"runtime-cloud/runs/{run['id']}/receipts/plan", token=admin).json()
    assert "no-deletes-in-production" in [rule["id"] for rule in receipt["receipt"]["policy"]["rules"]]
    assert registration(provisioning_host, writer, environment)["environment_class"] == "production"
    assert approve(provisioning_host, admin, run).status_code == 403  # the requester is not another person

    assert approve(provisioning_host, operator, run).status_code == 200
    assert wait_for_run_state(provisioning_host, admin, run["id"], FINAL)["state"] == "applied"

    registered = registration(provisioning_host, writer, environment)
    assert registered["environment_class"] == "non-production"
    assert (registered["updated_by"], registered["updated_run_id"]) == ("admin-ada", run["id"])
    # From now on the environment is non-production: the writer's next declaration applies without approval.
    after = declare(
        provisioning_host, writer, specification(environment, "non-production", resources=queues(environment, "c"))
    )
    assert after.status_code == 202, after.text
    follower = wait_for_run_state(provisioning_host, writer, after.json()["run_id"], FINAL)
    assert follower["state"] == "applied" and follower["environment_class"] == "non-production", follower


def test_non_production_becomes_production_freely_and_stays_so(provisioning_host, mint):
    writer = mint("tenant-a", scopes=WRITE)
    environment = unique("grow")
    first = declare(provisioning_host, writer, specification(environment))
    assert wait_for_run_state(provisioning_host, writer, first.json()["run_id"], FINAL)["state"] == "applied"

    stricter = declare(provisioning_host, writer, specification(environment, "production"))

    assert stricter.status_code == 202, stricter.text
    run = wait_for_run_state(provisioning_host, writer, stricter.json()["run_id"], {"awaiting-approval", *FINAL})
    assert run["state"] == "awaiting-approval" and run["environment_class"] == "production", run
    assert run["registry_change"] is None
    assert registration(provisioning_host, writer, environment)["environment_class"] == "production"
    assert declare(provisioning_host, writer, specification(environment)).status_code == 422


# -- the first declaration registers, once ------------------------------------------------------------


def race(host, declarations: list[tuple[str, dict[str, Any]]]) -> list[Any]:
    with ThreadPoolExecutor(max_workers=len(declarations)) as pool:
        return list(pool.map(lambda d: declare(host, d[0], d[1]), declarations))


def test_racing_first_declarations_register_the_environment_once(provisioning_host, mint):
    writers = {f"racer-{n}": mint("tenant-a", scopes=WRITE, object_id=f"racer-{n}") for n in range(6)}
    environment = unique("race")

    answers = race(provisioning_host, [(token, specification(environment, "production")) for token in writers.values()])

    assert [a.status_code for a in answers] == [202] * len(writers), [a.text for a in answers]
    registered = registration(provisioning_host, writers["racer-0"], environment)
    assert registered["registered_by"] in writers
    assert registered["registered_run_id"] in {a.json()["run_id"] for a in answers}
    assert registered["updated_by"] is None  # registered once, never re-registered by a later racer


def test_racing_first_declarations_of_both_classes_agree_on_one_registration(provisioning_host, mint):
    writer = mint("tenant-a", scopes=WRITE)
    environment = unique("race")
    classes = ["production", "non-production"] * 3

    answers = race(provisioning_host, [(writer, specification(environment, c)) for c in classes])

    registered = registration(provisioning_host, writer, environment)
    accepted = [(c, a.json()["run_id"]) for c, a in zip(classes, answers, strict=True) if a.status_code == 202]
    refused = [a for a in answers if a.status_code != 202]
    assert all(a.status_code == 422 and field_paths(a) == ["/specification/environment_class"] for a in refused)
    # A production declaration always makes it production (freely); only non-production ones can be refused.
    assert all(c == "non-production" for c, a in zip(classes, answers, strict=True) if a.status_code == 422)
    assert registered["environment_class"] == "production"
    runs = {
        run_id: provisioning_host.request("GET", f"runtime-cloud/runs/{run_id}", token=writer).json()
        for _, run_id in accepted
    }
    assert all(runs[run_id]["environment_class"] == "production" for c, run_id in accepted if c == "production")


def test_an_environment_declared_before_the_registry_keeps_the_class_of_its_last_run(provisioning_host, azurite, mint):
    writer = mint("tenant-a", scopes=WRITE)
    environment = unique("legacy")
    assert declare(provisioning_host, writer, specification(environment, "production")).status_code == 202
    # As if it had been declared before there was a registry: its row is gone, its runs are not.
    registry = TableClient.from_connection_string(azurite.connection_string(), "Environments")
    registry.delete_entity(partition_key="tenant-a", row_key=environment)

    laxer = declare(provisioning_host, writer, specification(environment, "non-production"))

    assert laxer.status_code == 422, laxer.text
    assert field_paths(laxer) == ["/specification/environment_class"]
    assert registration(provisioning_host, writer, environment)["environment_class"] == "production"

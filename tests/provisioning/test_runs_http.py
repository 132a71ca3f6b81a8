"""Declaring over HTTP, production approvals, one run at a time per environment, reads."""

from __future__ import annotations

from tests.provisioning.helpers import WRITE, declare, runs_of, specification, unique, wait_for_run_state


def test_a_production_run_waits_and_applies_only_what_an_operator_approved(provisioning_host, mint):
    requester = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment = unique("prod")

    answer = declare(provisioning_host, requester, specification(environment, "production"))
    assert answer.status_code == 202, answer.text
    run_id = answer.json()["run_id"]
    assert answer.headers["Location"].endswith(f"/runtime-cloud/runs/{run_id}")
    run = wait_for_run_state(provisioning_host, requester, run_id, {"awaiting-approval"})
    digest = run["plan_digest"]

    wrong = provisioning_host.request(
        "POST", f"runtime-cloud/runs/{run_id}/approve", token=operator, json={"plan_digest": "0" * 64}
    )
    assert wrong.status_code == 409
    assert wrong.json()["type"].endswith("plan-digest-mismatch")

    own = provisioning_host.request(
        "POST", f"runtime-cloud/runs/{run_id}/approve", token=requester, json={"plan_digest": digest}
    )
    assert own.status_code == 403

    observer = mint("tenant-a", scopes=WRITE, roles=["Observer"], client_id="studio-carol")
    assert (
        provisioning_host.request(
            "POST", f"runtime-cloud/runs/{run_id}/approve", token=observer, json={"plan_digest": digest}
        ).status_code
        == 403
    )

    approved = provisioning_host.request(
        "POST",
        f"runtime-cloud/runs/{run_id}/approve",
        token=operator,
        json={"plan_digest": digest, "reason": "reviewed"},
    )
    assert approved.status_code == 200, approved.text

    run = wait_for_run_state(provisioning_host, requester, run_id, {"applied", "failed"})
    assert run["state"] == "applied"
    assert run["decision"]["by"] == "studio-bob"
    receipt = provisioning_host.request("GET", f"runtime-cloud/runs/{run_id}/receipts/apply", token=requester).json()
    assert receipt["receipt"]["approvals"][0]["plan_digest"] == digest
    assert receipt["receipt"]["plan_digest"] == digest


def test_a_rejected_run_ends_rejected(provisioning_host, mint):
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    run_id = declare(provisioning_host, requester, specification(unique("prod"), "production")).json()["run_id"]
    run = wait_for_run_state(provisioning_host, requester, run_id, {"awaiting-approval"})

    answer = provisioning_host.request(
        "POST",
        f"runtime-cloud/runs/{run_id}/reject",
        token=operator,
        json={"plan_digest": run["plan_digest"], "reason": "not now"},
    )
    assert answer.status_code == 200

    run = wait_for_run_state(provisioning_host, requester, run_id, {"rejected"})
    assert run["failure_reason"] == "approval-rejected"


def test_a_newer_declaration_supersedes_a_run_awaiting_approval_and_only_the_newest_proceeds(provisioning_host, mint):
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment = unique("busy")

    first = declare(provisioning_host, requester, specification(environment, "production")).json()["run_id"]
    stale = wait_for_run_state(provisioning_host, requester, first, {"awaiting-approval"})
    newer = [
        declare(
            provisioning_host,
            requester,
            specification(environment, "production", resources=[{"type": "queue", "name": f"q{n}-{environment[-8:]}"}]),
        ).json()["run_id"]
        for n in range(3)
    ]

    # Nothing of the first run was applied: the newer declarations supersede it instead of waiting 24 h.
    superseded = wait_for_run_state(provisioning_host, requester, first, {"superseded", "applied", "expired"})
    assert superseded["state"] == "superseded" and superseded["failure_reason"] == "superseded"
    assert superseded["decision"]["decision"] == "superseded" and newer[0] in superseded["decision"]["reason"]
    late = provisioning_host.request(
        "POST", f"runtime-cloud/runs/{first}/approve", token=operator, json={"plan_digest": stale["plan_digest"]}
    )
    assert late.status_code == 409, late.text  # the approvers cannot apply the stale plan any more
    newest = wait_for_run_state(provisioning_host, requester, newer[-1], {"awaiting-approval"})
    for older in newer[:-1]:
        assert wait_for_run_state(provisioning_host, requester, older, {"superseded"})["failure_reason"] == "superseded"
    provisioning_host.request(
        "POST", f"runtime-cloud/runs/{newer[-1]}/approve", token=operator, json={"plan_digest": newest["plan_digest"]}
    )
    assert wait_for_run_state(provisioning_host, requester, newer[-1], {"applied", "failed"})["state"] == "applied"


def test_a_run_superseded_while_it_plans_does_not_wait_for_approval(provisioning_host, mint):
    # The second declaration lands while the first plans or as it begins to wait: either way
    # (the declaration or the first run's move to awaiting-approval sees the other) it is superseded.
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    environment = unique("racing")
    first = declare(provisioning_host, requester, specification(environment, "production")).json()["run_id"]
    second = declare(
        provisioning_host,
        requester,
        specification(environment, "production", resources=[{"type": "queue", "name": f"second-{environment[-8:]}"}]),
    ).json()["run_id"]

    assert (
        wait_for_run_state(provisioning_host, requester, first, {"superseded", "expired", "applied"})["state"]
        == "superseded"
    )
    assert wait_for_run_state(provisioning_host, requester, second, {"awaiting-approval"})


def test_an_approved_run_is_not_superseded_and_the_newer_run_follows_it(provisioning_host, mint):
    requester = mint("tenant-a", scopes=WRITE, client_id="studio-alice")
    operator = mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob")
    environment = unique("approved")
    first = declare(provisioning_host, requester, specification(environment, "production")).json()["run_id"]
    waiting = wait_for_run_state(provisioning_host, requester, first, {"awaiting-approval"})
    approved = provisioning_host.request(
        "POST", f"runtime-cloud/runs/{first}/approve", token=operator, json={"plan_digest": waiting["plan_digest"]}
    )
    assert approved.status_code == 200, approved.text

    # The next release adds a queue and keeps what the first one applies: production deletes are
    # denied by the default policy (policies/classes/production.yaml) unless an exception says otherwise.
    kept = specification(environment, "production")["resources"]
    second = declare(
        provisioning_host,
        requester,
        specification(
            environment, "production", resources=[*kept, {"type": "queue", "name": f"next-{environment[-8:]}"}]
        ),
    ).json()["run_id"]

    assert (
        wait_for_run_state(provisioning_host, requester, first, {"applied", "failed", "superseded"})["state"]
        == "applied"
    )
    assert wait_for_run_state(provisioning_host, requester, second, {"awaiting-approval"})["decision"] is None


def test_an_idempotency_key_names_one_run_and_refuses_other_desired_state(provisioning_host, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("idem")
    key = unique("key")

    first = declare(provisioning_host, token, specification(environment), key=key)
    again = declare(provisioning_host, token, specification(environment), key=key)
    other = declare(
        provisioning_host,
        token,
        specification(environment, resources=[{"type": "table", "name": "Other" + environment[-8:].replace("-", "")}]),
        key=key,
    )

    assert first.status_code == again.status_code == 202
    assert first.json()["run_id"] == again.json()["run_id"]
    assert other.status_code == 409
    assert other.json()["type"].endswith("idempotency-key-reused")
    assert len(runs_of(provisioning_host, token, environment)) == 1


def test_invalid_specifications_are_422_with_field_paths(provisioning_host, mint):
    token = mint("tenant-a", scopes=WRITE)
    bad = specification("Not_A_Name", resources=[{"type": "queue", "name": "UPPER"}])

    answer = declare(provisioning_host, token, bad)

    assert answer.status_code == 422
    assert answer.headers["Content-Type"].startswith("application/problem+json")
    paths = {error["path"] for error in answer.json()["errors"]}
    assert "/specification/environment" in paths
    assert any(path.startswith("/specification/resources/0") for path in paths)


def test_an_unknown_target_or_runner_is_422(provisioning_host, mint):
    token = mint("tenant-a", scopes=WRITE)

    target = declare(provisioning_host, token, specification(unique("t"), target="mars"))
    runner = declare(provisioning_host, token, {**specification(unique("t")), "runner": "terraform"})

    assert target.status_code == 422
    assert target.json()["errors"][0]["path"] == "/specification/target"
    assert runner.status_code == 422
    assert runner.json()["errors"][0]["path"] == "/specification/runner"


def test_a_body_that_is_not_json_is_400_and_a_wrong_media_type_415(provisioning_host, mint):
    token = mint("tenant-a", scopes=WRITE)

    not_json = provisioning_host.request(
        "POST", "runtime-cloud/specifications", token=token, data=b"{nope", headers={"Content-Type": "application/json"}
    )
    wrong_type = provisioning_host.request(
        "POST", "runtime-cloud/specifications", token=token, data=b"a: b", headers={"Content-Type": "text/plain"}
    )

    assert not_json.status_code == 400
    assert wrong_type.status_code == 415


def test_another_tenants_run_answers_404(provisioning_host, mint):
    owner = mint("tenant-a", scopes=WRITE)
    stranger = mint("tenant-b", scopes=WRITE + ["factory.runtime.read"], roles=["Operator"])
    run_id = declare(provisioning_host, owner, specification(unique("mine"))).json()["run_id"]

    assert provisioning_host.request("GET", f"runtime-cloud/runs/{run_id}", token=stranger).status_code == 404
    assert (
        provisioning_host.request("GET", f"runtime-cloud/runs/{run_id}/receipts/plan", token=stranger).status_code
        == 404
    )
    assert (
        provisioning_host.request(
            "POST", f"runtime-cloud/runs/{run_id}/approve", token=stranger, json={"plan_digest": "0" * 64}
        ).status_code
        == 404
    )


def test_the_environment_specification_shows_declared_and_last_applied(provisioning_host, mint):
    token = mint("tenant-a", scopes=WRITE)
    environment = unique("spec")
    run_id = declare(provisioning_host, token, specification(environment)).json()["run_id"]
    wait_for_run_state(provisioning_host, token, run_id, {"applied"})

    answer = provisioning_host.request("GET", f"runtime-cloud/environments/{environment}/specification", token=token)

    assert answer.status_code == 200
    document = answer.json()
    assert document["declared"]["run_id"] == run_id
    assert document["last_applied"]["digest"] == document["declared"]["digest"]
    assert document["last_applied"]["specification"]["environment"] == environment

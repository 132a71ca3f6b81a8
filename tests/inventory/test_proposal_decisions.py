"""Proposals follow the drift: each scan refreshes the open proposal, and decisions can be per finding.

- a finding that resolves (fixed by hand) or becomes suppressed (an ignore
  rule) leaves the open proposal, and the adopt diff is recomputed without it;
- accepting writes ignore rules only for the proposal's open findings, and
  adopting never puts back drift that was fixed meanwhile;
- a run a proposal starts (revert or adopt) leaves drift that an ignore rule
  covers exactly as it is;
- ``{"decisions": [{"finding": id, "option": ...}]}`` reverts one finding
  and adopts another in one run.
"""

from __future__ import annotations

from typing import Any

from tests.inventory.helpers import (
    accept,
    applied_environment,
    findings,
    names,
    proposals,
    scan,
    tags_of,
    target_queues,
)
from tests.provisioning.helpers import WRITE, target_blobs, target_queue_names, wait_for_run_state
from tests.support.host import HostProcess


def tokens(mint: Any) -> tuple[str, str]:
    return (
        mint("tenant-a", scopes=WRITE, client_id="studio-alice"),
        mint("tenant-a", scopes=WRITE, roles=["Operator"], client_id="studio-bob"),
    )


def drift_both(azurite: Any, environment: str, spec: dict[str, Any]) -> tuple[Any, Any]:
    """The queue's team and the container's retention changed by hand; their clients."""
    tags = tags_of("tenant-a", environment)
    queue = target_queues(azurite).get_queue_client(names(spec)["queue"])
    container = target_blobs(azurite).get_container_client(names(spec)["container"])
    queue.set_queue_metadata({"team": "payments", **tags})
    container.set_container_metadata({"retention": "long", **tags})
    return queue, container


def stray_queue(azurite: Any, environment: str) -> str:
    """A queue tagged for the environment by hand: drift of kind unexpected."""
    name = f"stray-{environment[-8:]}"
    target_queues(azurite).create_queue(name, metadata={"owner": "ops", **tags_of("tenant-a", environment)})
    return name


def ignore(host: HostProcess, token: str, environment: str, resource: str) -> dict[str, Any]:
    answer = host.request(
        "POST",
        f"runtime-cloud/environments/{environment}/ignore-rules",
        token=token,
        json={"resource": resource, "reason": "known, leave it"},
    )
    assert answer.status_code == 201, answer.text
    return answer.json()


def declared(host: HostProcess, token: str, environment: str) -> dict[str, dict[str, Any]]:
    document = host.request("GET", f"runtime-cloud/environments/{environment}/specification", token=token).json()
    return {f"{r['type']}/{r['name']}": r for r in document["last_applied"]["specification"]["resources"]}


def applied_run(host: HostProcess, token: str, answer: Any) -> dict[str, Any]:
    assert answer.status_code == 200, answer.text
    run = wait_for_run_state(host, token, answer.json()["run"]["run_id"], {"applied", "failed"})
    assert run["state"] == "applied", run
    return run


def test_fixed_and_ignored_drift_leave_the_open_proposal_and_adopt_keeps_the_fix(inventory_host, azurite, mint):
    token, operator = tokens(mint)
    environment, spec = applied_environment(inventory_host, token)
    queue, _ = drift_both(azurite, environment, spec)
    stray = stray_queue(azurite, environment)
    scan(inventory_host, token, environment)
    [proposal] = proposals(inventory_host, token, environment, "open")
    assert len(proposal["finding_ids"]) == 3 and len(proposal["options"]["adopt"]["diff"]) == 3

    queue.set_queue_metadata({"team": "checkout", **tags_of("tenant-a", environment)})  # fixed by hand
    ignore(inventory_host, operator, environment, f"queue/{stray}")
    outcome = scan(inventory_host, token, environment)

    [refreshed] = proposals(inventory_host, token, environment, "open")
    [left] = findings(inventory_host, token, environment)
    address = f"blob-container/{names(spec)['container']}"
    assert refreshed["id"] == proposal["id"] and outcome["proposal_id"] == proposal["id"]
    assert refreshed["finding_ids"] == [left["id"]] and left["address"] == address
    assert [f["address"] for f in refreshed["findings"]] == [address]
    assert [c["address"] for c in refreshed["options"]["adopt"]["diff"]] == [address]
    assert [c["address"] for c in refreshed["options"]["revert"]["kept"]] == [f"queue/{stray}"]

    run = applied_run(inventory_host, token, accept(inventory_host, operator, proposal["id"], "adopt"))
    assert run["specification_digest"] == refreshed["options"]["adopt"]["specification_digest"]
    resources = declared(inventory_host, token, environment)
    assert resources[f"queue/{names(spec)['queue']}"]["metadata"] == {"team": "checkout"}  # the fix stays
    assert resources[address]["metadata"] == {"retention": "long"}
    assert queue.get_queue_properties().metadata["team"] == "checkout"
    assert stray in target_queue_names(azurite)


def test_accepting_writes_ignore_rules_only_for_the_open_findings(inventory_host, azurite, mint):
    token, operator = tokens(mint)
    environment, spec = applied_environment(inventory_host, token)
    queue, _ = drift_both(azurite, environment, spec)
    scan(inventory_host, token, environment)
    [proposal] = proposals(inventory_host, token, environment, "open")
    queue.set_queue_metadata({"team": "checkout", **tags_of("tenant-a", environment)})  # fixed by hand
    scan(inventory_host, token, environment)

    answer = accept(inventory_host, operator, proposal["id"], "accept", reason="retention is being reviewed")

    assert answer.status_code == 200, answer.text
    rules = inventory_host.request("GET", f"runtime-cloud/environments/{environment}/ignore-rules", token=token).json()[
        "ignore_rules"
    ]
    assert [(r["resource"], r["field"]) for r in rules] == [
        (f"blob-container/{names(spec)['container']}", "metadata.retention")
    ]
    assert answer.json()["decision"]["ignore_rule_ids"] == [rules[0]["id"]]


def test_a_revert_leaves_drift_an_ignore_rule_covers_as_it_is(inventory_host, azurite, mint):
    token, operator = tokens(mint)
    environment, spec = applied_environment(inventory_host, token)
    stray = stray_queue(azurite, environment)
    scan(inventory_host, token, environment)  # the stray is seen (and proposed) before it is ignored
    ignore(inventory_host, operator, environment, f"queue/{stray}")
    target_queues(azurite).delete_queue(names(spec)["queue"])
    scan(inventory_host, token, environment)
    [proposal] = proposals(inventory_host, token, environment, "open")
    assert [f["kind"] for f in proposal["findings"]] == ["missing"]

    applied_run(inventory_host, token, accept(inventory_host, operator, proposal["id"], "revert"))

    present = target_queue_names(azurite)
    assert names(spec)["queue"] in present  # reverted
    assert stray in present  # ignored: not deleted


def test_decisions_per_finding_revert_one_and_adopt_another_in_one_run(inventory_host, azurite, mint):
    token, operator = tokens(mint)
    environment, spec = applied_environment(inventory_host, token)
    queue, container = drift_both(azurite, environment, spec)
    scan(inventory_host, token, environment)
    [proposal] = proposals(inventory_host, token, environment, "open")
    by_address = {f["address"]: f["id"] for f in proposal["findings"]}
    queue_finding = by_address[f"queue/{names(spec)['queue']}"]
    container_finding = by_address[f"blob-container/{names(spec)['container']}"]
    url = f"runtime-cloud/proposals/{proposal['id']}/accept"
    for body, path in [
        (
            {
                "decisions": [
                    {"finding": "fnd-nope", "option": "revert"},
                    {"finding": container_finding, "option": "adopt"},
                ]
            },
            "/decisions/0/finding",
        ),
        ({"decisions": [{"finding": queue_finding, "option": "revert"}]}, "/decisions"),
        (
            {
                "decisions": [
                    {"finding": queue_finding, "option": "revert"},
                    {"finding": queue_finding, "option": "adopt"},
                ]
            },
            "/decisions/1/finding",
        ),
        ({"option": "revert", "decisions": [{"finding": queue_finding, "option": "revert"}]}, "/decisions"),
        ({}, "/option"),
    ]:
        refused = inventory_host.request("POST", url, token=operator, json=body)
        assert refused.status_code == 422, (body, refused.text)
        assert [e["path"] for e in refused.json()["errors"]] == [path], (body, refused.json())

    decisions = [{"finding": queue_finding, "option": "revert"}, {"finding": container_finding, "option": "adopt"}]
    answer = inventory_host.request("POST", url, token=operator, json={"decisions": decisions})
    run = applied_run(inventory_host, token, answer)
    again = inventory_host.request("POST", url, token=operator, json={"decisions": decisions})

    assert again.status_code == 200 and again.json()["run"]["run_id"] == run["id"]  # the same run, not a second
    assert answer.json()["decision"]["findings"] == {queue_finding: "revert", container_finding: "adopt"}
    assert queue.get_queue_properties().metadata["team"] == "checkout"  # reverted
    assert container.get_container_properties().metadata["retention"] == "long"  # adopted
    resources = declared(inventory_host, token, environment)
    assert resources[f"queue/{names(spec)['queue']}"]["metadata"] == {"team": "checkout"}
    assert resources[f"blob-container/{names(spec)['container']}"]["metadata"] == {"retention": "long"}
    assert scan(inventory_host, token, environment)["open_findings"] == 0

"""Issue 17, beyond the anchors: self-heal. A declaration made over a followed branch by hand is shown
(``overridden``); with ``self_heal`` the next automatic sync declares the branch head again, once per hand
declaration however many syncs race for it; a hand declaration of the branch's own specification is no
override at all."""

from __future__ import annotations

from typing import Any

from tests.gitops.helpers import FILE, bind, github_push, run_poll, spec_yaml, status, sync_now, wait_for_syncs
from tests.provisioning.helpers import declare, runs_of, specification, target_queue_names, wait_for_run_state
from tests.support.host import HostProcess


def _following(host: HostProcess, token: str, environment: str, repository: Any, **binding: Any) -> tuple[str, str]:
    """Bound, synced and applied: (the head commit, its run)."""
    commit = repository.commit({FILE: spec_yaml(environment)})
    assert bind(host, token, environment, repository.path, **binding).status_code == 201
    declared = sync_now(host, token, environment).json()
    assert declared["outcome"] == "declared", declared
    assert wait_for_run_state(host, token, declared["run_id"], {"applied", "failed"})["state"] == "applied"
    return commit, declared["run_id"]


def _by_hand(host: HostProcess, token: str, environment: str, queue: str) -> str:
    """An Operator declares over the branch through the HTTP API (an extra queue); answers the applied run."""
    resources = [{"type": "queue", "name": f"gqa-{environment[-8:]}"}, {"type": "queue", "name": queue}]
    answer = declare(host, token, specification(environment, resources=resources))
    assert answer.status_code == 202, answer.text
    run_id: str = answer.json()["run_id"]
    assert wait_for_run_state(host, token, run_id, {"applied", "failed"})["state"] == "applied"
    return run_id


def _synced(host: HostProcess, token: str, tenant: str, environment: str, commit: str) -> dict[str, Any]:
    """Two polls and a webhook (duplicates of one another), all handled; the status after them."""
    attempts = status(host, token, environment)["sync_attempts"]
    run_poll(host)
    assert github_push(host, tenant, environment, commit).status_code == 202
    run_poll(host)
    return wait_for_syncs(host, token, environment, attempts + 3)


def test_without_self_heal_a_hand_declaration_shows_as_overridden_until_an_operator_syncs(
    runtime_host, azurite, operator, tenant, environment, repository
):
    commit, first = _following(runtime_host, operator, environment, repository)
    hand = _by_hand(runtime_host, operator, environment, f"hand-{environment[-8:]}")

    now = _synced(runtime_host, operator, tenant, environment, commit)

    assert now["self_heal"] is False and now["overridden"] is True
    assert now["overridden_by_run_id"] == hand and now["overridden_by_source"] == "inline"
    assert now["last_outcome"] == "overridden" and now["last_self_heal"] is None
    assert [r["id"] for r in runs_of(runtime_host, operator, environment)] == [hand, first]  # nothing re-declared
    assert f"hand-{environment[-8:]}" in target_queue_names(azurite)

    # An Operator's sync-now is Argo CD's manual sync: it puts the branch back.
    healed = sync_now(runtime_host, operator, environment).json()
    assert healed["outcome"] == "self-healed" and healed["commit"] == commit
    assert healed["overridden_by_run_id"] == hand
    assert wait_for_run_state(runtime_host, operator, healed["run_id"], {"applied", "failed"})["state"] == "applied"
    after = status(runtime_host, operator, environment)
    assert after["overridden"] is False and after["last_applied_commit"] == commit
    assert after["last_self_heal"]["overridden_run_id"] == hand
    assert after["last_self_heal"]["run_id"] == healed["run_id"] and after["last_self_heal"]["trigger"] == "manual"
    assert f"hand-{environment[-8:]}" not in target_queue_names(azurite)


def test_self_heal_declares_the_head_again_once_per_hand_declaration(
    runtime_host, azurite, operator, tenant, environment, repository
):
    commit, first = _following(runtime_host, operator, environment, repository, self_heal=True)
    hand = _by_hand(runtime_host, operator, environment, f"hand-{environment[-8:]}")

    now = _synced(runtime_host, operator, tenant, environment, commit)

    runs = runs_of(runtime_host, operator, environment)
    assert [r["id"] for r in runs[1:]] == [hand, first]  # one run for three syncs
    heal = runs[0]
    assert heal["source"]["commit"] == commit and heal["requested_by"] == "gitops"
    assert now["overridden"] is False and now["last_declared_run_id"] == heal["id"]
    assert now["last_self_heal"]["overridden_run_id"] == hand and now["last_self_heal"]["run_id"] == heal["id"]
    assert now["last_self_heal"]["commit"] == commit
    assert wait_for_run_state(runtime_host, operator, heal["id"], {"applied", "failed"})["state"] == "applied"
    assert f"hand-{environment[-8:]}" not in target_queue_names(azurite)  # the branch's state is back

    # Healed: later syncs find the branch declared, not a loop of new runs.
    quiet = _synced(runtime_host, operator, tenant, environment, commit)
    assert quiet["last_outcome"] == "up-to-date" and len(runs_of(runtime_host, operator, environment)) == 3

    # Another hand declaration is healed once more.
    again = _by_hand(runtime_host, operator, environment, f"again-{environment[-8:]}")
    later = _synced(runtime_host, operator, tenant, environment, commit)
    runs = runs_of(runtime_host, operator, environment)
    assert len(runs) == 5 and runs[1]["id"] == again
    assert later["last_self_heal"]["overridden_run_id"] == again and later["last_self_heal"]["run_id"] == runs[0]["id"]


def test_a_hand_declaration_of_the_branch_s_own_specification_is_no_override(
    runtime_host, operator, tenant, environment, repository
):
    commit, first = _following(runtime_host, operator, environment, repository, self_heal=True)
    same = specification(environment, resources=[{"type": "queue", "name": f"gqa-{environment[-8:]}"}])
    answer = declare(runtime_host, operator, same)
    assert answer.status_code == 202, answer.text
    wait_for_run_state(runtime_host, operator, answer.json()["run_id"], {"applied", "failed"})

    now = _synced(runtime_host, operator, tenant, environment, commit)

    assert now["overridden"] is False and now["last_self_heal"] is None
    assert now["last_outcome"] == "up-to-date"
    assert len(runs_of(runtime_host, operator, environment)) == 2

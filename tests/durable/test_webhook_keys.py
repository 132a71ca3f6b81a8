"""The Durable webhooks want the Durable system key, and the check-status URLs carry it, as in Azure.

Before, they served every tenant's orchestration inputs and history, and took
events (an approval, say), from anyone who could reach the host.
"""

from __future__ import annotations

import requests


def test_the_durable_webhooks_want_the_system_key_and_its_status_urls_carry_it(durable):
    host = durable.host
    started = host.request("POST", "start/sequence")
    assert started.status_code == 202
    status_url = started.json()["statusQueryGetUri"]
    instance = started.json()["id"]

    listing = requests.get(host.url("runtime/webhooks/durabletask/instances"), timeout=30)
    one = requests.get(host.url(f"runtime/webhooks/durabletask/instances/{instance}"), timeout=30)
    unknown = requests.get(host.url("runtime/webhooks/durabletask/instances/no-such-instance"), timeout=30)
    event = requests.post(
        host.url(f"runtime/webhooks/durabletask/instances/{instance}/raiseEvent/Approval"), json="approved", timeout=30
    )
    rpc_wrong_key = requests.get(host.url("runtime/rpc/not-the-key/instances"), timeout=30)
    for answer in (listing, one, unknown, event, rpc_wrong_key):
        assert answer.status_code == 401
        assert "needs a host key" in answer.json()["detail"]
    assert one.json() == unknown.json()

    assert "code=" in status_url
    assert requests.get(status_url, timeout=30).status_code in (200, 202)


def test_an_unknown_path_under_a_valid_rpc_key_is_a_404_that_does_not_echo_the_key(durable):
    key = durable.host.master_key

    answer = requests.get(durable.host.url(f"runtime/rpc/{key}/no/such/endpoint"), timeout=30)

    assert answer.status_code == 404
    assert key not in answer.text

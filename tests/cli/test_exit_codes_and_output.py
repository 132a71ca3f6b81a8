"""What a script branches on: exit codes, one-line errors on stderr, JSON on stdout; and the help."""

from __future__ import annotations

import subprocess
import uuid

from tests.cli.conftest import CONSOLE_SCRIPT, Cli, as_person
from tests.support.ports import closed_port

READ = ["factory.runtime.read"]
GROUPS = [
    "declare",
    "runs",
    "receipts",
    "envs",
    "proposals",
    "gitops",
    "policy",
    "leases",
    "pools",
    "quotas",
    "editions",
    "backup",
]


def test_make_setup_installs_the_console_script(cli_env: dict[str, str]):
    assert CONSOLE_SCRIPT.exists(), f"{CONSOLE_SCRIPT} is missing: `make setup` installs the runtime-cloud command"
    shown = subprocess.run([str(CONSOLE_SCRIPT), "--help"], env=cli_env, capture_output=True, text=True, timeout=60)

    assert shown.returncode == 0, shown.stderr
    assert "Usage: runtime-cloud" in shown.stdout
    assert all(f" {group} " in shown.stdout for group in GROUPS)


def test_help_lists_the_command_groups(cli: Cli):
    shown = cli("--help")

    assert shown.code == 0, shown.stderr
    for group in GROUPS:
        assert f" {group} " in shown.stdout, group
    runs = cli("runs", "--help")
    for command in ("list", "show", "watch", "log", "approve", "cancel"):
        assert f" {command} " in runs.stdout, command
    leases = cli("leases", "--help")
    for command in ("acquire", "renew", "release", "list"):
        assert f" {command} " in leases.stdout, command
    gitops = cli("gitops", "--help")
    for command in ("bind", "sync", "status", "suspend", "resume"):
        assert f" {command} " in gitops.stdout, command


def test_not_found_is_exit_3_with_one_line(cli: Cli, mint):
    missing = cli("runs", "show", "run-" + "0" * 24, token=mint("tenant-a", scopes=READ))

    assert missing.code == 3, missing.stdout
    assert missing.stdout == ""
    assert missing.stderr.startswith("error: 404 not-found") and len(missing.stderr.strip().splitlines()) == 1


def test_invalid_input_is_exit_2_naming_the_field(cli: Cli, mint):
    refused = cli("runs", "list", "--state", "nearly-done", token=mint("tenant-a", scopes=READ))

    assert refused.code == 2, refused.stdout
    assert "422" in refused.stderr and "/state" in refused.stderr


def test_a_missing_role_is_exit_4(cli: Cli, mint):
    # Editions are a PlatformAdmin's: an Operator is refused (403), whatever the edition.
    refused = cli(
        "editions", "set", "cli-never", "--limit", "sandbox=1", token=mint("tenant-a", scopes=["factory.runtime.write"])
    )

    assert refused.code == 4, refused.stdout
    assert refused.stderr.startswith("error: 403")


def test_authentication_is_exit_5(cli: Cli, mint):
    assert cli("runs", "list").code == 5  # no token at all
    expired = cli("runs", "list", token=mint("tenant-a", scopes=READ, lifetime_seconds=-3600))
    assert expired.code == 5 and expired.stderr.startswith("error: 401")
    refused = cli("--local-issuer", "--tenant", "tenant/a", "runs", "list")  # the issuer refuses what the host would
    assert refused.code == 5 and "not a tenant id" in refused.stderr


def test_an_unreachable_host_is_exit_6(cli: Cli, mint):
    answer = cli("--url", f"http://127.0.0.1:{closed_port()}", "runs", "list", token=mint("tenant-a", scopes=READ))

    assert answer.code == 6
    assert answer.stderr.startswith("error: cannot reach")


def test_a_bad_command_line_is_exit_2(cli: Cli):
    assert cli("runs", "frobnicate").code == 2
    assert cli("--local-issuer", "runs", "list").code == 2  # --local-issuer needs --tenant
    assert cli("proposals", "decide", "p-1", "--finding", "f-1=destroy", token="unused").code == 2


def test_lists_follow_continuation_pages_and_print_json(cli: Cli):
    tenant = f"cli-{uuid.uuid4().hex[:8]}"  # a tenant of its own: its edition's limits are its alone
    worker = as_person(tenant, "worker-7")
    holder = f"holder-{uuid.uuid4().hex[:6]}"
    acquired = []
    for _ in range(3):
        lease = cli(*worker, "--json", "leases", "acquire", "--kind", "sandbox", "--holder", holder, "--ttl", "300")
        assert lease.code == 0, lease.stderr
        acquired.append(lease.json()["lease_id"])

    paged = cli(*worker, "--json", "leases", "list", "--holder", holder, "--limit", "1")  # a page per lease

    assert paged.code == 0, paged.stderr
    assert sorted(lease["lease_id"] for lease in paged.json()) == sorted(acquired)
    table = cli(*worker, "leases", "list", "--holder", holder)
    assert all(lease_id in table.stdout for lease_id in acquired)
    renewed = cli(*worker, "--json", "leases", "renew", acquired[0], "--ttl", "120")
    assert renewed.code == 0 and renewed.json()["ttl_seconds"] == 120
    for lease_id in acquired:
        assert cli(*worker, "leases", "release", lease_id).code == 0
    active = cli(*worker, "--json", "leases", "list", "--holder", holder, "--state", "active")
    assert active.json() == []


def test_capacity_and_host_reads_print_json(cli: Cli):
    reader = as_person(f"cli-{uuid.uuid4().hex[:8]}", "olivia")  # no edition assigned: the default one

    pools = cli(*reader, "--json", "pools", "list")
    editions = cli(*reader, "--json", "editions", "list")
    quotas = cli(*reader, "--json", "quotas", "show")
    backup = cli(*reader, "--json", "backup", "status")

    assert pools.code == 0 and "sandbox-local" in {pool["id"] for pool in pools.json()}
    assert editions.code == 0 and {"free", "standard", "enterprise"} <= {e["edition"] for e in editions.json()}
    assert quotas.code == 0 and quotas.json()["your_edition"] == "standard"
    assert backup.json()["status"] in ("healthy", "degraded")
    assert backup.code == (0 if backup.json()["status"] == "healthy" else 1)

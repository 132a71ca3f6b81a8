"""The CLI's policy commands: a dry run, and an exception added, listed a page at a time, and revoked."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import yaml

from tests.cli.conftest import Cli, as_person
from tests.provisioning.helpers import specification, unique


def test_dry_run_then_an_exception_added_listed_and_revoked(cli: Cli, tmp_path: Path):
    operator = as_person("tenant-a", "olivia", "Operator")
    environment = unique("cli-policy")
    spec_file = tmp_path / "spec.yaml"  # sent as specification_text (the host parses YAML)
    spec_file.write_text(yaml.safe_dump(specification(environment)))

    dry = cli(*operator, "--json", "policy", "dry-run", str(spec_file))
    assert dry.code == 0, dry.stderr
    assert dry.json()["summary"]["outcome"] == "allow" and dry.json()["plan_counts"]["create"] == 2
    assert cli(*operator, "declare", str(spec_file), "--watch").code == 0

    expires = (datetime.now(UTC) + timedelta(days=7)).isoformat()
    added = []
    for resource in ("queue/one", "queue/two"):
        answer = cli(*operator, "--json", "policy", "exceptions", "add", environment, "--rule", "change-cap",
                     "--resource", resource, "--reason", "a migration", "--expires-at", expires)  # fmt: skip
        assert answer.code == 0, answer.stderr
        added.append(answer.json()["id"])
    listed = cli(*operator, "--json", "policy", "exceptions", "list", environment, "--limit", "1")
    assert listed.code == 0, listed.stderr
    assert sorted(e["id"] for e in listed.json()) == sorted(added)

    revoked = cli(*operator, "--json", "policy", "exceptions", "revoke", environment, added[0])
    assert revoked.code == 0, revoked.stderr
    assert revoked.json()["active"] is False
    too_long = cli(*operator, "policy", "exceptions", "add", environment, "--rule", "change-cap", "--resource", "*",
                   "--reason", "forever", "--expires-at", "2099-01-01T00:00:00Z")  # fmt: skip
    assert too_long.code == 2 and "422" in too_long.stderr and "/expires_at" in too_long.stderr

"""A warm runner (``python -m runner_job serve``) runs two requests in a row: nothing of the first reaches the second.

Run as in tests/iac/test_job_as_unprivileged_user.py: a folder tree laid out as
the image's, the app's side in this process against Azurite, and the command
the warm runners' Container App runs in a child process as an unprivileged
user. The user is not the Dockerfile's 10001 but one of this test's own: the
runner ends every process of its user between runs (``--reap-user``), and
must find none but its own here.

The tenant's program is played by a stand-in Pulumi CLI (the CLI cannot be
installed here; the Pulumi CLI is the edge of the world): at its preview it
writes down what it finds of an earlier run (files in the home, PULUMI_HOME,
the workspace and the temp folder; processes left running), then leaves all
of those behind, one process in the run's session and one in a session of
its own, and fails the preview.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devhost.azurite import TARGET_ACCOUNT, Azurite
from shared.desired_state.api import EnvironmentSpecification
from shared.iac.jobs.protocol import JobKind
from shared.iac.model import RunnerError
from shared.iac.settings import IaCSettings
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from shared.platform.storage.resources import ensure_resources
from shared.platform.targets import ProvisioningTarget
from tests.iac.conftest import TARGET_SETTING
from tests.iac.test_job_as_unprivileged_user import (
    FACTORY_SPEC,
    REPO,
    TENANT,
    ImageLayout,
    Launcher,
    image_layout,
    runnable_python,
)
from tests.iac.test_job_as_unprivileged_user import _python_path as python_path
from tests.iac.test_job_as_unprivileged_user import _run as a_run

SERVE_SECONDS = 240  # a bound on a stuck runner, not a timing assertion
WARM_UID = 10_000 + 7_331  # a user no other process here runs as: --reap-user ends every process of it
MARK = "left-by-a-run"

TENANT_PROGRAM = r"""#!/bin/sh
[ "$1" = version ] && { echo v3.200.0; exit 0; }
args=$(printf '%s ' "$@" | tr '\n\t' '  ')
alive() {
  for pid in $(cat "$OBSERVED/pids" 2>/dev/null); do
    [ -e "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" && printf '%s ' "$pid"
  done
}
marks() { find "$HOME" "$TMPDIR" -name 'left-by-a-run*' 2>/dev/null | sort | tr '\n' ' '; }
case " $args " in
  *" config set-all "*)
    stack=$(printf '%s' "$args" | sed -n 's/.*--stack \([^ ]*\).*/\1/p')
    echo "config: {}" > "Pulumi.$stack.yaml" ;;
  *" preview "*)
    printf 'seen\t%s\t%s\n' "$(marks)" "$(alive)" >> "$OBSERVED/log"
    echo secret > "$HOME/left-by-a-run"
    echo secret > "$PULUMI_HOME/left-by-a-run"
    echo secret > "$TMPDIR/left-by-a-run"
    hidden="$RUNTIME_CLOUD_PULUMI_WORKSPACE/left-by-a-run-hidden"
    mkdir "$hidden" && chmod 000 "$hidden"
    sh -c 'exec sleep 300' </dev/null >/dev/null 2>&1 &
    echo $! >> "$OBSERVED/pids"
    setsid sh -c 'exec sleep 300' </dev/null >/dev/null 2>&1 &
    echo $! >> "$OBSERVED/pids"
    printf 'left\t%s\t%s\n' "$(marks)" "$(alive)" >> "$OBSERVED/log"
    echo "error: the stand-in Pulumi CLI stops before the engine" >&2; exit 1 ;;
esac
exit 0
"""


@pytest.fixture
def layout() -> Iterator[ImageLayout]:
    if os.geteuid() != 0:
        pytest.fail("a warm runner runs as a user of its own: this test needs root to start it as one (setpriv)")
    with image_layout(uid=WARM_UID) as made:
        yield made


@pytest.fixture
def storage(azurite: Azurite) -> StorageClients:
    clients = clients_from_connection_string(azurite.connection_string())
    ensure_resources(clients)  # as the host does at start
    return clients


def _folder(path: Path, mode: int, uid: int = 0) -> Path:
    path.mkdir(parents=True)
    path.chmod(mode)
    os.chown(path, uid, uid)
    return path


def _factory(layout: ImageLayout) -> tuple[EnvironmentSpecification, ProvisioningTarget, IaCSettings]:
    document = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    spec = EnvironmentSpecification.model_validate({**document, "tenant": TENANT})
    targets = json.loads(document["pulumi"]["config"]["runtime-cloud-infra:targets"])
    target = ProvisioningTarget.model_validate(next(t for t in targets if t["Id"] == spec.target))
    adopted = {f"{TENANT}/{spec.environment}": spec.pulumi.stack if spec.pulumi else ""}
    iac = IaCSettings(
        JobQueue=f"warm-{uuid.uuid4().hex[:10]}",
        PulumiWorkRoot=str(layout.work_root),
        PulumiAdoptedStacks=adopted,
    )
    return spec, target, iac


def _serve(layout: ImageLayout, python: str, azurite: Azurite, iac: IaCSettings, tmp: Path, observed: Path) -> str:
    env = {
        **layout.env,
        "PATH": f"{layout.tools}:/usr/bin:/bin",
        "PYTHONPATH": python_path(),
        "TMPDIR": str(tmp),
        "OBSERVED": str(observed),
        "AzureWebJobsStorage": azurite.connection_string(),
        "RuntimeCloud__IaC__JobQueue": iac.job_queue,
        TARGET_SETTING: azurite.connection_string(TARGET_ACCOUNT),
    }
    as_user = ["setpriv", f"--reuid={layout.uid}", f"--regid={layout.gid}", "--clear-groups"]
    wipe = ["--wipe", layout.env["HOME"], "--wipe", str(tmp)]
    done = subprocess.run(
        [*as_user, python, "-m", "runner_job", "serve", "--reap-user", *wipe, "--runs", "2"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SERVE_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return done.stderr


def test_a_warm_runner_s_second_run_finds_nothing_of_the_first_with_the_pulumi_cli_mocked(
    layout: ImageLayout, azurite: Azurite, storage: StorageClients
) -> None:
    cli = layout.tools / "pulumi"
    cli.write_text(TENANT_PROGRAM)
    cli.chmod(0o755)
    tmp = _folder(layout.root / "tmp", 0o1777)  # the image's /tmp: root's, sticky, everyone's
    observed = _folder(layout.root / "observed", 0o755, layout.uid)  # the test's window: wiped by nobody
    spec, target, iac = _factory(layout)
    python = runnable_python(layout)
    launchers = [
        Launcher(layout, python, storage, azurite, iac, a_run(TENANT, spec.environment, "pulumi")) for _ in "12"
    ]
    tickets = [each.launch(spec, target, JobKind.PLAN, None) for each in launchers]

    _serve(layout, python, azurite, iac, tmp, observed)

    for each, ticket in zip(launchers, tickets, strict=True):  # both requests ran, each to its failed preview
        with pytest.raises(RunnerError, match="pulumi preview of stack runtime-cloud-infra/factory failed"):
            each.jobs.plan_of(each.run, ticket)
    lines = [line.split("\t") for line in (observed / "log").read_text().splitlines()]
    assert [line[0] for line in lines] == ["seen", "left", "seen", "left"]
    (_, first_seen, _), (_, first_left, first_alive), (_, second_seen, second_alive), _ = lines
    assert first_seen == "" and MARK in first_left and len(first_alive.split()) == 2  # it did leave all that
    assert (second_seen, second_alive) == ("", ""), "the second run found files or processes of the first"
    pids = [int(pid) for pid in (observed / "pids").read_text().split()]
    assert len(pids) == 4 and not [pid for pid in pids if _alive(pid)]
    home = Path(layout.env["HOME"])
    assert sorted(str(path.relative_to(home)) for path in home.rglob("*") if path.stat().st_uid == layout.uid) == [
        str(Path(layout.env["PULUMI_HOME"]).relative_to(home)),
        str(layout.workspace.relative_to(home)),
    ], "nothing the runner owns is left but the two empty folders a run needs"
    assert not list(tmp.iterdir())
    assert (Path(layout.env["PULUMI_HOME"]) / "plugins" / "resource-azure-native").is_dir(), "root's: kept"


def _alive(pid: int) -> bool:
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return "\nState:\tZ" not in status


def test_a_warm_runner_refuses_to_run_as_root(azurite: Azurite, tmp_path: Path) -> None:
    """Its wipe deletes what its user owns: for root, everything the image holds."""
    keep = tmp_path / "kept"
    keep.write_text("root's")
    env = {"PATH": "/usr/bin:/bin", "PYTHONPATH": python_path(), "AzureWebJobsStorage": azurite.connection_string()}

    assert os.geteuid() == 0, "run as root, as this machine's tests are"
    done = subprocess.run(
        [sys.executable, "-m", "runner_job", "serve", "--wipe", str(tmp_path), "--runs", "1"],
        env=env,
        cwd=REPO,
        capture_output=True,
        text=True,
        timeout=SERVE_SECONDS,
        check=False,
    )

    assert done.returncode == 2 and "refuses to run as root" in done.stderr
    assert keep.read_text() == "root's"

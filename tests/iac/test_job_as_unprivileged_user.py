"""The runner job's entrypoint run as the image's unprivileged user, in a folder tree laid out as the image's.

Docker does not run on this machine, so the image itself is never built here.
Instead each test lays out, under a temporary root, what the image holds
(runner_job/Dockerfile, read by tests/iac/test_runner_image.py): the user's
home with its own ``PULUMI_HOME`` and workspace folder, and the self-hosting
program where the factory specification's ``PulumiWorkRoot`` points, owned by
root and read-only. The app's side (storage on Azurite, the launch, reading the
result) runs in this process; ``python -m runner_job once``, the job's command,
runs in a child process as the Dockerfile's uid (``setpriv``, when the tests
run as root; otherwise as the tests' own, already unprivileged, user).

What runs: the embedded runner's plan and apply end to end against Azurite;
the Pulumi runner's plan of the self-hosting program up to the missing CLI;
and, with the Pulumi CLI mocked by a stand-in script on PATH (the CLI cannot be
installed here), the same plan up to the preview, writing the stack file where
the real CLI writes it.
"""

from __future__ import annotations

import json
import os
import shutil
import stat
import subprocess
import sys
import sysconfig
import tempfile
import uuid
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml

from devhost.azurite import TARGET_ACCOUNT, Azurite
from shared.desired_state.api import EnvironmentSpecification
from shared.iac.jobs.protocol import JobKind
from shared.iac.model import ApplyResult, PlanResult, RunnerError
from shared.iac.pulumi.program_copy import VIRTUALENV_VARIABLE, WORKSPACE_VARIABLE
from shared.iac.settings import IaCSettings
from shared.platform.clock import now_iso
from shared.platform.storage.clients import StorageClients, clients_from_connection_string
from shared.platform.storage.resources import ensure_resources
from shared.platform.targets import ProvisioningTarget
from shared.provisioning.configuration import ResolvedConfiguration
from shared.provisioning.runner_jobs import JobTicket, RunnerJobs
from shared.provisioning.runs import Run, RunState, SourceInfo
from tests.iac.conftest import TARGET_SETTING, TargetAccount, specification
from tests.iac.test_runner_image import ACQUISITION_OFF, FACTORY_SPEC, created_user, read_image

REPO = Path(__file__).resolve().parents[2]
TENANT = "connectsoft-factory"
JOB_SECONDS = 180  # a bound on a stuck child, not a timing assertion

# The stand-in for the Pulumi CLI: answers `version`, records where and how each other command ran,
# writes the stack file in its working folder as the real `config set-all` does, and stops at the preview.
STAND_IN_CLI = r"""#!/bin/sh
[ "$1" = version ] && { echo v3.200.0; exit 0; }
args=$(printf '%s ' "$@" | tr '\n\t' '  ')
printf '%s\t%s\t%s\n' "$PWD" "$PULUMI_HOME" "$args" >> "$STAND_IN_LOG"
case " $args " in
  *" config set-all "*)
    stack=$(printf '%s' "$args" | sed -n 's/.*--stack \([^ ]*\).*/\1/p')
    cp Pulumi.yaml "$STAND_IN_LOG.project" && echo "config: {}" > "Pulumi.$stack.yaml" ;;
  *" preview "*) echo "error: the stand-in Pulumi CLI stops before the engine" >&2; exit 1 ;;
esac
exit 0
"""


@dataclass(frozen=True)
class ImageLayout:
    """The image's folders under a temporary root, and the environment the job gets in it."""

    root: Path
    uid: int
    gid: int
    env: dict[str, str]  # the Dockerfile's ENV, its paths moved under ``root``
    work_root: Path  # the factory specification's PulumiWorkRoot
    program: Path  # the self-hosting program copied there (read-only, root's)
    tools: Path  # a PATH folder (root's) for the stand-in CLI

    @property
    def workspace(self) -> Path:
        return Path(self.env[WORKSPACE_VARIABLE])


def _inside(root: Path, path: str) -> str:
    return str(root / PurePosixPath(path).relative_to("/"))


def _read_only(folder: Path) -> None:
    for path in [*folder.rglob("*"), folder]:
        if not path.is_symlink():
            path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _own(path: Path, uid: int, gid: int) -> None:
    if os.geteuid() == 0:
        os.chown(path, uid, gid)


@contextmanager
def image_layout(uid: int | None = None) -> Iterator[ImageLayout]:
    """The image's folders under a temporary root; ``uid``: another runtime user than the Dockerfile's."""
    dockerfile = read_image()
    uid, gid = (uid, uid) if uid is not None else created_user(dockerfile)[:2]
    root = Path(tempfile.mkdtemp(prefix="runner-image-"))
    root.chmod(0o755)  # the system's /: the user may look into it
    env = {key: _inside(root, value) if value.startswith("/") else value for key, value in dockerfile.final.env.items()}
    # The virtualenv the image builds, root's: here only its interpreter's place (no Python runs from it).
    python = Path(env[VIRTUALENV_VARIABLE]) / "bin" / "python"
    python.parent.mkdir(parents=True)
    python.write_text("#!/bin/sh\nexit 1\n")
    python.chmod(0o755)
    for folder in (env["HOME"], env["PULUMI_HOME"], env[WORKSPACE_VARIABLE]):  # made by the user in the image
        Path(folder).mkdir(parents=True, exist_ok=True)
        for made in [Path(folder), *Path(folder).parents]:
            if made == root:
                break
            if made.is_relative_to(env["HOME"]):
                _own(made, uid, gid)
    # The provider plugins, copied in root's and read-only (the Dockerfile's COPY --from=builder).
    provider = Path(env["PULUMI_HOME"]) / "plugins" / "resource-azure-native" / "pulumi-resource-azure-native"
    provider.parent.mkdir(parents=True)
    provider.write_text("#!/bin/sh\nexit 1\n")
    _read_only(provider.parents[1])
    document = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    settings = json.loads(document["pulumi"]["config"]["runtime-cloud-infra:hostSettings"])
    work_root = Path(_inside(root, settings["RuntimeCloud__IaC__PulumiWorkRoot"]))
    program = work_root / document["pulumi"]["work_dir"]
    shutil.copytree(REPO / "infra", program, ignore=shutil.ignore_patterns("__pycache__", "Pulumi.*.yaml"))
    _read_only(work_root)
    tools = root / "usr" / "local" / "bin"
    tools.mkdir(parents=True)
    try:
        yield ImageLayout(root, uid, gid, env, work_root, program, tools)
    finally:
        for path in [*root.rglob("*"), root]:  # the tests' tree only: make it removable again
            if not path.is_symlink() and path.stat().st_uid == os.geteuid():
                path.chmod(path.stat().st_mode | stat.S_IWUSR)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def image() -> Iterator[ImageLayout]:
    with image_layout() as layout:
        yield layout


def _as_runtime_user(layout: ImageLayout) -> list[str]:
    if os.geteuid() != 0:
        return []  # already an unprivileged user
    return ["setpriv", f"--reuid={layout.uid}", f"--regid={layout.gid}", "--clear-groups"]


def _python_path() -> str:
    return os.pathsep.join([str(REPO), sysconfig.get_paths()["purelib"]])


@pytest.fixture
def job_python(image: ImageLayout) -> str:
    return runnable_python(image)


def runnable_python(image: ImageLayout) -> str:
    """An interpreter the runtime user can run, with this repository's packages (checked, never assumed)."""
    version = f"python{sys.version_info.major}.{sys.version_info.minor}"
    tried = []
    for candidate in (sys.executable, shutil.which(version, path="/usr/local/bin:/usr/bin")):
        if candidate is None:
            continue
        probe = subprocess.run(
            [*_as_runtime_user(image), candidate, "-c", "import pydantic, pulumi.automation, azure.storage.blob"],
            env={"PATH": "/usr/bin:/bin", "PYTHONPATH": _python_path(), "HOME": image.env["HOME"]},
            cwd=REPO,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        if probe.returncode == 0:
            return candidate
        tried.append(f"{candidate}: {probe.stderr.strip()[-300:]}")
    pytest.fail("no Python the unprivileged user can run with the repository's packages: " + " | ".join(tried))


@pytest.fixture
def storage(azurite: Azurite) -> Iterator[StorageClients]:
    clients = clients_from_connection_string(azurite.connection_string())
    ensure_resources(clients)  # as the host does at start
    yield clients


@dataclass
class Launcher:
    """The app's side of one run's jobs, and the job's command run as the runtime user."""

    layout: ImageLayout
    python: str
    storage: StorageClients
    azurite: Azurite
    iac: IaCSettings
    run: Run

    @property
    def jobs(self) -> RunnerJobs:
        return RunnerJobs(self.storage, self.iac)

    def launch(
        self, spec: EnvironmentSpecification, target: ProvisioningTarget, kind: JobKind, plan: PlanResult | None
    ) -> JobTicket:
        return self.jobs.launch(self.run, spec, target, kind, 1, plan, ResolvedConfiguration(), lambda: False)

    def run_job(self, path: str | None = None) -> subprocess.CompletedProcess[str]:
        env = {
            **self.layout.env,
            "PATH": path or "/usr/bin:/bin",
            "PYTHONPATH": _python_path(),
            "AzureWebJobsStorage": self.azurite.connection_string(),
            "RuntimeCloud__IaC__JobQueue": self.iac.job_queue,
            TARGET_SETTING: self.azurite.connection_string(TARGET_ACCOUNT),
            "STAND_IN_LOG": str(self.layout.workspace.parent / "stand-in-cli.log"),
        }
        done = subprocess.run(
            [*_as_runtime_user(self.layout), self.python, "-m", "runner_job", "once"],
            env=env,
            cwd=REPO,  # root's, not writable by the user: as /app in the image
            capture_output=True,
            text=True,
            timeout=JOB_SECONDS,
            check=False,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        assert "Permission denied" not in done.stderr and "PermissionError" not in done.stderr, done.stderr[-3000:]
        return done


def _run(tenant: str, environment: str, runner: str) -> Run:
    return Run(
        id=f"run-{uuid.uuid4().hex[:12]}",
        tenant=tenant,
        environment=environment,
        environment_class="production",
        target="t",
        runner=runner,
        state=RunState.PLANNING,
        ordinal=1,
        requested_by="unprivileged-job-test",
        idempotency_key=uuid.uuid4().hex,
        specification_digest="0" * 64,
        source=SourceInfo(kind="inline"),
        created_at=now_iso(),
    )


@pytest.fixture
def launcher(image, job_python, storage, azurite) -> Callable[..., Launcher]:
    def make(run: Run, **settings: Any) -> Launcher:
        iac = IaCSettings(JobQueue=f"jobs-{uuid.uuid4().hex[:10]}", **settings)
        return Launcher(image, job_python, storage, azurite, iac, run)

    return make


def _snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


def _factory_job(launcher: Callable[..., Launcher], image: ImageLayout) -> tuple[Launcher, EnvironmentSpecification]:
    """The self-hosting specification, as the host runs it: its adopted stack, the image's work root."""
    document = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    spec = EnvironmentSpecification.model_validate({**document, "tenant": TENANT})
    adopted = json.dumps({f"{TENANT}/{spec.environment}": spec.pulumi.stack if spec.pulumi else ""})
    run = _run(TENANT, spec.environment, "pulumi")
    return launcher(run, PulumiWorkRoot=str(image.work_root), PulumiAdoptedStacks=adopted), spec


def _factory_target(spec: EnvironmentSpecification) -> ProvisioningTarget:
    document = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    targets = json.loads(document["pulumi"]["config"]["runtime-cloud-infra:targets"])
    return ProvisioningTarget.model_validate(next(t for t in targets if t["Id"] == spec.target))


def test_the_embedded_runner_plans_and_applies_in_jobs_run_as_the_image_s_user(
    launcher: Callable[..., Launcher], target: ProvisioningTarget, account: TargetAccount, image: ImageLayout
) -> None:
    environment = f"env-{uuid.uuid4().hex[:8]}"
    names = {"queue": f"orders-{environment[-8:]}", "container": f"invoices-{environment[-8:]}"}
    spec = specification(
        environment,
        [{"type": "queue", "name": names["queue"]}, {"type": "blob-container", "name": names["container"]}],
    )
    jobs = launcher(_run(spec.tenant, environment, "embedded"))

    planning = jobs.launch(spec, target, JobKind.PLAN, None)
    jobs.run_job()
    plan = jobs.jobs.plan_of(jobs.run, planning)
    applying = jobs.launch(spec, target, JobKind.APPLY, plan)
    jobs.run_job()
    applied = jobs.jobs.apply_of(jobs.run, applying, ApplyResult(runner="embedded", runner_version="", steps=[]))

    assert {change.action.value for change in plan.changes} == {"create"}
    addresses = {f"queue/{names['queue']}", f"blob-container/{names['container']}"}
    assert {step.address for step in applied.steps} == addresses
    assert {step.status.value for step in applied.steps} == {"applied"}
    assert names["queue"] in {queue.name for queue in account.queues.list_queues()}
    assert account.blobs.get_container_client(names["container"]).exists()


def test_the_pulumi_runner_stops_at_the_missing_cli_having_written_nothing_into_the_image_s_program(
    launcher: Callable[..., Launcher], image: ImageLayout
) -> None:
    jobs, spec = _factory_job(launcher, image)
    before = _snapshot(image.work_root)

    ticket = jobs.launch(spec, _factory_target(spec), JobKind.PLAN, None)
    jobs.run_job()  # no pulumi on this PATH (nor on the machine)

    with pytest.raises(RunnerError, match="Pulumi CLI is not on PATH") as failure:
        jobs.jobs.plan_of(jobs.run, ticket)
    assert "ermission" not in str(failure.value)
    assert _snapshot(image.work_root) == before
    assert list(image.workspace.iterdir()) == []


def test_the_pulumi_runner_runs_the_cli_in_its_own_copy_of_the_program_with_the_pulumi_cli_mocked(
    launcher: Callable[..., Launcher], image: ImageLayout
) -> None:
    """The stand-in CLI writes the stack file where it runs, as the user: a read-only folder would refuse it."""
    cli = image.tools / "pulumi"
    cli.write_text(STAND_IN_CLI)
    cli.chmod(0o755)
    jobs, spec = _factory_job(launcher, image)
    before = _snapshot(image.work_root)
    log = image.workspace.parent / "stand-in-cli.log"

    ticket = jobs.launch(spec, _factory_target(spec), JobKind.PLAN, None)
    jobs.run_job(path=f"{image.tools}:/usr/bin:/bin")

    with pytest.raises(RunnerError, match="pulumi preview of stack runtime-cloud-infra/factory failed"):
        jobs.jobs.plan_of(jobs.run, ticket)
    calls = [line.split("\t") for line in log.read_text().splitlines()]
    commands = [command.replace("--non-interactive", "").split()[:2] for _, _, command in calls]
    assert ["config", "set-all"] in commands and commands[-1][0] == "preview"
    for cwd, pulumi_home, _ in calls:
        assert Path(cwd).is_relative_to(image.workspace) and Path(cwd).name == image.program.name
        assert pulumi_home == image.env["PULUMI_HOME"]
    project = yaml.safe_load(Path(f"{log}.project").read_text())
    assert project["name"] == "runtime-cloud-infra"
    assert project["runtime"]["options"] == {"toolchain": "pip", "virtualenv": image.env[VIRTUALENV_VARIABLE]}
    assert _snapshot(image.work_root) == before  # no Pulumi.factory.yaml, no __pycache__
    assert list(image.workspace.iterdir()) == []  # the run's copy is gone
    assert image.env[ACQUISITION_OFF] == "true"

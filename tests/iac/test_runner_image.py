"""The runner job's image, read from runner_job/Dockerfile: the facts it depends on agree with the code.

Docker does not run on this machine, so the image is never built here: these
tests read the Dockerfile's instructions in order (the user each ``RUN`` runs
as, the environment at each point, what is copied where) and compare them with
what the job's code and the deployment expect. What running as that user does
is proven by tests/iac/test_job_as_unprivileged_user.py, which lays a folder
tree out as the image does.
"""

from __future__ import annotations

import json
import re
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

import pytest
import yaml

from shared.iac.pulumi.program_copy import VIRTUALENV_VARIABLE, WORKSPACE_VARIABLE

REPO = Path(__file__).resolve().parents[2]
DOCKERFILE = REPO / "runner_job" / "Dockerfile"
FACTORY_SPEC = REPO / "environments" / "factory" / "host.yaml"
ACQUISITION_OFF = "PULUMI_DISABLE_AUTOMATIC_PLUGIN_ACQUISITION"


@dataclass(frozen=True)
class Step:
    """One instruction, with the stage it is in, the user it runs as and the environment set before it."""

    instruction: str
    arguments: str
    user: str
    env: dict[str, str]
    stage: str  # the ``FROM ... AS <stage>`` it belongs to

    def expand(self, text: str) -> str:
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: self.env.get(m.group(1) or m.group(2), m.group(0)), text)


@dataclass
class Image:
    steps: list[Step] = field(default_factory=list)

    def runs(self, containing: str, stage: str | None = None) -> list[Step]:
        return [
            step
            for step in self.in_stage(stage)
            if step.instruction == "RUN" and containing in step.expand(step.arguments)
        ]

    def in_stage(self, stage: str | None) -> list[Step]:
        return [step for step in self.steps if stage is None or step.stage == stage]

    @property
    def stages(self) -> list[str]:
        return list(dict.fromkeys(step.stage for step in self.steps if step.stage))  # "": global ARGs

    def copies(self, stage: str | None = None) -> dict[str, str]:
        """Where each ``COPY`` source lands (a folder's contents land in the destination); one copied from
        another stage is keyed ``<stage>:<source>``."""
        found: dict[str, str] = {}
        workdir = PurePosixPath("/")
        for step in self.in_stage(stage):
            if step.instruction == "FROM":
                workdir = PurePosixPath("/")
            if step.instruction == "WORKDIR":
                workdir = workdir / step.arguments
            if step.instruction == "COPY":
                words = shlex.split(step.arguments)
                origin = "".join(word.removeprefix("--from=") + ":" for word in words if word.startswith("--from="))
                *sources, destination = [word for word in words if not word.startswith("--")]
                for source in sources:
                    into = destination.endswith("/") and not source.endswith("/")
                    found[origin + source] = str(workdir / destination / (PurePosixPath(source).name if into else ""))
        return found

    @property
    def final(self) -> Step:
        return self.steps[-1]


def read_image() -> Image:
    """The instructions in order; each ``FROM`` starts a stage as root, with no environment."""
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    image, user, env, stage = Image(), "root", dict[str, str](), ""
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arguments = line.partition(" ")
        arguments = arguments.strip()
        if instruction == "FROM":
            user, env, stage = "root", {}, arguments.split()[-1]
        if instruction == "USER":
            user = arguments
        if instruction == "ENV":
            step = Step(instruction, arguments, user, dict(env), stage)
            pairs = (pair.split("=", 1) for pair in shlex.split(arguments))
            env.update((key, step.expand(value)) for key, value in pairs)
        image.steps.append(Step(instruction, arguments, user, dict(env), stage))
    return image


def runtime_stage(image: Image) -> str:
    return image.final.stage


def created_user(image: Image) -> tuple[int, int, str]:
    """The uid, gid and home of the user the Dockerfile makes in the stage the image runs (the builder makes
    the same one: test_the_builder_installs_the_plugins_as_the_runtime_user)."""
    (step,) = image.runs("useradd", runtime_stage(image))
    return _user_made_by(step)


def _user_made_by(step: Step) -> tuple[int, int, str]:
    words = shlex.split(step.arguments)
    after = {word: words[i + 1] for i, word in enumerate(words[:-1]) if word.startswith("--")}
    return int(after["--uid"]), int(after["--gid"]), after["--home-dir"]


def uid_of(user: str, image: Image) -> int:
    """The uid a ``USER`` value names (by number, or the created user's name)."""
    name = user.split(":")[0]
    if name.isdigit():
        return int(name)
    (step,) = image.runs("useradd", runtime_stage(image))
    return created_user(image)[0] if shlex.split(step.arguments)[-1] == name else 0


@pytest.fixture(scope="module")
def image() -> Image:
    return read_image()


def test_the_job_runs_as_the_image_s_own_non_root_user(image: Image) -> None:
    uid, gid, home = created_user(image)

    assert uid != 0 and gid != 0
    assert uid_of(image.final.user, image) == uid and image.final.user == f"{uid}:{gid}"  # numeric: runAsNonRoot
    assert image.final.env["HOME"] == home
    assert not [step for step in image.steps if step.instruction == "COPY" and "--chown" in step.arguments], (
        "the image's code and programs stay root's, read-only to the job"
    )


def test_the_builder_installs_the_plugins_as_the_runtime_user_into_the_pulumi_home_the_job_reads(
    image: Image,
) -> None:
    uid, gid, home = created_user(image)
    (install,) = image.runs("pulumi plugin install")
    (builder_user,) = image.runs("useradd", install.stage)
    pulumi_home = image.final.env["PULUMI_HOME"]

    assert install.stage != runtime_stage(image), "installed in the builder: the network is the builder's only"
    assert _user_made_by(builder_user) == (uid, gid, home)
    assert uid_of(install.user, image) == uid, "installed as root, the plugins land where the job cannot see them"
    assert install.env.get("PULUMI_HOME") == pulumi_home and PurePosixPath(pulumi_home).is_relative_to(home)
    assert f"mkdir -p {pulumi_home}" in install.expand(install.arguments).replace('"', "")
    assert "azure-native" in install.arguments and "--exact" in install.arguments


def test_the_plugins_reach_the_runtime_root_s_and_are_never_downloaded_later(image: Image) -> None:
    uid, _, _ = created_user(image)
    runtime = image.in_stage(runtime_stage(image))
    pulumi_home = image.final.env["PULUMI_HOME"]
    (install,) = image.runs("pulumi plugin install")
    copied = image.copies(runtime_stage(image))
    (made,) = image.runs("mkdir -p", runtime_stage(image))
    (found,) = image.runs("pulumi plugin ls", runtime_stage(image))
    (copy,) = [step for step in runtime if step.instruction == "COPY" and "/plugins/" in step.arguments]

    assert copied[f"{install.stage}:{pulumi_home}/plugins/"] == f"{pulumi_home}/plugins"
    assert "--chown" not in copy.arguments, "root's: no run can change the provider the next one runs"
    assert f"mkdir -p {pulumi_home}" in made.expand(made.arguments).replace('"', "")
    assert runtime.index(made) < runtime.index(copy) and uid_of(made.user, image) == uid  # PULUMI_HOME the user's
    assert ACQUISITION_OFF not in install.env  # off only after the build installed what it needs
    assert image.final.env[ACQUISITION_OFF] == "true" and found.env[ACQUISITION_OFF] == "true"
    assert uid_of(found.user, image) == uid and runtime.index(copy) < runtime.index(found)  # found as the job will


def test_the_workspace_the_code_copies_programs_into_is_the_user_s_own_folder(image: Image) -> None:
    uid, _, home = created_user(image)
    workspace = image.final.env[WORKSPACE_VARIABLE]
    (made,) = image.runs("mkdir -p", runtime_stage(image))

    assert PurePosixPath(workspace).is_absolute() and PurePosixPath(workspace).is_relative_to(home)
    assert workspace in made.expand(made.arguments) and uid_of(made.user, image) == uid


def test_the_programs_virtualenv_is_built_at_build_time_from_infra_requirements(image: Image) -> None:
    virtualenv = image.final.env[VIRTUALENV_VARIABLE]
    (built,) = image.runs(f'-m venv "{virtualenv}"')
    command = built.expand(built.arguments)
    builder = image.copies(built.stage)

    assert PurePosixPath(virtualenv).is_absolute() and built.stage != runtime_stage(image)
    assert f'"{virtualenv}/bin/pip" install --no-cache-dir -r infra/requirements.txt' in command
    # infra/requirements.txt's -c ../constraints.txt reads the constraints copied beside infra/.
    requirements = PurePosixPath(builder["infra/requirements.txt"])
    assert str(requirements.parent.parent / "constraints.txt") == builder["constraints.txt"]
    assert image.copies(runtime_stage(image))[f"{built.stage}:{virtualenv}/"] == virtualenv  # same path: it runs
    (install,) = image.runs("pulumi plugin install")
    assert f"{virtualenv}/bin/pip" in install.expand(install.arguments)  # the provider's version is the SDK's


def test_the_job_s_own_virtualenv_is_built_in_the_builder_and_first_on_the_runtime_s_path(image: Image) -> None:
    (built,) = image.runs("-r requirements.txt")
    virtualenv = built.env["RUNNER_VIRTUALENV"]

    assert f'python -m venv "{virtualenv}"' in built.expand(built.arguments)
    assert image.copies(runtime_stage(image))[f"{built.stage}:{virtualenv}/"] == virtualenv
    assert image.final.env["PATH"].split(":")[0] == f"{virtualenv}/bin", "the CMD's python is the job's virtualenv"


# What building needs and running does not: none of it may reach the stage the image runs.
BUILD_TOOLS = ("apt-get", "build-essential", "gcc", "curl", "wget", "git", "pip install", "pip3 install")


def test_the_image_is_multi_stage_with_no_build_tools_apt_lists_or_pip_caches_in_the_runtime(image: Image) -> None:
    runtime = runtime_stage(image)
    run_in_runtime = " ".join(step.expand(step.arguments) for step in image.runs("", runtime))
    builder_runs = image.runs("", image.stages[0])
    (base,) = [step for step in image.in_stage(runtime) if step.instruction == "FROM"]

    assert len(image.stages) == 2 and image.stages[0] != runtime
    assert not [tool for tool in BUILD_TOOLS if re.search(rf"(^|[\s/]){re.escape(tool)}\b", run_in_runtime)]
    origins = {word for step in image.in_stage(runtime) for word in step.arguments.split() if word.startswith("--from")}
    assert origins == {f"--from={image.stages[0]}"}, "only what the builder made comes from another stage"
    assert "slim" in base.arguments or ("${PYTHON_IMAGE}" in base.arguments and "slim" in _argument("PYTHON_IMAGE"))
    for step in builder_runs:
        command = step.expand(step.arguments)
        assert len(re.findall(r'pip"? install', command)) == command.count("--no-cache-dir"), command
        assert "apt-get install" not in command or "rm -rf /var/lib/apt/lists/*" in command, command


def _argument(name: str) -> str:
    """A global ``ARG``'s default."""
    (line,) = [line for line in DOCKERFILE.read_text(encoding="utf-8").splitlines() if line.startswith(f"ARG {name}=")]
    return line.split("=", 1)[1]


def test_the_build_reports_the_image_s_size(image: Image) -> None:
    (sized,) = image.runs("du -sh", runtime_stage(image))
    command = sized.expand(sized.arguments)
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")

    for carried in ("/opt/runner-venv", "/opt/pulumi-program-venv", "/opt/pulumi/bin", "/plugins", "/app"):
        assert carried in command
    assert "runner-image:" in makefile and "docker image ls" in makefile and "runner_job/Dockerfile" in makefile


def test_infra_requirements_pin_what_the_repository_pins() -> None:
    def pins(name: str) -> dict[str, str]:
        lines = (REPO / name).read_text(encoding="utf-8").splitlines()
        return dict(line.split("==", 1) for line in lines if "==" in line and not line.startswith("#"))

    program = pins("infra/requirements.txt")
    lines = (REPO / "infra" / "requirements.txt").read_text(encoding="utf-8").splitlines()

    assert program == {
        "pulumi": pins("requirements.txt")["pulumi"],
        "pulumi-azure-native": pins("requirements-infra.txt")["pulumi-azure-native"],
    }
    assert program.items() <= pins("constraints.txt").items()
    assert "-c ../constraints.txt" in lines and (REPO / "infra" / "../constraints.txt").is_file()


def test_the_self_hosting_program_is_copied_where_the_factory_specification_points_the_runner(image: Image) -> None:
    document = yaml.safe_load(FACTORY_SPEC.read_text(encoding="utf-8"))
    host_settings = json.loads(document["pulumi"]["config"]["runtime-cloud-infra:hostSettings"])
    program = PurePosixPath(host_settings["RuntimeCloud__IaC__PulumiWorkRoot"]) / document["pulumi"]["work_dir"]

    copied = image.copies(runtime_stage(image))
    assert copied["infra/"] == str(program)
    assert (REPO / "infra" / "requirements.txt").is_file()
    assert copied["shared/"] == "/app/shared" and copied["runner_job/"] == "/app/runner_job"


def test_the_image_s_command_is_the_one_the_deployment_gives_the_job(image: Image) -> None:
    infra = str(REPO / "infra")
    if infra not in sys.path:
        sys.path.insert(0, infra)
    from runtime_cloud_infra.runner_job import COMMAND

    (command,) = [step for step in image.steps if step.instruction == "CMD"]

    assert json.loads(command.arguments) == COMMAND
    assert image.final.env.get("PYTHONUNBUFFERED") == "1"


def test_every_top_level_package_the_job_imports_is_copied_into_the_image(image: Image) -> None:
    # The job runs `python -m runner_job` from /app: shared/ imports storage_protocol/ (the table batch).
    for package in ("runner_job", "shared", "storage_protocol"):
        assert image.copies(runtime_stage(image))[f"{package}/"] == f"/app/{package}"


def test_the_warm_runners_wipe_the_image_s_home_and_temp_and_know_the_job_s_timeout(image: Image) -> None:
    infra = str(REPO / "infra")
    if infra not in sys.path:
        sys.path.insert(0, infra)
    from runtime_cloud_infra.warm_runners import SERVE_COMMAND, TIMEOUT_VARIABLE

    from runner_job.serve import TIMEOUT_VARIABLE as READ_BY_SERVE

    wiped = [PurePosixPath(SERVE_COMMAND[i + 1]) for i, word in enumerate(SERVE_COMMAND) if word == "--wipe"]
    written = [image.final.env["HOME"], image.final.env["PULUMI_HOME"], image.final.env[WORKSPACE_VARIABLE]]

    assert all(any(PurePosixPath(path).is_relative_to(folder) for folder in wiped) for path in written)
    assert {PurePosixPath("/tmp"), PurePosixPath("/dev/shm")} <= set(wiped) and "--reap-user" in SERVE_COMMAND
    assert TIMEOUT_VARIABLE == READ_BY_SERVE

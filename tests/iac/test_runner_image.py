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
    """One instruction, with the user it runs as and the environment set before it."""

    instruction: str
    arguments: str
    user: str
    env: dict[str, str]

    def expand(self, text: str) -> str:
        return re.sub(r"\$\{(\w+)\}|\$(\w+)", lambda m: self.env.get(m.group(1) or m.group(2), m.group(0)), text)


@dataclass
class Image:
    steps: list[Step] = field(default_factory=list)

    def runs(self, containing: str) -> list[Step]:
        return [step for step in self.steps if step.instruction == "RUN" and containing in step.expand(step.arguments)]

    def copies(self) -> dict[str, str]:
        """Where each ``COPY`` source lands in the image (a folder's contents land in the destination)."""
        found: dict[str, str] = {}
        workdir = PurePosixPath("/")
        for step in self.steps:
            if step.instruction == "WORKDIR":
                workdir = workdir / step.arguments
            if step.instruction == "COPY":
                *sources, destination = shlex.split(step.arguments)
                for source in sources:
                    into = destination.endswith("/") and not source.endswith("/")
                    found[source] = str(workdir / destination / (PurePosixPath(source).name if into else ""))
        return found

    @property
    def final(self) -> Step:
        return self.steps[-1]


def read_image() -> Image:
    text = re.sub(r"\\\n", " ", DOCKERFILE.read_text(encoding="utf-8"))
    image, user, env = Image(), "root", dict[str, str]()
    for line in text.splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        instruction, _, arguments = line.partition(" ")
        arguments = arguments.strip()
        if instruction == "USER":
            user = arguments
        if instruction == "ENV":
            step = Step(instruction, arguments, user, dict(env))
            pairs = (pair.split("=", 1) for pair in shlex.split(arguments))
            env.update((key, step.expand(value)) for key, value in pairs)
        image.steps.append(Step(instruction, arguments, user, dict(env)))
    return image


def created_user(image: Image) -> tuple[int, int, str]:
    """The uid, gid and home of the user the Dockerfile makes."""
    (step,) = image.runs("useradd")
    words = shlex.split(step.arguments)
    after = {word: words[i + 1] for i, word in enumerate(words[:-1]) if word.startswith("--")}
    return int(after["--uid"]), int(after["--gid"]), after["--home-dir"]


def uid_of(user: str, image: Image) -> int:
    """The uid a ``USER`` value names (by number, or the created user's name)."""
    name = user.split(":")[0]
    if name.isdigit():
        return int(name)
    (step,) = image.runs("useradd")
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


def test_plugins_are_installed_by_that_user_into_its_own_pulumi_home_and_never_downloaded_later(image: Image) -> None:
    uid, _, home = created_user(image)
    (install,) = image.runs("pulumi plugin install")
    pulumi_home = image.final.env["PULUMI_HOME"]

    assert uid_of(install.user, image) == uid, "installed as root, the plugins land where the job cannot see them"
    assert install.env.get("PULUMI_HOME") == pulumi_home and PurePosixPath(pulumi_home).is_relative_to(home)
    assert f"mkdir -p {pulumi_home}" in install.expand(install.arguments).replace('"', "")
    assert "azure-native" in install.arguments and "--exact" in install.arguments
    assert image.final.env[ACQUISITION_OFF] == "true"
    assert ACQUISITION_OFF not in install.env  # off only after the build installed what it needs


def test_the_workspace_the_code_copies_programs_into_is_the_user_s_own_folder(image: Image) -> None:
    uid, _, home = created_user(image)
    workspace = image.final.env[WORKSPACE_VARIABLE]
    (made,) = image.runs("mkdir -p")

    assert PurePosixPath(workspace).is_absolute() and PurePosixPath(workspace).is_relative_to(home)
    assert workspace in made.expand(made.arguments) and uid_of(made.user, image) == uid


def test_the_programs_virtualenv_is_built_at_build_time_from_infra_requirements(image: Image) -> None:
    virtualenv = image.final.env[VIRTUALENV_VARIABLE]
    (built,) = image.runs("-m venv")
    command = built.expand(built.arguments)

    assert PurePosixPath(virtualenv).is_absolute()
    assert f'python -m venv "{virtualenv}"' in command
    assert f'"{virtualenv}/bin/pip" install --no-cache-dir -r infra/requirements.txt' in command
    assert image.copies()["infra/requirements.txt"] == "/app/infra/requirements.txt"
    assert (
        image.copies()["constraints.txt"] == "/app/constraints.txt"
    )  # what infra/requirements.txt's -c ../constraints.txt reads
    (install,) = image.runs("pulumi plugin install")
    assert f"{virtualenv}/bin/pip" in install.expand(install.arguments)  # the provider's version is the SDK's


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

    assert image.copies()["infra/"] == str(program)
    assert (REPO / "infra" / "requirements.txt").is_file()
    assert image.copies()["shared/"] == "/app/shared" and image.copies()["runner_job/"] == "/app/runner_job"


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
        assert image.copies()[f"{package}/"] == f"/app/{package}"

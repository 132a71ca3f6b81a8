"""A run's copy of a Pulumi program: where it is made, what its Pulumi.yaml names, that it goes away."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import yaml

from shared.iac.pulumi.program_copy import (
    VIRTUALENV_VARIABLE,
    WORKSPACE_VARIABLE,
    VirtualenvMissing,
    program_copy,
)
from shared.iac.pulumi.workspace import ProgramLocation

REPO = Path(__file__).resolve().parents[2]


def location_of(folder: Path, project: str = "shop") -> ProgramLocation:
    return ProgramLocation(work_root=folder.parent, program_dir=folder, project=project, stack="tenant-a.prod")


def read_only(folder: Path) -> None:
    for path in sorted(folder.rglob("*"), reverse=True) + [folder]:
        path.chmod(path.stat().st_mode & ~(stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def snapshot(folder: Path) -> dict[str, bytes]:
    return {str(path.relative_to(folder)): path.read_bytes() for path in folder.rglob("*") if path.is_file()}


@pytest.fixture
def workspace(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "workspaces"
    monkeypatch.setenv(WORKSPACE_VARIABLE, str(root))
    monkeypatch.delenv(VIRTUALENV_VARIABLE, raising=False)
    return root


def test_the_copy_is_writable_in_the_workspace_and_removed_after_the_run(tmp_path: Path, workspace: Path) -> None:
    program = tmp_path / "checkout" / "shop"
    (program / "lib").mkdir(parents=True)
    (program / "Pulumi.yaml").write_text("name: shop\nruntime: yaml\n")
    (program / "lib" / "module.py").write_text("VALUE = 1\n")
    (program / "__pycache__").mkdir()
    read_only(program)
    before = snapshot(program)

    with program_copy(location_of(program)) as copy:
        assert copy.program_dir.is_relative_to(workspace) and copy.project == "shop"
        (copy.program_dir / "Pulumi.tenant-a.prod.yaml").write_text("config: {}\n")  # what set_all_config does
        (copy.program_dir / "lib" / "__pycache__").mkdir()  # what Python does
        assert (copy.program_dir / "lib" / "module.py").read_text() == "VALUE = 1\n"
        assert not (copy.program_dir / "__pycache__").exists()
        made = copy.work_root
    assert not made.exists()
    assert snapshot(program) == before and not (program / "Pulumi.tenant-a.prod.yaml").exists()


def test_the_image_s_virtualenv_is_named_in_the_copy_with_pip_as_its_toolchain(
    tmp_path: Path, workspace: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    built = tmp_path / "opt" / "pulumi-program-venv"
    (built / "bin").mkdir(parents=True)
    (built / "bin" / "python").touch(mode=0o755)
    monkeypatch.setenv(VIRTUALENV_VARIABLE, str(built))
    program = tmp_path / "checkout" / "infra"
    program.mkdir(parents=True)
    (program / "Pulumi.yaml").write_text((REPO / "infra" / "Pulumi.yaml").read_text())

    with program_copy(location_of(program, "runtime-cloud-infra")) as copy:
        project = yaml.safe_load((copy.program_dir / "Pulumi.yaml").read_text())

    assert project["name"] == "runtime-cloud-infra"
    assert project["runtime"] == {"name": "python", "options": {"toolchain": "pip", "virtualenv": str(built)}}


def test_without_the_image_s_virtualenv_the_project_s_own_is_resolved_from_its_folder(workspace: Path) -> None:
    """infra/'s ``../.venv`` is the repository's venv, as ``make deploy`` uses it (``make setup`` built it)."""
    with program_copy(location_of(REPO / "infra", "runtime-cloud-infra")) as copy:
        project = yaml.safe_load((copy.program_dir / "Pulumi.yaml").read_text())
        assert (copy.program_dir / "runtime_cloud_infra" / "stack.py").is_file()

    assert project["runtime"]["options"]["virtualenv"] == str(REPO / ".venv")


def test_a_named_virtualenv_that_does_not_exist_is_refused_before_pulumi_would_create_it(
    tmp_path: Path, workspace: Path
) -> None:
    program = tmp_path / "checkout" / "shop"
    program.mkdir(parents=True)
    (program / "Pulumi.yaml").write_text("name: shop\nruntime:\n  name: python\n  options:\n    virtualenv: venv\n")

    with pytest.raises(VirtualenvMissing, match=str(program / "venv")), program_copy(location_of(program)):
        pass

    assert list(workspace.iterdir()) == []  # the copy went with the refusal


def test_a_json_project_stays_json_and_linked_files_are_copied_as_they_read(tmp_path: Path, workspace: Path) -> None:
    shared = tmp_path / "checkout" / "common.py"
    program = tmp_path / "checkout" / "shop"
    program.mkdir(parents=True)
    shared.write_text("NAME = 'common'\n")
    (program / "common.py").symlink_to("../common.py")
    (program / "Pulumi.json").write_text(
        '{"name": "shop", "runtime": {"name": "python", "options": {"virtualenv": "v"}}}'
    )
    (program / "v" / "bin").mkdir(parents=True)
    (program / "v" / "bin" / "python").touch(mode=0o755)

    with program_copy(location_of(program)) as copy:
        project = json.loads((copy.program_dir / "Pulumi.json").read_text())
        linked = copy.program_dir / "common.py"
        assert not linked.is_symlink() and linked.read_text() == "NAME = 'common'\n"
        assert not (copy.program_dir / "v").exists()  # the virtualenv is named, not copied

    assert project["runtime"]["options"] == {"virtualenv": str(program / "v"), "toolchain": "pip"}

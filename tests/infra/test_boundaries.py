"""infra/ is development and operations only: the app never imports it, never ships it, never installs it."""

from __future__ import annotations

import ast
import re
from pathlib import Path

from tests.infra.conftest import REPO

APP_SOURCES = ("function_app.py", "functions", "orchestrations", "shared")
INFRA_MODULES = {"runtime_cloud_infra", "pulumi_azure_native", "infra", "stack_config"}


def _python_files() -> list[Path]:
    files = []
    for source in APP_SOURCES:
        path = REPO / source
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return files


def _imported_roots(path: Path) -> set[str]:
    roots = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            roots.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            roots.add(node.module.split(".")[0])
    return roots


def test_the_app_never_imports_the_infrastructure_program() -> None:
    offenders = {
        str(path.relative_to(REPO)): sorted(_imported_roots(path) & INFRA_MODULES)
        for path in _python_files()
        if _imported_roots(path) & INFRA_MODULES
    }

    assert not offenders


def _requirement_names(name: str) -> list[str]:
    lines = (REPO / name).read_text(encoding="utf-8").splitlines()
    return [line.split("==")[0].strip().lower() for line in lines if line.strip() and not line.startswith(("#", "-"))]


def test_pulumi_azure_native_installs_for_development_only_and_is_pinned() -> None:
    infra_pin = next(
        line
        for line in (REPO / "requirements-infra.txt").read_text(encoding="utf-8").splitlines()
        if line.startswith("pulumi-azure-native==")
    )

    assert "pulumi-azure-native" not in _requirement_names("requirements.txt"), "the function app must not ship it"
    assert "-r requirements-infra.txt" in (REPO / "requirements-dev.txt").read_text(encoding="utf-8").splitlines()
    assert infra_pin in (REPO / "constraints.txt").read_text(encoding="utf-8").splitlines()


def test_the_deployment_zip_leaves_infra_and_environments_out() -> None:
    from tools.package import load_ignore_spec

    spec = load_ignore_spec(REPO)

    for path in (
        "infra/",
        "infra/__main__.py",
        "infra/Pulumi.dev.yaml",
        "environments/",
        "environments/factory/host.yaml",
    ):
        assert spec.match_file(path), f".funcignore lets {path} into the package"


def test_make_deploy_checks_for_the_pulumi_cli() -> None:
    makefile = (REPO / "Makefile").read_text(encoding="utf-8")
    target = re.search(r"^deploy:.*?(?=^\S|\Z)", makefile, re.S | re.M)

    assert target, "Makefile has no deploy target"
    assert "command -v pulumi" in target.group(0)

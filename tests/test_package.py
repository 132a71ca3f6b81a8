"""The deployment zip (`make package`): the app and only the app.

The zip is what a Flex Consumption deployment uploads; Azure's remote build
installs its requirements.txt. These tests open the zip `make package` writes
and check what is in it, that `func azure functionapp publish` would pick the
same files from .funcignore, that the app needs no package the remote build
does not install, and that the pinned grpcio/protobuf satisfy the Pulumi SDK.
No Azurite and no host are started.
"""

from __future__ import annotations

import ast
import json
import os
import re
import subprocess
import sys
import tomllib
import zipfile
from collections.abc import Iterable, Iterator
from importlib import metadata
from pathlib import Path, PurePosixPath

import pytest
from packaging.markers import default_environment
from packaging.requirements import Requirement
from packaging.specifiers import SpecifierSet
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO = Path(__file__).resolve().parents[1]

# The top level of the zip, exactly. A new top-level file or folder fails
# test_top_level_is_exactly_the_app on purpose: add it to .funcignore, or here
# if Azure needs it.
APP_ROOT = {
    "function_app.py",
    "host.json",
    "requirements.txt",
    "constraints.txt",
    "functions",
    "orchestrations",
    "shared",
    "storage_protocol",  # the storage protocol the app shares with the local host (its table batch, client options)
    "policies",  # the sample policy bundle tree: RuntimeCloud__Policy__Directory=policies reads it in Azure
}
APP_PACKAGES = ("functions", "orchestrations", "shared", "storage_protocol")
# The app's own top-level modules: imports of these are not third-party.
APP_MODULES = {"function_app", *APP_PACKAGES}

FORBIDDEN_PREFIXES = (
    "tests/",
    "devhost/",
    "bench/",
    "tools/",
    "dist/",
    ".data/",
    "node_modules/",
    ".venv/",
    ".git/",
    ".ci/",
    ".python_packages/",
)

# Packages requirements-dev.txt lists that the deployed app gets all the same,
# because a runtime package requires them; anything else it lists must stay
# off Azure.
DEPLOYED_ANYWAY = {
    "aiohttp": "azure-functions-durable requires it",
    # The operator CLI's (requirements-dev.txt); common-expression-language requires them on Azure too.
    "typer": "common-expression-language requires it",
    "rich": "common-expression-language requires it",
}


@pytest.fixture(scope="module")
def package(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The zip `make package` writes (into a temporary folder, not dist/)."""
    output = tmp_path_factory.mktemp("package") / "runtime-cloud-host.zip"
    run(["make", "--no-print-directory", "package", f"PACKAGE={output}"])
    return output


@pytest.fixture(scope="module")
def names(package: Path) -> list[str]:
    with zipfile.ZipFile(package) as archive:
        return archive.namelist()


def run(command: list[str]) -> None:
    # SOURCE_DATE_EPOCH would change the zip's timestamps; the tests expect the default.
    environment = {key: value for key, value in os.environ.items() if key != "SOURCE_DATE_EPOCH"}
    result = subprocess.run(
        command, cwd=REPO, env=environment, capture_output=True, text=True, timeout=300, check=False
    )
    assert result.returncode == 0, f"{' '.join(command)} failed:\n{result.stdout}\n{result.stderr}"


def read_from_zip(package: Path, name: str) -> str:
    with zipfile.ZipFile(package) as archive:
        return archive.read(name).decode("utf-8")


# -- what is in the zip -------------------------------------------------------------


def test_the_app_is_at_the_zip_root(package: Path, names: list[str]) -> None:
    for required in ("function_app.py", "host.json", "requirements.txt"):
        assert required in names
    host = json.loads(read_from_zip(package, "host.json"))
    assert host["version"] == "2.0"
    # Every module of the app's packages is there, not just some.
    expected = {
        path.relative_to(REPO).as_posix()
        for package_name in APP_PACKAGES
        for path in (REPO / package_name).rglob("*.py")
        if "__pycache__" not in path.parts
    }
    assert expected, "the app's packages hold no module"
    assert sorted(expected - set(names)) == []
    for package_name in APP_PACKAGES:
        assert f"{package_name}/__init__.py" in names


def test_top_level_is_exactly_the_app(names: list[str]) -> None:
    top_level = {PurePosixPath(name).parts[0] for name in names}
    assert top_level == APP_ROOT, (
        "the zip's top level changed: put a new development file in .funcignore, "
        "or add it to APP_ROOT if Azure needs it"
    )


def test_nothing_for_development_is_shipped(names: list[str]) -> None:
    for name in names:
        path = PurePosixPath(name)
        assert not name.startswith(FORBIDDEN_PREFIXES), name
        assert not path.name.startswith("local.settings"), name
        assert "__pycache__" not in path.parts and path.suffix != ".pyc", name
        assert not any(part.startswith(".") for part in path.parts), name


def test_requirements_refer_only_to_files_in_the_zip(package: Path, names: list[str]) -> None:
    """The remote build runs `pip install -r requirements.txt` in the unpacked zip."""
    for line in requirement_lines(read_from_zip(package, "requirements.txt")):
        option, _, argument = line.partition(" ")
        if option in ("-r", "--requirement", "-c", "--constraint"):
            assert argument.strip() in names, f"requirements.txt refers to {argument!r}, not in the zip"
        else:
            assert not line.startswith("-"), f"option the remote build should not get: {line}"
            requirement = Requirement(line)
            assert requirement.url is None, f"{line}: the remote build installs from PyPI only"


def test_zip_is_reproducible(package: Path, tmp_path: Path) -> None:
    again = tmp_path / "again.zip"
    run([sys.executable, "tools/package.py", "--output", str(again)])
    assert again.read_bytes() == package.read_bytes()
    with zipfile.ZipFile(package) as archive:
        entries = archive.infolist()
    assert [entry.filename for entry in entries] == sorted(entry.filename for entry in entries)
    assert {entry.date_time for entry in entries} == {(1980, 1, 1, 0, 0, 0)}
    assert {entry.external_attr >> 16 for entry in entries} == {0o100644}


# -- func azure functionapp publish reads .funcignore the same way ------------------


class CoreToolsIgnore:
    """Core Tools' reading of .funcignore (its GitIgnoreParser, ported).

    Each pattern becomes a regular expression anchored at the start of the path
    from the app root but not at its end (so it matches prefixes), with `**` as
    `.+`, `*` as `[^/]+` and every other special character literal. A path is
    published when a `!` pattern matches it or no other pattern does.
    """

    def __init__(self, text: str) -> None:
        positive: list[str] = []
        negative: list[str] = []
        for line in (raw.strip() for raw in text.split("\n")):
            if not line or line.startswith("#"):
                continue
            target = negative if line.startswith("!") else positive
            line = line.removeprefix("!").removeprefix("/")
            target.append(self._pattern(line))
        self.positive = self._compile(sorted(positive))
        self.negative = self._compile(sorted(negative))

    @staticmethod
    def _pattern(line: str) -> str:
        escaped = re.sub(r"[\-\[\]/{}()+?.\\^$|]", lambda match: "\\" + match.group(0), line)
        return escaped.replace("**", "(.+)").replace("*", "([^\\/]+)")

    @staticmethod
    def _compile(patterns: list[str]) -> re.Pattern[str]:
        if not patterns:
            return re.compile("$^")
        return re.compile("^((" + ")|(".join(patterns) + "))")

    def accepts(self, path: str) -> bool:
        return bool(self.negative.match(path)) or not self.positive.match(path)


# Core Tools skips these whatever .funcignore says (FileSystemHelpers.GetLocalFiles).
CORE_TOOLS_SKIPPED_DIRECTORIES = {".git", ".vscode"}
CORE_TOOLS_SKIPPED_FILES = {".funcignore", ".gitignore", "appsettings.json", "local.settings.json", "project.lock.json"}


def core_tools_selection(root: Path, ignore: CoreToolsIgnore) -> Iterator[str]:
    for current, dirnames, filenames in os.walk(root):
        base = Path(current).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        # Without `!` patterns, a directory whose path a pattern matches as a
        # prefix has every file under it matched too: no need to walk it.
        dirnames[:] = [
            name
            for name in dirnames
            if name not in CORE_TOOLS_SKIPPED_DIRECTORIES and ignore.accepts(prefix + name + "/")
        ]
        for name in filenames:
            if name not in CORE_TOOLS_SKIPPED_FILES and ignore.accepts(prefix + name):
                yield prefix + name


def test_funcignore_uses_only_what_both_readers_agree_on() -> None:
    for line in (REPO / ".funcignore").read_text(encoding="utf-8").splitlines():
        line = line.strip()
        if not line or line.startswith("#"):
            continue
        # Core Tools applies `!` wherever it stands and takes `[`, `]` and `?` literally.
        assert not line.startswith("!"), f".funcignore: {line}"
        assert not set(line) & set("[]?"), f".funcignore: {line}"


def test_core_tools_would_publish_the_same_files(names: list[str]) -> None:
    ignore = CoreToolsIgnore((REPO / ".funcignore").read_text(encoding="utf-8"))
    published = set(core_tools_selection(REPO, ignore))
    # make package writes its zip into dist/, which both leave out.
    assert sorted(published - set(names)) == [], "func publish would ship these, make package does not"
    assert sorted(set(names) - published) == [], "make package ships these, func publish would not"


def test_core_tools_port_reads_patterns_as_core_tools_does() -> None:
    ignore = CoreToolsIgnore("/tests/\n/.*\n__pycache__/\n**/__pycache__/\n/local.settings*.json\n")
    assert not ignore.accepts("tests/test_x.py")
    assert ignore.accepts("tests_extra.py")
    assert not ignore.accepts(".data/auth/key.pem")
    assert not ignore.accepts("shared/__pycache__/a.cpython-311.pyc")
    assert not ignore.accepts("__pycache__/a.pyc")
    assert ignore.accepts("shared/wiring/settings.py")
    # `*` never matches an empty string there: local.settings.json needs its own line.
    assert ignore.accepts("local.settings.json")
    assert not ignore.accepts("local.settings.ci.json")


# -- the deployed requirements ----------------------------------------------------------


def requirement_lines(text: str) -> Iterator[str]:
    for raw in text.splitlines():
        line = raw.split(" #", 1)[0].strip()
        if line and not line.startswith("#"):
            yield line


def requirements_in(text: str) -> list[Requirement]:
    return [Requirement(line) for line in requirement_lines(text) if not line.startswith("-")]


def dependency_closure(requirements: Iterable[Requirement]) -> dict[str, str]:
    """Installed distributions `requirements` pull in, by name -> the name that pulled it.

    Markers are evaluated for this interpreter (Python 3.11 on Linux, as on Azure),
    extras as requested.
    """
    pulled_by: dict[str, str] = {}
    pending = [(requirement, "requirements.txt") for requirement in requirements]
    while pending:
        requirement, parent = pending.pop()
        name = canonicalize_name(requirement.name)
        if name in pulled_by:
            continue
        pulled_by[name] = parent
        for line in metadata.distribution(requirement.name).requires or []:
            dependency = Requirement(line)
            extras = requirement.extras or {""}
            if dependency.marker is None or any(
                dependency.marker.evaluate({**default_environment(), "extra": extra}) for extra in extras
            ):
                pending.append((dependency, name))
    return pulled_by


@pytest.fixture(scope="module")
def deployed(package: Path) -> dict[str, str]:
    """What the remote build installs (as pinned here), name -> the name that pulled it."""
    return dependency_closure(requirements_in(read_from_zip(package, "requirements.txt")))


def dev_only_requirements() -> list[Requirement]:
    """The lines requirements-dev.txt adds to requirements.txt."""
    return requirements_in((REPO / "requirements-dev.txt").read_text(encoding="utf-8"))


def test_requirements_name_no_development_package(package: Path) -> None:
    deployed_names = {canonicalize_name(r.name) for r in requirements_in(read_from_zip(package, "requirements.txt"))}
    development = {canonicalize_name(r.name) for r in dev_only_requirements()}
    assert deployed_names & development == set()


def test_development_packages_are_not_pulled_in(deployed: dict[str, str]) -> None:
    for requirement in dev_only_requirements():
        name = canonicalize_name(requirement.name)
        if name in DEPLOYED_ANYWAY:
            assert name in deployed, f"{name} is no longer deployed: drop it from DEPLOYED_ANYWAY"
            continue
        assert name not in deployed, f"{name} (requirements-dev.txt) is deployed: {deployed[name]} pulls it in"


def distribution_index() -> dict[str, str]:
    """Installed file path (relative to site-packages) -> the distribution that installed it."""
    index: dict[str, str] = {}
    for distribution in metadata.distributions():
        for file in distribution.files or []:
            index.setdefault(PurePosixPath(str(file)).as_posix(), canonicalize_name(distribution.metadata["Name"]))
    return index


def distribution_of(module: str, index: dict[str, str]) -> str | None:
    """The distribution that provides `module` (or the nearest package above it)."""
    parts = module.split(".")
    while parts:
        stem = "/".join(parts)
        for candidate in (f"{stem}/__init__.py", f"{stem}.py"):
            if candidate in index:
                return index[candidate]
        parts.pop()
    return None


def imported_modules(source: str) -> Iterator[str]:
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            yield from (alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            # ``from opentelemetry import trace``: a namespace package is provided by what its children are
            yield from (f"{node.module}.{alias.name}" for alias in node.names)


def test_the_app_imports_only_deployed_packages(package: Path, names: list[str], deployed: dict[str, str]) -> None:
    """A package installed here only by requirements-dev.txt would be missing on Azure."""
    index = distribution_index()
    missing: list[str] = []
    for name in (name for name in names if name.endswith(".py")):
        for module in imported_modules(read_from_zip(package, name)):
            top = module.split(".")[0]
            if top in sys.stdlib_module_names or top in APP_MODULES:
                continue
            provider = distribution_of(module, index)
            if provider is None or provider not in deployed:
                missing.append(f"{name}: {module} ({provider or 'no installed distribution'})")
    assert missing == []


# -- the Azure Functions worker's grpcio/protobuf vs the Pulumi SDK's ---------------------

GRPC_PACKAGES = ("grpcio", "protobuf")


def test_pinned_grpcio_and_protobuf_satisfy_pulumi_and_everything_else(deployed: dict[str, str]) -> None:
    """Pulumi's SDK (and the OpenTelemetry and googleapis packages it brings)
    bound grpcio and protobuf; the pins of constraints.txt must meet every bound."""
    pins = {
        canonicalize_name(r.name): r.specifier
        for r in requirements_in((REPO / "constraints.txt").read_text(encoding="utf-8"))
    }
    installed = {name: Version(metadata.version(name)) for name in GRPC_PACKAGES}
    for name in GRPC_PACKAGES:
        assert name in deployed, f"{name} is no longer deployed"
        assert installed[name] in pins[name], f"installed {name} {installed[name]} is not the pinned {pins[name]}"

    bounded_by: dict[str, list[str]] = {name: [] for name in GRPC_PACKAGES}
    for requirer in sorted(deployed):
        for line in metadata.distribution(requirer).requires or []:
            requirement = Requirement(line)
            name = canonicalize_name(requirement.name)
            if name not in GRPC_PACKAGES:
                continue
            environment = {**default_environment(), "extra": ""}
            if requirement.marker is not None and not requirement.marker.evaluate(environment):
                continue
            assert requirement.specifier.contains(installed[name], prereleases=True), (
                f"{requirer} requires {requirement}, pinned {name} is {installed[name]}"
            )
            bounded_by[name].append(requirer)
    assert "pulumi" in bounded_by["grpcio"] and "pulumi" in bounded_by["protobuf"]


def test_pulumi_bounds_are_the_ones_the_deploying_page_records() -> None:
    """docs/azure.md (Deploying) quotes these; a Pulumi upgrade must revisit it."""
    specs = {
        canonicalize_name(requirement.name): requirement.specifier
        for requirement in map(Requirement, metadata.distribution("pulumi").requires or [])
        if canonicalize_name(requirement.name) in GRPC_PACKAGES
        and (requirement.marker is None or requirement.marker.evaluate({**default_environment(), "extra": ""}))
    }
    assert specs == {"grpcio": SpecifierSet(">=1.68.1,<2"), "protobuf": SpecifierSet(">=3.20.3,<7")}


# -- pyproject.toml -----------------------------------------------------------------------------


def test_pyproject_states_the_python_azure_runs() -> None:
    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))["project"]
    assert project["name"] == "runtime-cloud-host"
    Version(project["version"])
    requires_python = SpecifierSet(project["requires-python"])
    assert requires_python == SpecifierSet(">=3.11,<3.12")
    running = ".".join(map(str, sys.version_info[:3]))
    assert requires_python.contains(running), f"running Python {running}, the project wants {requires_python}"

"""Issue 27: every shell example of README.md and docs/ runs against a local host, as a reader would run it.

The host runs with the sample settings a fresh clone has (``local.settings.sample.json``, what ``make
setup`` copies), pointed at an Azurite of this module's own: the examples act as a ``PlatformAdmin`` on
pools and editions and create resources whose names are shared across the target account, which must not
disturb the other tests of a session. The examples run in a folder of their own that looks like the
checkout to them (``.venv``, ``local.settings.json`` holding the test host's settings, the packages the
commands name), so ``devhost token``, ``devhost keys``, ``tools.backup`` and the CLI read the test host's
settings and files the examples write stay out of the working tree. The convention an example follows is
in tests/docs/examples.py.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from devhost.azurite import Azurite
from tests.conftest import NEVER_IN_A_TEST
from tests.docs.examples import NEEDS, REPO, SAMPLE_GIT_ROOT, Example, examples, pages, run_page
from tests.support.host import HostProcess

SAMPLE = REPO / "local.settings.sample.json"
# What the commands of the examples run from the checkout (linked into the examples' folder).
CHECKOUT_ENTRIES = (".venv", "devhost", "shared", "tools", "runtime_cloud_cli", "storage_protocol", "bench")
TIMERS_THE_EXAMPLES_RUN_THEMSELVES = {
    "RuntimeCloud__GitOps__PollSchedule": NEVER_IN_A_TEST,
    "RuntimeCloud__Inventory__ScanSchedule": NEVER_IN_A_TEST,
    "RuntimeCloud__Autoscaling__EvaluateSchedule": NEVER_IN_A_TEST,
    # The export timer must fire within the RPO (the host refuses to start otherwise): daily, RPO a day.
    "RuntimeCloud__Backup__Schedule": "0 0 0 * * *",
    "RuntimeCloud__Backup__RpoMinutes": "1440",
}
README_MAX_LINES = 400


@dataclass(frozen=True)
class DocsHost:
    host: HostProcess
    workdir: Path
    git_root: Path


def sample_settings(azurite: Azurite, workdir: Path, git_root: Path) -> dict[str, str]:
    """The sample's Values, with Azurite's standard ports and the sample's folders made this test's own."""
    values: dict[str, str] = json.loads(SAMPLE.read_text(encoding="utf-8"))["Values"]
    ports = {"10000": azurite.blob_port, "10001": azurite.queue_port, "10002": azurite.table_port}
    settings = {}
    for name, value in values.items():
        for standard, port in ports.items():
            value = value.replace(f"127.0.0.1:{standard}", f"127.0.0.1:{port}")
        settings[name] = value.replace(SAMPLE_GIT_ROOT, str(git_root))
    # Relative folders of the sample are the app folder's; the host runs from the checkout, so name them.
    settings["RuntimeCloud__Auth__LocalSigningKeyDirectory"] = str(workdir / ".data" / "auth")
    # As `make run` does: traces, metrics and logs as OTLP JSON lines (docs/telemetry.md reads them).
    settings["RuntimeCloud__Telemetry__LocalDirectory"] = str(workdir / ".data" / "telemetry")
    # The timers whose work the examples do on demand (a sync, a scan, an evaluation, an export) would race
    # them: a poll declaring the commit a `sync` then finds "already-declared", a scan or an evaluation
    # under way answers 409, a timer's export would make the README's fresh stack healthy before it looks.
    # As every test host does (tests/conftest.py), they wait for a moment the test never reaches.
    settings.update(TIMERS_THE_EXAMPLES_RUN_THEMSELVES)
    return settings


@pytest.fixture(scope="module")
def docs_host(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DocsHost]:
    azurite = Azurite(tmp_path_factory.mktemp("docs-azurite"), persist=False).start()
    workdir = tmp_path_factory.mktemp("docs-checkout")
    git_root = tmp_path_factory.mktemp("docs-git")
    for entry in CHECKOUT_ENTRIES:
        (workdir / entry).symlink_to(REPO / entry)
    settings = sample_settings(azurite, workdir, git_root)
    (workdir / "local.settings.json").write_text(json.dumps({"IsEncrypted": False, "Values": settings}, indent=2))
    env = {**settings, "DEVHOST_KEY_DIRECTORY": str(workdir / ".data" / "keys")}
    host = HostProcess(REPO, env, workdir / "host.log")
    try:
        host.start()
        yield DocsHost(host, workdir, git_root)
    finally:
        host.stop()
        azurite.stop(grace_seconds=0.5)


def test_every_example_runs_in_page_order(docs_host: DocsHost) -> None:
    """One test for all pages: a page's examples may rely on what an earlier page made (README's run,
    the provisioning walkthrough's environment), so they must run in this order and in one process."""
    timings = []
    for page in pages():
        code, output, seconds = run_page(page, docs_host.host.base_url, docs_host.workdir, docs_host.git_root)
        timings.append(f"{page.relative_to(REPO)} {seconds:.1f} s")
        assert code == 0, f"{page.relative_to(REPO)}: an example failed (exit {code})\n{output}\n" + (
            "host log:\n" + docs_host.host.log()[-3000:]
        )
    print("\n".join(timings))


MARKED = [example for page in pages() for example in examples(page) if example.needs is not None]


@pytest.mark.parametrize("example", MARKED, ids=[example.where for example in MARKED])
def test_examples_marked_as_needing_azure_are_reported(example: Example) -> None:
    assert example.needs is not None
    pytest.skip(f"{example.where}: {NEEDS[example.needs]}")


def test_the_readme_is_the_front_door_and_links_into_the_docs() -> None:
    readme = (REPO / "README.md").read_text(encoding="utf-8")
    assert len(readme.splitlines()) < README_MAX_LINES
    linked = set(re.findall(r"\]\((docs/[\w./-]+?\.md)(?:#[\w-]+)?\)", readme))
    assert linked, "the README says where to read on"
    assert [link for link in sorted(linked) if not (REPO / link).is_file()] == []
    nav = {str(page.relative_to(REPO)) for page in pages()[1:]}
    assert nav - linked == set(), "every page of the site is reachable from the README"


def test_the_site_builds_with_every_link_and_anchor_resolved(tmp_path: Path) -> None:
    """`make docs`: mkdocs build --strict (mkdocs.yml turns broken links and anchors into warnings)."""
    done = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=REPO,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert (tmp_path / "site" / "index.html").is_file()

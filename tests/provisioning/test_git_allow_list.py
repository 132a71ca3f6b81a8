"""Issue 11: Git sources only from repositories the installation allows, with errors that reveal
nothing about paths, files or hosts, and https fetches bounded in size and time.

A host of its own allows one folder for every tenant and, for tenant-a only, a
local TLS Git server (trusted through ``SSL_CERT_FILE``), with a fetch budget
of 100 kB and 2 seconds.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from dulwich import porcelain

from tests.conftest import REPO, app_settings
from tests.provisioning.helpers import WRITE, unique, wait_for_run_state
from tests.support.git_server import GitHttpsServer
from tests.support.host import HostProcess

NOT_ALLOWED = "the repository is not an allowed Git source for this tenant"
UNREADABLE = "the repository cannot be read"


def commit_files(folder: Path, files: dict[str, bytes]) -> str:
    folder.mkdir(parents=True)
    repo = porcelain.init(str(folder))
    for name, content in files.items():
        (folder / name).parent.mkdir(parents=True, exist_ok=True)
        (folder / name).write_bytes(content)
    porcelain.add(repo, [str(folder / name) for name in files])
    return porcelain.commit(
        repo, message=b"desired state", author=b"t <t@example.com>", committer=b"t <t@example.com>"
    ).decode()


def spec_yaml(environment: str) -> bytes:
    return (
        f"environment: {environment}\nenvironment_class: non-production\ntarget: local-storage\n"
        f"runner: embedded\nresources:\n  - type: queue\n    name: git-{environment[-8:]}\n"
    ).encode()


class GitWorld:
    def __init__(
        self,
        root: Path,
        outside: Path,
        server: GitHttpsServer,
        stalled: int,
        host: HostProcess,
        commit: str,
        environments: dict[str, str],
    ) -> None:
        self.root, self.outside, self.server, self.stalled = root, outside, server, stalled
        self.host, self.commit, self.environments = host, commit, environments

    def declare(self, token: str, repository: str, path: str = "envs/local.yaml", revision: str = "master") -> Any:
        return self.host.request(
            "POST",
            "runtime-cloud/specifications",
            token=token,
            json={"git": {"repository": repository, "path": path, "revision": revision}},
        )


@pytest.fixture(scope="module")
def git(azurite, key_dir, tmp_path_factory) -> Iterator[GitWorld]:
    base = tmp_path_factory.mktemp("git-world")
    root, outside = base / "allowed", base / "outside"
    environments = {"local": unique("gitl"), "remote": unique("gitr")}
    commit = commit_files(
        root / "desired",
        {
            "envs/local.yaml": spec_yaml(environments["local"]),
            "envs/remote.yaml": spec_yaml(environments["remote"]),
            "config/app.yaml": b"database_host: db.internal.example\nadmin_user: root\nreplicas: 3\n",
        },
    )
    commit_files(root / "huge", {"blob.bin": os.urandom(300_000)})
    commit_files(outside / "desired", {"envs/local.yaml": spec_yaml(environments["local"])})
    (root / "plain-folder").mkdir()
    server = GitHttpsServer(base, {"desired.git": root / "desired", "huge.git": root / "huge"}).start()
    stalled = server.stalled_port()
    sources = {"*": [str(root)], "tenant-a": [server.url(""), f"https://localhost:{stalled}/"]}
    settings = app_settings(
        azurite,
        key_dir,
        RuntimeCloud__Provisioning__GitAllowedSources=json.dumps(sources),
        RuntimeCloud__Provisioning__GitMaxFetchBytes="100000",
        RuntimeCloud__Provisioning__GitFetchTimeoutSeconds="2",
        SSL_CERT_FILE=str(server.certificate),
    )
    host = HostProcess(REPO, settings, base / "host.log").start()
    try:
        yield GitWorld(root, outside, server, stalled, host, commit, environments)
    finally:
        host.stop()
        server.stop()


def git_error(answer: Any) -> str:
    assert answer.status_code == 422, answer.text
    [error] = answer.json()["errors"]
    assert error["path"] == "/git"
    return error["message"]


def test_paths_outside_the_allowed_folders_are_refused_alike_whether_or_not_they_exist(git, mint):
    token = mint("tenant-a", scopes=WRITE)
    refused = [
        str(git.outside / "desired"),
        str(git.outside / "missing"),
        "/etc",
        str(REPO),
        "desired",
        f"{git.root}/../outside/desired",
        f"file://{git.root}/desired",
        "ssh://git@localhost/desired.git",
        f"http://localhost:{git.server.port}/desired.git",
    ]

    answers = [git.declare(token, repository) for repository in refused]

    assert {git_error(answer) for answer in answers} == {NOT_ALLOWED}
    for answer in answers:
        assert "outside" not in answer.text and "/etc" not in answer.text and str(REPO) not in answer.text


def test_inside_an_allowed_folder_a_missing_path_and_a_plain_folder_answer_alike(git, mint):
    token = mint("tenant-a", scopes=WRITE)

    answers = [git.declare(token, str(git.root / name)) for name in ("missing", "plain-folder")]

    assert [git_error(answer) for answer in answers] == [UNREADABLE, UNREADABLE]


def test_a_file_that_is_not_a_specification_is_refused_without_naming_its_keys(git, mint):
    answer = git.declare(mint("tenant-a", scopes=WRITE), str(git.root / "desired"), path="config/app.yaml")

    assert answer.status_code == 422, answer.text
    assert "database_host" not in answer.text and "admin_user" not in answer.text and "replicas" not in answer.text


def test_a_specification_from_an_allowed_folder_is_declared(git, mint):
    token = mint("tenant-b", scopes=WRITE)  # the folder is allowed for every tenant

    answer = git.declare(token, str(git.root / "desired"))

    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(git.host, token, answer.json()["run_id"], {"applied", "failed"})
    assert run["source"]["commit"] == git.commit


def test_a_specification_from_an_allowed_https_repository_pins_the_commit(git, mint):
    token = mint("tenant-a", scopes=WRITE)

    answer = git.declare(token, git.server.url("desired.git"), path="envs/remote.yaml")

    assert answer.status_code == 202, answer.text
    run = wait_for_run_state(git.host, token, answer.json()["run_id"], {"applied", "failed"})
    assert run["state"] == "applied"
    assert run["source"] == {
        "kind": "git",
        "repository": git.server.url("desired.git"),
        "path": "envs/remote.yaml",
        "revision": "master",
        "commit": git.commit,
        "release": None,
    }


def test_an_https_source_allowed_for_one_tenant_is_refused_to_another(git, mint):
    answer = git.declare(mint("tenant-b", scopes=WRITE), git.server.url("desired.git"), path="envs/remote.yaml")

    assert git_error(answer) == NOT_ALLOWED


def test_an_https_repository_over_the_fetch_budget_is_refused(git, mint):
    answer = git.declare(mint("tenant-a", scopes=WRITE), git.server.url("huge.git"), path="blob.bin")

    assert "larger than 100000 bytes" in git_error(answer)


def test_fetch_failures_name_no_host_and_redirects_are_not_followed(git, mint):
    token = mint("tenant-a", scopes=WRITE)
    failing = [git.server.url("missing.git"), git.server.url("moved/desired.git")]

    answers = [git.declare(token, repository, path="envs/remote.yaml") for repository in failing]

    assert [git_error(answer) for answer in answers] == [UNREADABLE, UNREADABLE]
    for answer in answers:
        assert "localhost" not in answer.text and "127.0.0.1" not in answer.text


def test_a_server_that_never_answers_is_given_up_on(git, mint):
    answer = git.declare(mint("tenant-a", scopes=WRITE), f"https://localhost:{git.stalled}/desired.git")

    assert "took longer than 2 seconds" in git_error(answer)


def test_credentials_in_a_url_are_refused_and_never_stored(git, mint):
    token = mint("tenant-a", scopes=WRITE)
    with_credentials = git.server.url("desired.git").replace("https://", "https://someone:s3cret@")

    answer = git.declare(token, with_credentials, path="envs/remote.yaml")

    assert git_error(answer) == NOT_ALLOWED and "s3cret" not in answer.text

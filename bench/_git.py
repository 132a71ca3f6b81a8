"""Bare Git repositories for the benchmarks, written with dulwich (as a Git server keeps them).

Used by the GitOps benchmark and tests (bench code never imports the tests; the tests import
this). A commit is written straight into the object store and moves
``refs/heads/<branch>``, as a push does; each commit holds the whole tree.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from dulwich.index import commit_tree
from dulwich.objects import Blob, Commit
from dulwich.repo import Repo

FILE = "envs/app.yaml"


class BareRepository:
    """A bare repository whose branch moves by :meth:`commit`."""

    def __init__(self, folder: Path, branch: str = "main") -> None:
        folder.mkdir(parents=True)
        self.path = folder
        self.branch = branch
        self._repo: Any = Repo.init_bare(str(folder))  # refs typed as dulwich's Ref; plain bytes here
        self._files: dict[str, bytes] = {}

    def commit(self, changes: dict[str, bytes | None], message: str = "change") -> str:
        """Write ``changes`` (None deletes a file) as a new commit on the branch; answers its id."""
        for name, content in changes.items():
            if content is None:
                self._files.pop(name, None)
            else:
                self._files[name] = content
        store = self._repo.object_store
        entries = []
        for name, content in sorted(self._files.items()):
            blob = Blob.from_string(content)
            store.add_object(blob)
            entries.append((name.encode(), blob.id, 0o100644))
        commit = Commit()
        commit.tree = commit_tree(store, entries)
        ref = f"refs/heads/{self.branch}".encode()
        commit.parents = [self._repo.refs[ref]] if ref in self._repo.refs else []
        commit.author = commit.committer = b"Bench <bench@example.com>"
        commit.author_time = commit.commit_time = int(time.time())
        commit.author_timezone = commit.commit_timezone = 0
        commit.encoding = b"UTF-8"
        commit.message = message.encode()
        store.add_object(commit)
        self._repo.refs[ref] = commit.id
        return commit.id.decode()

    def close(self) -> None:
        self._repo.close()


def spec_yaml(environment: str, queues: tuple[str, ...] = ("a",)) -> bytes:
    """A non-production specification of ``environment``: one queue per name, in the local target."""
    suffix = environment[-8:]
    resources = "".join(f"  - type: queue\n    name: gq{name}-{suffix}\n" for name in queues)
    return (
        f"environment: {environment}\nenvironment_class: non-production\n"
        f"target: local-storage\nrunner: embedded\nresources:\n{resources}"
    ).encode()

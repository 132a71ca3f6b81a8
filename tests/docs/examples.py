"""The shell examples of README.md and docs/, read and turned into the scripts tests/docs/test_examples.py runs.

The convention an author follows (docs/development.md, "Documentation examples"):

- Every fenced block marked ``sh``, ``bash`` or ``shell`` is an example and is run, in page order (README.md
  first, then the pages in mkdocs.yml's ``nav`` order) and in order within a page, in one bash per page
  (``set -euo pipefail``), so a later example of a page may use what an earlier one set or made. Blocks of
  other languages (``json``, ``yaml``, ``python``, none) show documents and output and are not run.
- A block that needs what a test machine cannot have is marked by an HTML comment on the line before its
  fence: ``<!-- needs: azure -->`` (reported as skipped: "needs an Azure subscription"). Nothing else
  skips a block.
- ``curl`` is checked by what the text says it answers: a comment ``# 202 ...`` (on the line after the
  command, or at the end of its last line) is the status the command's last ``curl`` must answer, and each
  ``"key": value`` in that comment whose value is a literal (no ``...``) must be in the answer's JSON; a
  bare word after the status (``# 409 environment-follows-git``) must be in the answer. A ``curl`` with
  no such comment must answer below 400. Every command must exit 0.
- The documented address ``127.0.0.1:8130`` (and ``localhost:8130``) is the test host's, and the local Git
  folder of the sample settings (:data:`SAMPLE_GIT_ROOT`) is the test's own: the harness rewrites both.
"""

from __future__ import annotations

import os
import re
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

import yaml

REPO = Path(__file__).resolve().parents[2]
DOCS = REPO / "docs"
SHELL_LANGUAGES = {"sh", "bash", "shell"}
NEEDS = {"azure": "needs an Azure subscription"}
DOCUMENTED_ADDRESSES = ("http://127.0.0.1:8130", "http://localhost:8130", "localhost:8130", "127.0.0.1:8130")
SAMPLE_GIT_ROOT = "/tmp/runtime-cloud-git"  # local.settings.sample.json's Git allow-list
HERE = Path(__file__).resolve().parent
PAGE_TIMEOUT_SECONDS = 240

FENCE = re.compile(r"^(?P<indent>\s*)(?P<fence>```+|~~~+)\s*(?P<language>[\w+-]*)")
NEEDS_MARK = re.compile(r"^\s*<!--\s*needs:\s*(?P<what>[\w-]+)\s*-->\s*$")
# A status the text states: "# 202 ..." (a 1xx-5xx code, then a space or the end).
EXPECTATION = re.compile(r"#\s*(?P<status>[1-5]\d\d)(?=\s|$)(?P<rest>.*)$")


@dataclass(frozen=True)
class Example:
    page: str  # relative to the repository, e.g. "docs/provisioning.md"
    line: int  # the fence's line, 1-based
    code: str
    needs: str | None = None

    @property
    def where(self) -> str:
        return f"{self.page}:{self.line}"


def pages() -> list[Path]:
    """README.md, then every page of mkdocs.yml's nav in its order."""
    config = yaml.safe_load((REPO / "mkdocs.yml").read_text(encoding="utf-8"))
    ordered: list[Path] = [REPO / "README.md"]

    def walk(entry: object) -> None:
        if isinstance(entry, str):
            ordered.append(DOCS / entry)
        elif isinstance(entry, list):
            for item in entry:
                walk(item)
        elif isinstance(entry, dict):
            for value in entry.values():
                walk(value)

    walk(config["nav"])
    return ordered


def examples(page: Path) -> list[Example]:
    """The shell blocks of one page, in order, each with the mark before its fence (if any)."""
    lines = page.read_text(encoding="utf-8").splitlines()
    found: list[Example] = []
    index = 0
    while index < len(lines):
        opening = FENCE.match(lines[index])
        if not opening:
            index += 1
            continue
        indent, fence, language = opening["indent"], opening["fence"], opening["language"].lower()
        body: list[str] = []
        end = index + 1
        while end < len(lines) and not lines[end].strip().startswith(fence):
            line = lines[end]
            body.append(line[len(indent) :] if line.startswith(indent) else line.lstrip())
            end += 1
        if language in SHELL_LANGUAGES:
            mark = NEEDS_MARK.match(lines[index - 1]) if index > 0 else None
            needs = mark["what"] if mark else None
            if needs is not None and needs not in NEEDS:
                raise ValueError(f"{page}:{index}: unknown mark 'needs: {needs}' (known: {sorted(NEEDS)})")
            found.append(Example(str(page.relative_to(REPO)), index + 1, "\n".join(body), needs))
        index = end + 1
    return found


@dataclass
class Command:
    """One shell command of an example: its lines, and the answer the text states for it (if any)."""

    lines: list[str] = field(default_factory=list)
    expectation: str | None = None


def commands(code: str) -> list[Command | str]:
    """Split an example into commands (continuations, quoted newlines and here-documents kept together)
    and the comment lines between them; a stated answer is attached to the command it follows."""
    parts: list[Command | str] = []
    current: Command | None = None
    state = _Lexer()
    heredoc: str | None = None
    for line in code.splitlines():
        if heredoc is not None:
            assert current is not None
            current.lines.append(line)
            if line.strip() == heredoc:
                heredoc = None
                current = None if not state.open else current
            continue
        if current is None:
            stripped = line.strip()
            if not stripped or stripped.startswith("#"):
                stated = EXPECTATION.match(stripped)
                last = next((part for part in reversed(parts) if isinstance(part, Command)), None)
                if stated and last is not None and last.expectation is None:
                    last.expectation = stripped
                parts.append(line)
                continue
            current = Command()
            parts.append(current)
        current.lines.append(line)
        comment = state.feed(line)
        if comment is not None:
            stated = EXPECTATION.match(comment.strip())
            if stated:
                current.expectation = comment.strip()
        heredoc = state.take_heredoc()
        if heredoc is None and not state.open:
            current = None
    return parts


class _Lexer:
    """Just enough of the shell's quoting to know where a command ends and where its comment starts."""

    def __init__(self) -> None:
        self.single = False
        self.double = False
        self.continued = False
        self._heredoc: str | None = None

    @property
    def open(self) -> bool:
        return self.single or self.double or self.continued

    def take_heredoc(self) -> str | None:
        word, self._heredoc = self._heredoc, None
        return word

    def feed(self, line: str) -> str | None:
        """Read one line; answer its trailing comment (outside quotes), if any."""
        self.continued = False
        index = 0
        while index < len(line):
            char = line[index]
            if self.single:
                self.single = char != "'"
            elif char == "\\" and index + 1 == len(line):
                self.continued = True
            elif char == "\\":
                index += 1
            elif self.double:
                self.double = char != '"'
            elif char == "'":
                self.single = True
            elif char == '"':
                self.double = True
            elif char == "#" and (index == 0 or line[index - 1] in " \t;|&("):
                return line[index:]
            elif line.startswith("<<", index) and not line.startswith("<<<", index):
                here = re.match(r"<<-?\s*(['\"]?)(\w+)\1", line[index:])
                if here:
                    self._heredoc = here.group(2)
            index += 1
        return None


def script(example: Example, base_url: str, git_root: str) -> str:
    """The example as bash lines: the documented address and Git folder rewritten, each stated answer
    checked right after its command (``__doc_expect`` before it tells the curl wrapper not to judge)."""
    code = example.code
    for address in DOCUMENTED_ADDRESSES:
        target = base_url if address.startswith("http") else base_url.removeprefix("http://")
        code = code.replace(address, target)
    code = code.replace(SAMPLE_GIT_ROOT, git_root)
    out = [f"__doc_at {shlex.quote(example.where)}"]
    for part in commands(code):
        if isinstance(part, str):
            out.append(part)
            continue
        if part.expectation is None:
            out.extend(part.lines)
            continue
        out.append("__doc_expect")
        out.extend(part.lines)
        out.append(f"__doc_check {shlex.quote(part.expectation)}")
    return "\n".join(out) + "\n"


def shell_environment(workdir: Path) -> dict[str, str]:
    """A reader's shell: none of the test process's settings, the checkout's tools first on PATH."""
    skipped = ("RuntimeCloud", "RUNTIME_CLOUD_", "DEVHOST_", "AzureWebJobs", "PYTEST_", "COV_")
    inherited = {name: value for name, value in os.environ.items() if not name.startswith(skipped)}
    return {
        **inherited,
        "HOME": str(workdir),  # git's identity and config below, nobody's real home
        "GIT_CONFIG_NOSYSTEM": "1",
        "GIT_AUTHOR_NAME": "Docs Example",
        "GIT_AUTHOR_EMAIL": "docs@example.invalid",
        "GIT_COMMITTER_NAME": "Docs Example",
        "GIT_COMMITTER_EMAIL": "docs@example.invalid",
        "COLUMNS": "160",
        "DOC_PYTHON": sys.executable,
        "DOC_ANSWER": str(HERE / "answer.py"),
    }


def run_page(page: Path, base_url: str, workdir: Path, git_root: Path) -> tuple[int, str, float]:
    """Run a page's examples in one bash from ``workdir``: (exit status, the output's tail, seconds)."""
    runnable = [example for example in examples(page) if example.needs is None]
    if not runnable:
        return 0, "", 0.0
    body = "".join(script(example, base_url, str(git_root)) for example in runnable)
    page_script = workdir / f"{page.stem}.examples.sh"
    page_script.write_text(f"source {HERE / 'prelude.sh'}\n{body}")
    started = time.monotonic()
    done = subprocess.run(
        ["bash", "--noprofile", "--norc", str(page_script)],
        cwd=workdir,
        env=shell_environment(workdir),
        capture_output=True,
        text=True,
        timeout=PAGE_TIMEOUT_SECONDS,
        check=False,
    )
    return done.returncode, done.stdout[-4000:] + "\n--- stderr ---\n" + done.stderr[-6000:], time.monotonic() - started

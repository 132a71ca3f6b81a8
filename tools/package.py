"""Build the deployment zip: the function app as Azure runs it, and nothing else.

    .venv/bin/python tools/package.py [--output dist/runtime-cloud-host.zip]

(`make package` runs this.) The zip has the app root at its root -- host.json,
function_app.py, requirements.txt and the functions/, orchestrations/, shared/ and
storage_protocol/ packages -- which is what a Flex Consumption one-deploy (`az functionapp deployment
source config-zip --build-remote true`) expects. It carries no installed packages:
the remote build installs requirements.txt on Azure, for Azure's Linux and Python.

Which files go in is decided by `.funcignore` alone, read with gitignore rules, so
`make package` and `func azure functionapp publish` (which also reads .funcignore)
ship the same files. The checks below are a safety net, not a second list: a few
paths must never ship (the development signing key, local settings), and the app
cannot start without a few others, so a .funcignore mistake fails the build here
instead of surfacing on Azure.

The zip is reproducible: entries sorted, every timestamp fixed (SOURCE_DATE_EPOCH
if set, else 1980-01-01), file modes normalised, so the same tree gives the same
bytes and a deployment can be compared with what CI built.
"""

from __future__ import annotations

import argparse
import fnmatch
import os
import sys
import tempfile
import time
import zipfile
from collections.abc import Iterable, Sequence
from pathlib import Path

import pathspec

ROOT = Path(__file__).resolve().parent.parent
IGNORE_FILE = ".funcignore"
DEFAULT_OUTPUT = Path("dist") / "runtime-cloud-host.zip"

# The Functions host cannot index the app without these (v2 programming model).
REQUIRED_FILES = ("function_app.py", "host.json", "requirements.txt")
# The app's own packages; an empty one in the zip means .funcignore swallowed it.
REQUIRED_PACKAGES = ("functions", "orchestrations", "shared", "storage_protocol")

# Never shipped, whatever .funcignore says (fnmatch patterns on the zip path).
# .data/ holds the development issuer's private key and Azurite's data; local
# settings hold connection strings; .python_packages/ would make Azure skip the
# remote build and run packages built for this machine.
NEVER_SHIP = (
    ".data/*",
    "local.settings*.json",
    "*/local.settings*.json",
    ".python_packages/*",
    ".venv/*",
    ".git/*",
)

# 1980-01-01 is the earliest time a zip entry can hold.
ZIP_EPOCH = 315532800
REGULAR_FILE_MODE = 0o100644  # nothing in the app is executed directly


class PackageError(Exception):
    """The tree cannot be packaged as it is; the message says why."""


def load_ignore_spec(root: Path) -> pathspec.GitIgnoreSpec:
    """The patterns of `root/.funcignore` (none if the file is missing)."""
    ignore_file = root / IGNORE_FILE
    lines = ignore_file.read_text(encoding="utf-8").splitlines() if ignore_file.exists() else []
    return pathspec.GitIgnoreSpec.from_lines(lines)


def select_files(root: Path, spec: pathspec.GitIgnoreSpec) -> list[str]:
    """Paths (posix, relative to root) of the files .funcignore keeps, sorted.

    An ignored directory is not descended into: gitignore cannot re-include a
    file under an excluded directory, and this keeps node_modules/ and .venv/
    from being walked at all.
    """
    selected: list[str] = []
    for current, dirnames, filenames in os.walk(root):
        base = Path(current).relative_to(root).as_posix()
        prefix = "" if base == "." else base + "/"
        for name in list(dirnames):
            path = prefix + name
            if (Path(current) / name).is_symlink():
                # A link can point anywhere (.data/, a home directory): refuse
                # rather than decide silently whether to follow it.
                if not spec.match_file(path + "/"):
                    raise PackageError(f"{path} is a symbolic link; the package holds only real files")
                dirnames.remove(name)
            elif spec.match_file(path + "/"):
                dirnames.remove(name)
            elif never_shipped(path + "/"):
                # Say so at once rather than walk .venv/ or .git/ to find out.
                raise PackageError(f"{IGNORE_FILE} lets through {path}/, which must never be deployed")
        dirnames.sort()
        for name in filenames:
            path = prefix + name
            if spec.match_file(path):
                continue
            if (Path(current) / name).is_symlink():
                raise PackageError(f"{path} is a symbolic link; the package holds only real files")
            selected.append(path)
    return sorted(selected)


def never_shipped(path: str) -> bool:
    return any(fnmatch.fnmatch(path, pattern) for pattern in NEVER_SHIP)


def check_selection(files: Sequence[str]) -> None:
    """Refuse a selection the app could not run from, or that leaks secrets."""
    leaked = [path for path in files if never_shipped(path)]
    if leaked:
        raise PackageError(f"{IGNORE_FILE} lets through files that must never be deployed: {', '.join(leaked[:5])}")
    present = set(files)
    missing = [name for name in REQUIRED_FILES if name not in present]
    missing += [
        name + "/"
        for name in REQUIRED_PACKAGES
        if not any(path.startswith(name + "/") and path.endswith(".py") for path in files)
    ]
    if missing:
        raise PackageError(f"the package would lack {', '.join(missing)}; check {IGNORE_FILE}")


def zip_timestamp() -> tuple[int, int, int, int, int, int]:
    """The one timestamp every entry gets: SOURCE_DATE_EPOCH, as reproducible builds agree."""
    epoch = max(int(os.environ.get("SOURCE_DATE_EPOCH", ZIP_EPOCH)), ZIP_EPOCH)
    return time.gmtime(epoch)[:6]


def write_zip(root: Path, files: Iterable[str], output: Path) -> None:
    """Write `files` into `output`, atomically, the same bytes for the same tree."""
    output.parent.mkdir(parents=True, exist_ok=True)
    stamp = zip_timestamp()
    # Written beside the target and renamed, so no reader ever sees half a zip.
    handle, temporary = tempfile.mkstemp(prefix=output.name + ".", suffix=".tmp", dir=output.parent)
    os.close(handle)
    try:
        with zipfile.ZipFile(temporary, "w") as archive:
            for path in files:
                entry = zipfile.ZipInfo(path, date_time=stamp)
                entry.create_system = 3  # Unix, so the modes below are honoured on Linux
                entry.external_attr = REGULAR_FILE_MODE << 16
                entry.compress_type = zipfile.ZIP_DEFLATED
                archive.writestr(entry, (root / path).read_bytes(), compresslevel=9)
        os.replace(temporary, output)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise


def build(root: Path, output: Path) -> list[str]:
    """Package the app under `root` into `output`; returns the zipped paths."""
    files = select_files(root, load_ignore_spec(root))
    # The output may sit inside the tree (dist/ is ignored, a custom path may not be).
    files = [path for path in files if (root / path).resolve() != output.resolve()]
    check_selection(files)
    write_zip(root, files, output)
    return files


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="Build the deployment zip of the function app.")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT, help=f"zip to write (default: {DEFAULT_OUTPUT})")
    parser.add_argument("--root", type=Path, default=ROOT, help="app root (default: this checkout)")
    args = parser.parse_args(argv)
    root = args.root.resolve()
    output = args.output if args.output.is_absolute() else Path.cwd() / args.output
    try:
        files = build(root, output)
    except PackageError as error:
        print(f"package: {error}", file=sys.stderr)
        return 1
    size = output.stat().st_size
    print(f"wrote {output} ({len(files)} files, {size / 1024:.0f} KiB)")
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""Test hosts forked from one interpreter that has already imported what every host imports.

The suite starts about a hundred local hosts (``python -m devhost start``), on a machine where CPU
is what runs out; a fresh interpreter spends most of a host's start importing the same libraries and
the same ``shared`` package each time. The zygote is one interpreter per test worker that imports
them once, then forks a host on request: the child sets the host's environment, working folder and
log, and runs ``devhost``'s own ``main`` with the host's arguments, as ``python -m devhost start``
would. What the test drives is unchanged: the same process serving HTTP, queues and timers, killed,
stopped and signalled by its pid.

What the zygote imports is what reads no setting at import (tests/test_import_reads_no_settings.py):
the local host, the worker library, the Azure SDKs and the whole ``shared`` package. The app itself
(``function_app``, ``functions``, ``orchestrations``) is imported by each host, never here: its
bindings are fixed by the settings it sees when it is imported.

Protocol, one JSON document a line: the test worker writes ``{"argv", "env", "cwd", "log"}`` to the
zygote's standard input; the zygote answers ``{"pid": n}`` on its standard output, and later
``{"exit": n, "returncode": r}`` when that child ends (``r`` negative for a signal, as
:class:`subprocess.Popen` says it). The zygote runs single-threaded (nothing it imports starts a
thread, which it checks), so forking it is safe.

The zygote forks the hosts' job scalers too: each host of the app starts one beside itself, and a fresh
``python -m runner_job scale`` spends about 0.6 s of CPU on imports the zygote has done. A forked host is
given tests/support/scaler_shim.py as its ``DEVHOST_RUNNER_JOB_COMMAND`` (unless its settings name a
command of their own); the shim connects to the zygote's Unix socket with its standard streams,
environment and folder, the zygote forks a scaler that runs ``runner_job``'s ``main(["scale"])`` on
them, and answers the shim ``{"returncode": r}`` when it ends. A shim that goes away (killed by its
host) takes its scaler with it, as killing the real command would.
"""

from __future__ import annotations

import atexit
import gc
import importlib
import io
import json
import os
import pkgutil
import select
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from pathlib import Path
from typing import Any, NoReturn

from devhost.parent_death import signalled_on_parent_death
from devhost.runner_jobs import COMMAND_SETTING as SCALER_COMMAND_SETTING
from devhost.runner_jobs import job_command

REPO = Path(__file__).resolve().parents[2]
PRELOADED_PACKAGES = ("shared",)
PRELOADED_MODULES = (
    "devhost.__main__",
    "devhost.extensions",
    "devhost.host",
    "devhost.worker_validation",
    "azure.functions",
    "azure.durable_functions",
    "runner_job.__main__",
    "runner_job.scaler",
    "pulumi.automation",  # what a scaler imports before its first job's fork (runner_job.scaler.load_engines)
    # What the app imports on first use, not at start (to keep a host's start on Azure quick), and many
    # test hosts then use: the policy gate's CEL (about 0.15 s of CPU, its CLI and rich with it) and
    # GitOps' Git client.
    "cel",
    "dulwich.client",
    "dulwich.object_store",
    "dulwich.repo",
)
SCALER_SHIM = Path(__file__).with_name("scaler_shim.py")
SHIM_SECONDS = 10.0  # a shim sends its request as soon as it connects


# --- the zygote (its own process: ``python -m tests.support.host_zygote``) ---------------------------


def preload() -> None:
    for name in PRELOADED_MODULES:
        importlib.import_module(name)
    from devhost.worker_validation import _worker_modules

    _worker_modules()  # the Functions worker library every host indexes its app with
    for package in PRELOADED_PACKAGES:
        top = importlib.import_module(package)
        for info in pkgutil.walk_packages(top.__path__, package + "."):
            importlib.import_module(info.name)
    # What the zygote has imported lives as long as every host it forks: out of the collector's reach, a
    # host's collections do not walk (and copy, page by page, from the zygote) those objects again.
    gc.freeze()
    threads = threading.active_count()
    if threads != 1 or len(os.listdir("/proc/self/task")) != 1:
        raise RuntimeError(f"the zygote must stay single-threaded to fork safely; it has {threads} threads")


def serve() -> None:
    preload()
    wake_read, wake_write = os.pipe()
    for fd in (wake_read, wake_write):
        os.set_blocking(fd, False)
    signal.set_wakeup_fd(wake_write)
    signal.signal(signal.SIGCHLD, lambda *_: None)  # a handler, so that SIGCHLD writes to the wake-up pipe
    # In a folder of its own that only this user may enter (mkdtemp makes it 0700): the shims are this
    # user's processes, and nobody else's may ask the zygote for a scaler.
    scalers = _Scalers(Path(tempfile.mkdtemp(prefix="zygote-")) / "scalers.sock")
    try:
        _serve(scalers, wake_read, wake_write)
    finally:
        scalers.close()


def _serve(scalers: _Scalers, wake_read: int, wake_write: int) -> None:
    pending = b""
    while True:
        readable, _, _ = select.select([0, wake_read, *scalers.sockets()], [], [])
        if wake_read in readable:
            _drain(wake_read)
            _reap(scalers)
        scalers.serve(readable, inherited=(wake_read, wake_write))
        if 0 in readable:
            chunk = os.read(0, 65536)
            if not chunk:
                return  # the test worker has gone; the hosts get their parent-death signal
            pending += chunk
            while b"\n" in pending:
                line, pending = pending.split(b"\n", 1)
                request = json.loads(line)
                _emit({"pid": _fork(request, (wake_read, wake_write, *scalers.sockets()), scalers.path)})


class _Scalers:
    """The zygote's Unix socket for the hosts' scaler shims, and the scalers it forked for them."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(str(path))
        self._listener.listen(16)
        self._shims: dict[int, socket.socket] = {}  # scaler pid -> its shim's connection

    def close(self) -> None:
        self._listener.close()
        self.path.unlink(missing_ok=True)
        self.path.parent.rmdir()

    def sockets(self) -> list[int]:
        """The listener and the shims' connections: what the zygote waits on, and what a child it forks must close."""
        return [self._listener.fileno(), *(shim.fileno() for shim in self._shims.values())]

    def serve(self, readable: list[int], inherited: tuple[int, ...]) -> None:
        for pid, shim in list(self._shims.items()):
            if shim.fileno() in readable:  # a shim says nothing after its request: this is its end (killed)
                self._shims.pop(pid).close()
                _kill(pid)
        if self._listener.fileno() in readable:
            shim, _ = self._listener.accept()
            scaler = self._fork(shim, inherited)
            if scaler is None:
                shim.close()
            else:
                self._shims[scaler] = shim

    def _fork(self, shim: socket.socket, inherited: tuple[int, ...]) -> int | None:
        request, fds = _receive(shim)
        if request is None:
            return None
        pid = os.fork()
        if pid:
            for fd in fds:
                os.close(fd)
            return pid
        code = 1
        try:
            for fd in (*inherited, *self.sockets(), shim.fileno()):
                os.close(fd)
            code = _run_scaler(request, fds)
        except SystemExit as leaving:
            code = leaving.code if isinstance(leaving.code, int) else 1
        except BaseException:
            traceback.print_exc()
        finally:
            _exit_as_an_interpreter_does(code)

    def ended(self, pid: int, returncode: int) -> bool:
        """Tell a scaler's shim its exit code; False when ``pid`` was not a scaler."""
        shim = self._shims.pop(pid, None)
        if shim is None:
            return False
        try:
            shim.sendall((json.dumps({"returncode": returncode}) + "\n").encode())
        except OSError:
            pass  # the shim is gone already
        shim.close()
        return True


def _receive(shim: socket.socket) -> tuple[dict[str, Any] | None, list[int]]:
    """The shim's request (one JSON line) and the three standard streams it sent with it; None, and nothing
    forked, for a connection that sends something else or no whole request in :data:`SHIM_SECONDS` (the
    zygote serves nothing meanwhile)."""
    shim.settimeout(SHIM_SECONDS)
    data, fds = b"", list[int]()
    try:
        data, fds, _, _ = socket.recv_fds(shim, 1 << 20, 3)
        while data and not data.endswith(b"\n"):
            more = shim.recv(1 << 20)
            if not more:
                break
            data += more
    except OSError:
        pass
    shim.settimeout(None)
    try:
        request = json.loads(data) if len(fds) == 3 else None
    except ValueError:
        request = None
    if not isinstance(request, dict):
        for fd in fds:
            os.close(fd)
        return None, []
    return request, fds


def _kill(pid: int) -> None:
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _drain(fd: int) -> None:
    try:
        while os.read(fd, 4096):
            pass
    except BlockingIOError:
        pass


def _reap(scalers: _Scalers) -> None:
    while True:
        try:
            pid, status = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return
        code = os.waitstatus_to_exitcode(status)
        if not scalers.ended(pid, code):
            _emit({"exit": pid, "returncode": code})


def _emit(document: dict[str, Any]) -> None:
    os.write(1, (json.dumps(document) + "\n").encode())


def _fork(request: dict[str, Any], zygote_fds: tuple[int, ...], scaler_socket: Path) -> int:
    pid = os.fork()
    if pid:
        return pid
    code = 1
    try:
        code = _run_host(request, zygote_fds, scaler_socket)
    except SystemExit as leaving:
        code = leaving.code if isinstance(leaving.code, int) else 1
    except BaseException:  # whatever ends the host is printed to its log, as Python would print it
        traceback.print_exc()
    finally:
        _exit_as_an_interpreter_does(code)


def _exit_as_an_interpreter_does(code: int) -> NoReturn:
    """Run the exit handlers a fresh interpreter runs before it ends, then end the child without unwinding.

    ``os._exit`` skips ``atexit``, and the host's app registers its telemetry's shutdown there (the
    OpenTelemetry providers flush what their batch processors still hold): without it, a span or log
    record made in the last second before a test stopped its host was lost, which ``python -m devhost
    start`` never loses.
    """
    try:
        atexit._run_exitfuncs()
    except BaseException:  # printed as the interpreter prints a failing exit handler
        traceback.print_exc()
    for stream in (sys.stdout, sys.stderr):
        stream.flush()
    os._exit(code)


def _run_host(request: dict[str, Any], zygote_fds: tuple[int, ...], scaler_socket: Path) -> int:
    """In the child: become the host ``python -m devhost <argv>`` would have started."""
    _leave_the_zygote(zygote_fds)
    _redirect(request["log"])
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update(request["env"])
    # An app with runner jobs whose settings name no scaler command of their own (what the host would run).
    if SCALER_COMMAND_SETTING not in os.environ and job_command(_app_dir(request["argv"]), os.environ):
        os.environ[SCALER_COMMAND_SETTING] = f"{sys.executable} -S -E {SCALER_SHIM} {scaler_socket}"
    sys.argv = ["devhost", *request["argv"]]
    from devhost.__main__ import main

    return main(request["argv"])


def _leave_the_zygote(zygote_fds: tuple[int, ...]) -> None:
    """A forked child's first steps: the zygote's descriptors and signal handling are not its own."""
    signal.set_wakeup_fd(-1)
    for fd in zygote_fds:
        os.close(fd)
    signal.signal(signal.SIGCHLD, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)
    arrange = signalled_on_parent_death(signal.SIGKILL)  # the zygote's main thread is this child's parent
    if arrange is not None:
        arrange()


def _app_dir(argv: list[str]) -> Path:
    """The ``--app-dir`` of ``python -m devhost start`` (the working folder when there is none)."""
    return Path(argv[argv.index("--app-dir") + 1]) if "--app-dir" in argv else Path(".")


def _run_scaler(request: dict[str, Any], streams: list[int]) -> int:
    """In the child: become the ``python -m runner_job scale`` the host would have started."""
    _leave_the_zygote(())
    for target, fd in enumerate(streams):
        os.dup2(fd, target)
        os.close(fd)
    _reopen_standard_streams()
    os.chdir(request["cwd"])
    os.environ.clear()
    os.environ.update({name: value for name, value in request["env"].items() if name != SCALER_COMMAND_SETTING})
    sys.argv = [str(REPO / "runner_job" / "__main__.py"), "scale"]
    from runner_job.__main__ import main

    return main(["scale"])


def _redirect(log: str) -> None:
    """Standard input from nowhere; standard output and error to the host's log, unbuffered."""
    null = os.open(os.devnull, os.O_RDONLY)
    os.dup2(null, 0)
    os.close(null)
    out = os.open(log, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.dup2(out, 1)
    os.dup2(out, 2)
    os.close(out)
    _reopen_standard_streams()


def _reopen_standard_streams() -> None:
    """``sys.stdin``, ``sys.stdout`` and ``sys.stderr`` on descriptors 0-2 as they are now, unbuffered."""
    sys.stdin = io.TextIOWrapper(io.FileIO(0, "r", closefd=False))
    sys.stdout = io.TextIOWrapper(io.FileIO(1, "w", closefd=False), write_through=True, line_buffering=True)
    sys.stderr = io.TextIOWrapper(
        io.FileIO(2, "w", closefd=False), errors="backslashreplace", write_through=True, line_buffering=True
    )


# --- the test worker's side ---------------------------------------------------------------------------


class ForkedHost:
    """A host the zygote forked: what :class:`tests.support.host.HostProcess` needs of a ``Popen``."""

    def __init__(self, zygote: Zygote, pid: int) -> None:
        self._zygote = zygote
        self.pid = pid

    @property
    def returncode(self) -> int | None:
        return self._zygote.returncode(self.pid)

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        code = self._zygote.wait(self.pid, timeout)
        if code is None:
            raise subprocess.TimeoutExpired(f"host {self.pid}", timeout or 0)
        return code

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            os.kill(self.pid, signum)

    def kill(self) -> None:
        self.send_signal(signal.SIGKILL)


class Zygote:
    """The test worker's zygote: started once (from the main thread, so that it ends with the worker)."""

    def __init__(self) -> None:
        env = {**os.environ, "PYTHONPATH": str(REPO), "PYTHONUNBUFFERED": "1"}
        self._process = subprocess.Popen(
            [sys.executable, "-m", "tests.support.host_zygote"],
            cwd=REPO,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            preexec_fn=signalled_on_parent_death(signal.SIGKILL),
        )
        self._lock = threading.Lock()  # one fork request at a time: its answer is the next pid line
        self._changed = threading.Condition()
        self._started: list[int] = []
        self._ended: dict[int, int] = {}
        self._reader = threading.Thread(target=self._read, name="host-zygote", daemon=True)
        self._reader.start()

    def spawn(self, argv: list[str], env: dict[str, str], cwd: Path, log: Path, timeout: float = 60.0) -> ForkedHost:
        request = {"argv": argv, "env": env, "cwd": str(cwd), "log": str(log)}
        assert self._process.stdin is not None
        with self._lock:
            self._process.stdin.write((json.dumps(request) + "\n").encode())
            self._process.stdin.flush()
            with self._changed:
                if not self._changed.wait_for(lambda: self._started or not self.alive, timeout):
                    raise TimeoutError(f"the host zygote did not fork in {timeout} s")
                if not self._started:
                    raise RuntimeError(f"the host zygote ended with {self._process.poll()}")
                return ForkedHost(self, self._started.pop(0))

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def returncode(self, pid: int) -> int | None:
        with self._changed:
            return self._ended.get(pid)

    def wait(self, pid: int, timeout: float | None) -> int | None:
        with self._changed:
            self._changed.wait_for(lambda: pid in self._ended or not self.alive, timeout)
            return self._ended.get(pid)

    def _read(self) -> None:
        assert self._process.stdout is not None
        for line in self._process.stdout:
            document = json.loads(line)
            with self._changed:
                if "pid" in document:
                    pid = int(document["pid"])
                    # Linux hands out pids again (pid_max is 32768 here, and threads take them too): an exit
                    # recorded for an earlier host with this pid must not read as this host's.
                    self._ended.pop(pid, None)
                    self._started.append(pid)
                else:
                    self._ended[int(document["exit"])] = int(document["returncode"])
                self._changed.notify_all()
        self._process.wait()
        with self._changed:
            self._changed.notify_all()  # the zygote is gone: waiters stop waiting


_zygote: Zygote | None = None
_zygote_lock = threading.Lock()


def zygote() -> Zygote | None:
    """The worker's zygote, started on first use from the main thread; None elsewhere (a host started from
    another thread first is started as a fresh interpreter, see :mod:`devhost.parent_death`) and off Linux
    (where the zygote could not tell that it has no other thread, and forking is not what Python does)."""
    global _zygote
    with _zygote_lock:
        if _zygote is not None and _zygote.alive:
            return _zygote
        if not sys.platform.startswith("linux") or threading.current_thread() is not threading.main_thread():
            return None
        _zygote = Zygote()
        return _zygote


if __name__ == "__main__":
    serve()

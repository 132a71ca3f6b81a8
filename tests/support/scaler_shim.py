"""A test host's job scaler, forked by the worker's zygote instead of started as a fresh interpreter.

Every local host of the app starts ``python -m runner_job scale`` beside itself (devhost/runner_jobs.py),
and a fresh interpreter spends about 0.6 s of CPU importing what the zygote has already imported: some
seventy hosts a run, on two cores. A test host (one the zygote forked) is given this script as its
``DEVHOST_RUNNER_JOB_COMMAND`` instead; it runs without ``site`` (the standard library alone, a few
milliseconds), hands the zygote its standard streams, environment and folder, and the zygote forks a
scaler that runs ``runner_job``'s own ``main(["scale"])`` on them (tests/support/host_zygote.py).

What the host sees is what it sees of the real command: a child whose standard input is the host's pipe
(closed: the scaler stops taking work, then this process ends with the scaler's exit code); a child that
ends when the scaler ends, so the host starts it again; and killing this process kills the scaler (the
zygote kills a scaler whose shim is gone). Its jobs are forked by the scaler as before, each a process of
its own.

Usage: ``python -S -E scaler_shim.py SOCKET`` (the zygote's Unix socket).
"""

import json
import os
import signal
import socket
import sys


def main(socket_path: str) -> int:
    connection = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.connect(socket_path)
    request = json.dumps({"env": dict(os.environ), "cwd": os.getcwd()}).encode() + b"\n"
    sent = socket.send_fds(connection, [request], [0, 1, 2])  # the descriptors travel with the first bytes
    connection.sendall(request[sent:])
    answer = b""
    while True:  # one line: the scaler's exit code once it has ended (nothing if the zygote went first)
        chunk = connection.recv(4096)
        if not chunk:
            break
        answer += chunk
    if not answer.strip():
        return 1
    code = int(json.loads(answer)["returncode"])
    if code < 0:  # ended by a signal: end by the same one, as the host would see of the real scaler
        signal.signal(-code, signal.SIG_DFL)
        os.kill(os.getpid(), -code)
    return code


if __name__ == "__main__":
    sys.exit(main(sys.argv[1]))

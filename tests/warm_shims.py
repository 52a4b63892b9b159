"""The fairseq commands that the shell scripts start (prepare-corpus.sh's
``fairseq-preprocess`` and ``autoassist-features``, evaluate.sh's ``fairseq-generate``),
forked from a warm server instead of started cold (~6 s of imports each).

:func:`environment` puts a folder of shims first on PATH. A shim is a small interpreter
without the site packages: it hands the server its argv, environment, working directory and
stdin/stdout/stderr (the descriptors themselves, over a Unix socket), and the server forks
the command from a process that has imported torch and fairseq (:mod:`warm`).

Invariant: to the script the shim is the command. It exits with the command's code (or is
killed by the same signal); SIGINT, SIGTERM, SIGHUP and SIGQUIT sent to it reach the command's
process group; and when the shim dies (SIGKILL included) the command and its children are
killed with it, so nothing outlives the script. The command runs in a session of its own.
The server ends when the pytest process that started it does (its forkserver's end).
"""

import atexit
import json
import multiprocessing.forkserver
import os
import selectors
import signal
import shutil
import socket
import sys
import tempfile
import time

import warm
import warm_children

SHIMMED = ("fairseq-preprocess", "fairseq-train", "fairseq-generate", "autoassist-features")
SOCKET_VAR = "AUTOASSIST_WARM_SOCKET"

SHIM = r'''#!{python} -S
import json, os, signal, socket, sys
conn = socket.socket(socket.AF_UNIX)
conn.connect(os.environ[{var!r}])
request = json.dumps({{"argv": [os.path.basename(sys.argv[0]), *sys.argv[1:]],
                      "env": dict(os.environ), "cwd": os.getcwd()}}).encode()
socket.send_fds(conn, [len(request).to_bytes(8, "big") + request], [0, 1, 2])
reply = conn.makefile("rb")
pid = int(reply.readline())

def forward(signum, frame):
    try:
        os.killpg(pid, signum)
    except ProcessLookupError:
        pass

for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT):
    signal.signal(signum, forward)
code = int(reply.readline() or 1)
if code < 0:
    signal.signal(-code, signal.SIG_DFL)
    os.kill(os.getpid(), -code)
sys.exit(code)
'''

_started = {}


def _read_request(conn):
    """argv, env, cwd and the three descriptors of one shim."""
    data, fds, _, _ = socket.recv_fds(conn, 1 << 16, 3)
    size = int.from_bytes(data[:8], "big")
    data = data[8:]
    while len(data) < size:
        part = conn.recv(size - len(data))
        if not part:
            raise ConnectionError("shim closed before its request was sent")
        data += part
    return json.loads(data), fds


def _fork_command(request, fds, server_sockets):
    """Fork the command of *request* with the shim's descriptors; its pid."""
    pid = os.fork()
    if pid:
        return pid
    status = 1
    try:
        for sock in server_sockets:
            sock.close()
        os.setsid()
        for fd, target in zip(fds, (0, 1, 2)):
            os.dup2(fd, target)
            os.close(fd)
        os.environ.clear()
        os.environ.update(request["env"])
        os.chdir(request["cwd"])
        warm_children.stdin_from_fd0()
        warm_children.reset_for_child()
        warm_children.install()
        status = warm_children.exit_code(lambda: warm.main(request["argv"]))
    finally:
        warm_children.end_child(status)
    return pid  # not reached


def _serve(path):
    """The server: one forked command per shim connection, its exit code sent back."""
    warm_children.stdin_from_fd0()
    # a forkserver lives while its children hold this pipe's write end; the server must not
    # keep it alive: its end is how the server learns that the tests are gone
    forkserver = multiprocessing.forkserver._forkserver  # pylint: disable=protected-access
    if forkserver._forkserver_alive_fd is not None:  # pylint: disable=protected-access
        os.close(forkserver._forkserver_alive_fd)  # pylint: disable=protected-access
        forkserver._forkserver_alive_fd = None  # pylint: disable=protected-access
    listener = socket.socket(socket.AF_UNIX)
    listener.bind(path)
    listener.listen(16)
    selector = selectors.DefaultSelector()
    selector.register(listener, selectors.EVENT_READ)
    commands = {}  # pid -> the shim's connection
    parent = os.getppid()  # the forkserver, which ends with the pytest process
    while os.getppid() == parent:
        for key, _ in selector.select(timeout=0.1):
            if key.fileobj is listener:
                conn, _ = listener.accept()
                try:
                    request, fds = _read_request(conn)
                except (ConnectionError, ValueError, OSError):
                    conn.close()
                    continue
                pid = _fork_command(request, fds,
                                    [listener, conn, *commands.values()])
                for fd in fds:
                    os.close(fd)
                commands[pid] = conn
                conn.sendall(f"{pid}\n".encode())
                selector.register(conn, selectors.EVENT_READ, pid)
            elif not key.fileobj.recv(1):  # the shim is gone: so is its command
                try:
                    os.killpg(key.data, signal.SIGKILL)
                except ProcessLookupError:
                    pass
        while True:
            try:
                pid, status = os.waitpid(-1, os.WNOHANG)
            except ChildProcessError:
                break
            if pid == 0:
                break
            conn = commands.pop(pid, None)
            if conn is not None:
                selector.unregister(conn)
                try:
                    conn.sendall(f"{os.waitstatus_to_exitcode(status)}\n".encode())
                except OSError:
                    pass
                conn.close()
    for pid in commands:  # the tests are gone: nothing of theirs may stay
        try:
            os.killpg(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    shutil.rmtree(os.path.dirname(path), ignore_errors=True)


def environment(env, names=SHIMMED):
    """*env* with the shims of *names* first on PATH and the server's socket (the server is
    started once per process, on first use)."""
    if names not in _started:
        folder = tempfile.mkdtemp(prefix="warm-shims-")
        atexit.register(shutil.rmtree, folder, True)
        path = os.path.join(folder, "server.sock")
        for name in names:
            shim = os.path.join(folder, name)
            with open(shim, "w") as f:
                f.write(SHIM.format(python=sys.executable, var=SOCKET_VAR))
            os.chmod(shim, 0o755)
        server = warm._server().Process(target=_serve, args=(path,), daemon=True)  # pylint: disable=protected-access
        server.start()
        deadline = time.monotonic() + 60
        while not os.path.exists(path):
            if not server.is_alive() or time.monotonic() > deadline:
                raise RuntimeError(f"the warm shim server did not start (exit {server.exitcode})")
            time.sleep(0.05)
        _started[names] = (folder, path, server)
    folder, path, _ = _started[names]
    env = dict(env)
    env["PATH"] = f"{folder}{os.pathsep}{env.get('PATH', '')}"
    env[SOCKET_VAR] = path
    return env

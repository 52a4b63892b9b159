"""The children of a command that :mod:`warm` started: ``python -c CODE`` and ``python -m
MODULE`` that it starts with :mod:`subprocess` are forked from it too, instead of starting a
new interpreter that spends ~6 s importing torch and fairseq again.

The research tools start ``fairseq-train`` this way (``research.bench.runs.run_training``,
``research.noise_report``), a few times per test. Installed only in a process that
:func:`warm.run` forked (the tools themselves are unchanged, and start cold elsewhere).

Invariant: for the ``subprocess.Popen`` caller nothing differs but the start's cost. The
child has its own pid (``wait``, ``poll``, ``terminate`` and ``getrusage`` work on it),
its stdin/stdout/stderr as redirected, the ``env``, ``cwd``, new session and process group
asked for, signal handlers reset to what a new interpreter has, the caller's parent-side
pipe ends and (``close_fds``) its other pipes and sockets closed, and it exits with the
code of the program's ``SystemExit`` (1 and a traceback for an uncaught exception). Any
other command, and any call with ``shell``, ``preexec_fn``, ``user``/``group`` or
``umask``, goes to the real exec.
"""

import multiprocessing.process
import multiprocessing.util
import os
import runpy
import signal
import stat
import subprocess
import sys
import threading
import traceback

_exec_child = subprocess.Popen._execute_child


def _python_code(args, executable, shell, preexec_fn, gid, gids, uid, umask):
    """``("-c", CODE, argv)`` or ``("-m", MODULE, argv)`` for a forkable call, else None."""
    if (shell or preexec_fn is not None or gid is not None or gids is not None
            or uid is not None or umask >= 0 or isinstance(args, (str, bytes, os.PathLike))):
        return None
    args = [os.fsdecode(a) for a in args]
    if len(args) < 3 or args[1] not in ("-c", "-m") or (executable or args[0]) != sys.executable:
        return None
    return args[1], args[2], args[3:]


def _reset_signals():
    """What a new interpreter starts with: default actions, KeyboardInterrupt on SIGINT."""
    signal.set_wakeup_fd(-1)
    for sig in signal.valid_signals():
        try:
            handler = signal.getsignal(sig)
        except (OSError, ValueError):
            continue
        if callable(handler) and handler is not signal.default_int_handler:
            signal.signal(sig, signal.SIG_DFL)
    signal.signal(signal.SIGINT, signal.default_int_handler)


def _close_other_pipes(keep):
    """Close the pipes and sockets above stderr that the child must not hold (a write end
    held here would keep another reader from seeing its end of file)."""
    for name in os.listdir("/proc/self/fd"):
        fd = int(name)
        if fd <= 2 or fd in keep:
            continue
        try:
            mode = os.fstat(fd).st_mode
        except OSError:
            continue
        if stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            os.close(fd)


def _run(kind, target, argv):
    """Run the program as ``python -c``/``-m`` would; its exit code."""
    try:
        if kind == "-c":
            sys.argv = ["-c", *argv]
            sys.path.insert(0, "")
            exec(compile(target, "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
        else:
            sys.argv = [target, *argv]
            sys.path.insert(0, os.getcwd())
            runpy.run_module(target, run_name="__main__", alter_sys=True)
        return 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:  # pylint: disable=broad-except  (an interpreter prints and fails)
        traceback.print_exc()
        return 1


def _child(code, cwd, env, fds, close_fds, pass_fds, start_new_session, process_group):
    """In the forked child: the caller's requested process set-up, then the program."""
    status = 1
    try:
        p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite = fds
        for fd, target in ((p2cread, 0), (c2pwrite, 1), (errwrite, 2)):
            if fd != -1 and fd != target:
                os.dup2(fd, target)
        for fd in {p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite}:
            if fd > 2:
                os.close(fd)
        if close_fds:
            _close_other_pipes(set(pass_fds))
        if start_new_session:
            os.setsid()
        if process_group >= 0:
            os.setpgid(0, process_group)
        if cwd is not None:
            os.chdir(cwd)
        if env is not None:
            os.environ.clear()
            os.environ.update({os.fsdecode(k): os.fsdecode(v) for k, v in env.items()})
        try:  # a forked multiprocessing child reads /dev/null as sys.stdin, not fd 0
            sys.stdin = open(0, encoding=sys.stdin.encoding if sys.stdin else None, closefd=False)
        except OSError:
            sys.stdin = None
        if os.environ.get("PYTHONUNBUFFERED"):
            sys.stdout.reconfigure(write_through=True)
            sys.stderr.reconfigure(write_through=True)
        _reset_signals()
        # as multiprocessing's own forked children: none of the caller's children are ours
        multiprocessing.process._children = set()  # pylint: disable=protected-access
        multiprocessing.util._finalizer_registry.clear()  # pylint: disable=protected-access
        multiprocessing.util._run_after_forkers()  # pylint: disable=protected-access
        status = _run(*code)
        threading._shutdown()  # pylint: disable=protected-access  (non-daemon threads end)
        multiprocessing.util._exit_function()  # pylint: disable=protected-access
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(status)  # pylint: disable=protected-access


def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                   startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                   errread, errwrite, restore_signals, gid, gids, uid, umask,
                   start_new_session, process_group):
    """``subprocess.Popen._execute_child``, forking a Python program in place of its exec."""
    code = _python_code(args, executable, shell, preexec_fn, gid, gids, uid, umask)
    if code is None:
        return _exec_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                           startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
                           c2pwrite, errread, errwrite, restore_signals, gid, gids, uid,
                           umask, start_new_session, process_group)
    for stream in (sys.stdout, sys.stderr):  # or the child would write them out again
        stream.flush()
    fds = (p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
    pid = os.fork()
    if pid == 0:
        _child(code, cwd, env, fds, close_fds, pass_fds, start_new_session, process_group)
    self.pid = pid
    self._child_created = True  # pylint: disable=protected-access
    self._close_pipe_fds(*fds)  # pylint: disable=protected-access
    return None


def install():
    """Fork this process's ``python -c/-m`` children (see the module's docstring)."""
    subprocess.Popen._execute_child = _execute_child  # pylint: disable=protected-access

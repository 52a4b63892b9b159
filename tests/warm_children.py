"""The children of a command that :mod:`warm` started: ``python -c CODE`` and ``python -m
MODULE`` that it starts with :mod:`subprocess` are forked from it too, instead of starting a
new interpreter that spends ~6 s importing torch and fairseq again.

The research tools start ``fairseq-train`` this way (``research.bench.runs.run_training``,
``research.noise_report``), a few times per test. Installed only in a process that
:func:`warm.run` or :mod:`warm_shims` forked (the tools themselves are unchanged, and start
cold elsewhere).

Invariant: for the ``subprocess.Popen`` caller nothing differs but the start's cost. The
child has its own pid (``wait``, ``poll``, ``terminate`` and ``getrusage`` work on it),
its stdin/stdout/stderr as redirected, the ``env``, ``cwd``, new session and process group
asked for, signal handlers reset to what a new interpreter has, the caller's parent-side
pipe ends and (``close_fds``) its other pipes and sockets closed, and it exits with the
code of the program's ``SystemExit`` (1 and a traceback for an uncaught exception). Any
other command, and any call with ``shell``, ``preexec_fn``, ``user``/``group`` or
``umask``, goes to the real exec. A fork copies the caller's locks as they are: the research
tools start their children from their only thread, so none is held then.
"""

import multiprocessing.context
import multiprocessing.process
import multiprocessing.util
import os
import signal
import stat
import subprocess
import sys
import threading
import traceback

_exec_child = subprocess.Popen._execute_child


def _python_argv(args, executable, shell, preexec_fn, gid, gids, uid, umask):
    """The argv of a forkable call (``python -c ...`` or ``python -m ...``), else None."""
    if (shell or preexec_fn is not None or gid is not None or gids is not None
            or uid is not None or umask >= 0 or isinstance(args, (str, bytes, os.PathLike))):
        return None
    args = [os.fsdecode(a) for a in args]
    if len(args) < 3 or args[1] not in ("-c", "-m") or (executable or args[0]) != sys.executable:
        return None
    return args


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


def exit_code(program):
    """Run *program()* as an interpreter runs its main program; the exit code it ends with
    (``SystemExit``'s; 1 and the traceback for an uncaught exception)."""
    try:
        program()
        return 0
    except SystemExit as stop:
        if stop.code is None or isinstance(stop.code, int):
            return stop.code or 0
        print(stop.code, file=sys.stderr)
        return 1
    except BaseException:  # pylint: disable=broad-except  (an interpreter prints and fails)
        sys.excepthook(*sys.exc_info())  # as an interpreter does: a hook set may print it
        return 1


def stdin_from_fd0():
    """sys.stdin on fd 0, as a started interpreter has it (a forked multiprocessing child
    reads /dev/null instead)."""
    try:
        sys.stdin = open(0, encoding=sys.stdin.encoding if sys.stdin else None, closefd=False)
    except OSError:
        sys.stdin = None


def default_start_method():
    """multiprocessing's start method back to the platform's default: a forkserver's child
    has it forced to ``forkserver``, which would start each Pool or DataLoader worker from
    a new, cold server (about 5 s each)."""
    multiprocessing.context._default_context._actual_context = None  # pylint: disable=protected-access


def reset_for_child():
    """In a freshly forked child: signals as a new interpreter has them, and none of the
    parent's multiprocessing state (daemon flag, children, finalizers)."""
    _reset_signals()
    # not daemonic (a forkserver's daemonic child may not start a Pool), no parent process
    process = multiprocessing.process
    process._current_process._config.pop("daemon", None)  # pylint: disable=protected-access
    process._parent_process = None  # pylint: disable=protected-access
    process._children = set()  # pylint: disable=protected-access
    default_start_method()
    multiprocessing.util._finalizer_registry.clear()  # pylint: disable=protected-access
    multiprocessing.util._run_after_forkers()  # pylint: disable=protected-access


def end_child(status):
    """Let non-daemon threads and multiprocessing children end, flush, and exit."""
    try:
        threading._shutdown()  # pylint: disable=protected-access
        multiprocessing.util._exit_function()  # pylint: disable=protected-access
    finally:
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError, AttributeError):
                pass
        os._exit(status)  # pylint: disable=protected-access


def _child(argv, cwd, env, fds, close_fds, pass_fds, start_new_session, process_group):
    """In the forked child: the caller's requested process set-up, then the program."""
    import warm  # pylint: disable=import-outside-toplevel  (warm imports this module)

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
        stdin_from_fd0()
        if os.environ.get("PYTHONUNBUFFERED"):
            sys.stdout.reconfigure(write_through=True)
            sys.stderr.reconfigure(write_through=True)
        reset_for_child()
        status = exit_code(lambda: warm.main(argv))
    except BaseException:  # pylint: disable=broad-except  (the set-up failed: say why)
        traceback.print_exc()
    finally:
        end_child(status)


def _execute_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                   startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread, c2pwrite,
                   errread, errwrite, restore_signals, gid, gids, uid, umask,
                   start_new_session, process_group):
    """``subprocess.Popen._execute_child``, forking a Python program in place of its exec."""
    argv = _python_argv(args, executable, shell, preexec_fn, gid, gids, uid, umask)
    if argv is None:
        return _exec_child(self, args, executable, preexec_fn, close_fds, pass_fds, cwd, env,
                           startupinfo, creationflags, shell, p2cread, p2cwrite, c2pread,
                           c2pwrite, errread, errwrite, restore_signals, gid, gids, uid,
                           umask, start_new_session, process_group)
    for stream in (sys.stdout, sys.stderr):  # or the child would write them out again
        stream.flush()
    fds = (p2cread, p2cwrite, c2pread, c2pwrite, errread, errwrite)
    pid = os.fork()
    if pid == 0:
        _child(argv, cwd, env, fds, close_fds, pass_fds, start_new_session, process_group)
    self.pid = pid
    self._child_created = True  # pylint: disable=protected-access
    self._close_pipe_fds(*fds)  # pylint: disable=protected-access
    return None


def install():
    """Fork this process's ``python -c/-m`` children (see the module's docstring)."""
    subprocess.Popen._execute_child = _execute_child  # pylint: disable=protected-access

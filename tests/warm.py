"""Run the package's Python commands in processes forked from one that has already imported
torch, fairseq and scikit-learn.

Each start of ``fairseq-train``, ``fairseq-preprocess``, ``fairseq-generate`` or
``autoassist-features`` spends about 6 s importing on this project's 2-core machines
(docs/test-durations.md), more than most of the tests' runs take to train. A command run
here still gets a process of its own (fresh fairseq state, its own Assistant child, its own
exit code, stdout and stderr), forked by multiprocessing's forkserver: a single-threaded
server process that imported those modules once per pytest worker. Tests that send signals
to a command or read its process tree start it with ``subprocess`` instead.
"""

import functools
import multiprocessing as mp
import os
import runpy
import signal
import subprocess
import sys
import tempfile
from importlib.metadata import entry_points

import warm_children

# what the server imports once: what a fairseq command imports before its first step. Not
# this package: a command that leaves out --user-dir must find the task unregistered.
PRELOAD = ["torch", "sklearn.linear_model", "fairseq_cli.train", "fairseq_cli.preprocess",
           "fairseq_cli.generate"]

_context = None


def _server():
    global _context
    if _context is None:
        _context = mp.get_context("forkserver")
        _context.set_forkserver_preload(PRELOAD)
    return _context


@functools.lru_cache(maxsize=None)
def _console_script(name):
    """The entry point of an installed console script (not loaded: the test process need not
    import what the command imports), or None."""
    found = entry_points(group="console_scripts", name=name)
    return next(iter(found)) if found else None


def _child(argv, out_path, err_path, env, cwd):
    """In the forked process: the command's own session, environment, working directory,
    output files and argv, then its entry point, exiting with its code. The ``python -c/-m``
    commands that it starts are forked from it in turn (:mod:`warm_children`)."""
    warm_children.install()
    warm_children.default_start_method()
    os.setsid()
    for fd, path in ((1, out_path), (2, err_path)):
        with open(path, "w") as f:
            os.dup2(f.fileno(), fd)
    os.environ.clear()
    os.environ.update(env)
    os.chdir(cwd)
    try:
        main(argv)
    except SystemExit:
        raise
    except BaseException:  # as an interpreter ends on it: sys.excepthook prints it, exit 1
        sys.excepthook(*sys.exc_info())
        sys.exit(1)


def main(argv):
    """Run *argv*, a console script or ``python -m MODULE``/``python SCRIPT``/``python -c
    CODE``, in this process, as its interpreter would (``SystemExit`` with its code)."""
    name = os.path.basename(argv[0])
    if name.startswith("python") or argv[0] == sys.executable:
        if argv[1] == "-m":
            sys.path.insert(0, os.getcwd())  # as `python -m` puts the working directory first
            sys.argv = [argv[2], *argv[3:]]
            runpy.run_module(argv[2], run_name="__main__", alter_sys=True)
        elif argv[1] == "-c":
            sys.path.insert(0, "")
            sys.argv = ["-c", *argv[3:]]
            exec(compile(argv[2], "<string>", "exec"), {"__name__": "__main__"})  # noqa: S102
        else:
            sys.argv = argv[1:]
            sys.path.insert(0, os.path.dirname(os.path.abspath(argv[1])))
            runpy.run_path(argv[1], run_name="__main__")
        return
    sys.argv = [name, *argv[1:]]
    sys.exit(_console_script(name).load()())


def startable(cmd):
    """True when *cmd* is a console script of this environment or ``python [-m] ...``."""
    name = os.path.basename(str(cmd[0]))
    if str(cmd[0]) == sys.executable or name.startswith("python"):
        return len(cmd) > 1 and (cmd[1] == "-m" or str(cmd[1]).endswith(".py"))
    return _console_script(name) is not None


def run(cmd, timeout=600, env=None, cwd=None, capture_output=True, text=True):
    """``subprocess.run(cmd, capture_output=True, text=True, ...)`` for a command that
    :func:`startable` accepts. On timeout the command's whole session is killed and
    ``subprocess.TimeoutExpired`` raised."""
    assert capture_output and text, "output is always captured, as text"
    assert startable(cmd), f"not a console script or python command: {cmd[0]}"
    cmd = [str(c) for c in cmd]
    with tempfile.TemporaryDirectory(prefix="warm-") as tmp:
        out, err = os.path.join(tmp, "out"), os.path.join(tmp, "err")
        proc = _server().Process(target=_child, args=(
            cmd, out, err, dict(os.environ if env is None else env), cwd or os.getcwd()))
        proc.start()
        try:
            proc.join(timeout)
            timed_out = proc.exitcode is None
        finally:
            # timed out, or the test was interrupted (Ctrl-C does not reach the command's
            # own session): the command and its children end with it
            if proc.exitcode is None:
                try:
                    os.killpg(proc.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                proc.join()
        if timed_out:
            raise subprocess.TimeoutExpired(cmd, timeout)
        with open(out) as f_out, open(err) as f_err:
            return subprocess.CompletedProcess(cmd, proc.exitcode, f_out.read(), f_err.read())


def run_command(cmd, timeout=600, **kwargs):
    """Any command with its output captured as text: forked here when :func:`startable`,
    else with ``subprocess.run``."""
    cmd = [str(c) for c in cmd]
    if startable(cmd):
        return run(cmd, timeout=timeout, **kwargs)
    return subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, **kwargs)

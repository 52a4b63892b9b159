"""tests/warm.py, the forked start of the suite's commands: each command still gets a process
of its own, with its own exit code, output, environment and working directory, and a
timeout leaves nothing running."""

import json
import os
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import warm
import warm_shims
from utils import running


def test_a_python_script_runs_in_its_own_process(tmp_path):
    script = tmp_path / "tool.py"
    script.write_text("import os, sys\n"
                      "print(os.getcwd(), os.environ.get('WARM_TEST'), *sys.argv[1:], os.getpid())\n"
                      "print('to stderr', file=sys.stderr)\n"
                      "sys.exit(3)\n")
    proc = warm.run([sys.executable, script, "a", "b"], cwd=tmp_path, env={"WARM_TEST": "set"})
    assert proc.returncode == 3 and proc.stderr == "to stderr\n"
    cwd, value, a, b, pid = proc.stdout.split()
    assert (cwd, value, a, b) == (str(tmp_path), "set", "a", "b") and int(pid) != os.getpid()
    again = warm.run([sys.executable, script], env={})
    assert again.stdout.split()[1] == "None"  # the environment given, not the test's
    assert again.stdout.split()[-1] != pid  # a new process each time


def test_an_uncaught_exception_fails_the_command(tmp_path):
    script = tmp_path / "fails.py"
    script.write_text("raise ValueError('named problem')\n")
    proc = warm.run([sys.executable, script])
    assert proc.returncode == 1 and "ValueError: named problem" in proc.stderr


def test_fairseq_commands_start_without_this_package(tmp_path):
    """The server imports fairseq but not the plugin: without --user-dir the task is unknown,
    as in a fresh fairseq-train."""
    proc = warm.run(["fairseq-train", tmp_path, "--task", "autoassist_translation",
                     "--arch", "transformer", "--cpu", "--save-dir", tmp_path])
    assert proc.returncode != 0 and "invalid choice: 'autoassist_translation'" in proc.stderr


def test_a_timeout_kills_the_command(tmp_path):
    script = tmp_path / "hangs.py"
    pid_file = tmp_path / "pid"
    script.write_text(f"import os, time\nopen({str(pid_file)!r}, 'w').write(str(os.getpid()))\n"
                      "time.sleep(600)\n")
    with pytest.raises(subprocess.TimeoutExpired):
        warm.run([sys.executable, script], timeout=3)
    assert not running(int(pid_file.read_text()))


def test_an_interrupted_test_leaves_nothing_running(tmp_path):
    """An exception in the test while the command runs (Ctrl-C's KeyboardInterrupt, here
    one raised by an alarm) ends the command and its children."""
    script = tmp_path / "hangs.py"
    pid_file = tmp_path / "pid"
    script.write_text("import os, subprocess, sys, time\n"
                      "child = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)'])\n"
                      f"open({str(pid_file)!r}, 'w').write(f'{{os.getpid()}} {{child.pid}}')\n"
                      "time.sleep(600)\n")

    def interrupt(signum, frame):
        raise KeyboardInterrupt

    def interrupt_once_started():  # once the command and its child run (60 s: a hang guard)
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                pid_file.exists() and len(pid_file.read_text().split()) == 2):
            time.sleep(0.01)
        os.kill(os.getpid(), signal.SIGALRM)  # handled in the main thread, inside warm.run

    previous = signal.signal(signal.SIGALRM, interrupt)
    threading.Thread(target=interrupt_once_started, daemon=True).start()
    try:
        with pytest.raises(KeyboardInterrupt):
            warm.run([sys.executable, script], timeout=120)
    finally:
        signal.signal(signal.SIGALRM, previous)
    pids = [int(p) for p in pid_file.read_text().split()]
    deadline = time.monotonic() + 60  # a hang guard
    while any(running(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not any(running(p) for p in pids)


def test_other_commands_are_refused_here_and_run_with_subprocess():
    assert not warm.startable(["bash", "-c", "true"])
    assert not warm.startable([sys.executable, "-c", "pass"])
    with pytest.raises(AssertionError, match="not a console script"):
        warm.run(["bash", "-c", "true"])
    proc = warm.run_command(["bash", "-c", "echo started by subprocess; exit 4"])
    assert proc.returncode == 4 and proc.stdout == "started by subprocess\n"


CHILDREN = r'''
import json, os, subprocess, sys
child = [sys.executable, "-c"]
import multiprocessing
out = {"pid": os.getpid(), "start_method": multiprocessing.get_start_method()}
# forked: torch is already imported; its own pid, this process as its parent; exit code kept
p = subprocess.run(child + ["import multiprocessing, os, sys; print('torch' in sys.modules, "
                            "os.getppid(), multiprocessing.get_start_method()); sys.exit(5)"],
                   capture_output=True, text=True)
out["forked"], out["code"] = p.stdout.split(), p.returncode
# its environment, working directory, argv and stdin as asked; stderr apart from stdout
p = subprocess.run(child + ["import os, sys; print(os.environ.get('W'), os.getcwd(), sys.argv, "
                            "sys.stdin.read()); print('err', file=sys.stderr)", "a"],
                   input="fed", env={"W": "set"}, cwd=sys.argv[1], capture_output=True, text=True)
out["setup"], out["stderr"] = p.stdout.split(), p.stderr
# -m: the module as __main__; an uncaught exception: 1 and the traceback
p = subprocess.run([sys.executable, "-m", "json.tool"], input='{"a": 1}', capture_output=True,
                   text=True)
out["module"] = json.loads(p.stdout)
p = subprocess.run(child + ["raise ValueError('named')"], capture_output=True, text=True)
out["raised"] = [p.returncode, "ValueError: named" in p.stderr]
# a new session when asked; terminate() reaches it; a pipe of ours is not held by the child
r, w = os.pipe()
p = subprocess.Popen(child + [f"import os, time; print(os.getsid(0), os.path.exists('/proc/self/fd/{w}'), "
                              "flush=True); time.sleep(60)"],
                     stdout=subprocess.PIPE, text=True, start_new_session=True)
sid, held = p.stdout.readline().split()
out["session"] = [int(sid) == p.pid, held]
p.terminate()
out["terminated"] = p.wait(timeout=10)
# anything else execs as before
out["shell"] = subprocess.run("echo $0", shell=True, capture_output=True, text=True).stdout.strip()
print(json.dumps(out))
'''


def test_python_children_of_a_command_are_forked_too(tmp_path):
    """warm_children: a command's own `python -c/-m` children skip the imports too, and keep
    what a started interpreter gets (see the module)."""
    script = tmp_path / "parent.py"
    script.write_text(CHILDREN)
    proc = warm.run([sys.executable, script, tmp_path], timeout=60)
    assert proc.returncode == 0, proc.stderr
    out = json.loads(proc.stdout)
    # multiprocessing starts processes as in a started interpreter (not from a new forkserver)
    cold = subprocess.run([sys.executable, "-c", "import multiprocessing as m; print(m.get_start_method())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert out["forked"] == ["True", str(out["pid"]), cold] and out["code"] == 5
    assert out["start_method"] == cold
    assert out["setup"] == ["set", str(tmp_path), "['-c',", "'a']", "fed"]
    assert out["stderr"] == "err\n"
    assert out["module"] == {"a": 1}
    assert out["raised"] == [1, True]
    assert out["session"] == [True, "False"]
    assert out["terminated"] == -signal.SIGTERM
    assert out["shell"] == "/bin/sh"


def test_shell_scripts_start_the_shimmed_commands_forked(tmp_path):
    """warm_shims: a script's command runs forked from the warm server, with the script's
    stdin, stdout, stderr, environment and directory, and ends with the script's shim."""
    env = warm_shims.environment(dict(os.environ, W="set"), names=("python",))
    script = ("cd \"$1\"; echo fed | python -c 'import multiprocessing, os, sys; "
              "print(\"torch\" in sys.modules, os.getppid() != int(sys.argv[1]), "
              "multiprocessing.get_start_method(), "
              "os.environ[\"W\"], os.getcwd(), sys.stdin.read().strip()); "
              "print(\"err\", file=sys.stderr); sys.exit(3)' $$; echo rc=$?; "
              "python -c 'import os, signal; os.kill(os.getpid(), signal.SIGTERM)'; echo rc=$?")
    proc = subprocess.run(["bash", "-c", script, "bash", tmp_path], env=env,
                          capture_output=True, text=True, timeout=60)
    cold = subprocess.run([sys.executable, "-c", "import multiprocessing as m; print(m.get_start_method())"],
                          capture_output=True, text=True, check=True).stdout.strip()
    assert proc.stdout.split("\n")[:3] == [f"True True {cold} set {tmp_path} fed", "rc=3",
                                           "rc=143"]
    assert proc.stderr.splitlines()[0] == "err"  # then bash reports the SIGTERM
    # a signal to the shim reaches the command; a killed shim takes the command with it
    pid_file = tmp_path / "pid"
    for signum, code in ((signal.SIGTERM, -signal.SIGTERM), (signal.SIGKILL, -signal.SIGKILL)):
        pid_file.unlink(missing_ok=True)
        shim = subprocess.Popen(
            ["python", "-c", f"import os, time; open({str(pid_file)!r}, 'w').write(str(os.getpid())); "
             "time.sleep(600)"], env=env)
        deadline = time.monotonic() + 30
        while not pid_file.exists() or not pid_file.read_text():
            assert time.monotonic() < deadline and shim.poll() is None
            time.sleep(0.05)
        command = int(pid_file.read_text())
        assert command != shim.pid and running(command)
        shim.send_signal(signum)
        assert shim.wait(timeout=10) == code
        deadline = time.monotonic() + 60  # a hang guard
        while running(command) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not running(command)


def test_the_shim_server_ends_with_the_process_that_started_it(tmp_path):
    """No server outlives its pytest process, even one that ends without clean-up."""
    script = tmp_path / "starts.py"
    script.write_text("import os, sys\n"
                      f"sys.path.insert(0, {str(Path(__file__).parent)!r})\n"
                      "import warm_shims\n"
                      "if __name__ == '__main__':\n"
                      "    env = warm_shims.environment(dict(os.environ))\n"
                      "    folder, _, server = warm_shims._started[warm_shims.SHIMMED]\n"
                      "    print(server.pid, folder, flush=True)\n"
                      "    os._exit(0)\n")
    proc = subprocess.run([sys.executable, script], capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    pid, folder = proc.stdout.split()
    deadline = time.monotonic() + 60  # a hang guard
    while running(int(pid)) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not running(int(pid)) and not os.path.exists(folder)  # its shims removed too

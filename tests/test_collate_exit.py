"""The interpreter's exit never finds the batch buffer's thread inside torch (data/collate.py).

A daemon thread ended inside a torch operation at interpreter exit aborts the process
("terminate called without an active exception"): seen on a GPU after a killed Assistant,
reproduced here by tests/collation_at_exit.py, a run that ends while the buffer's thread
collates. Without the guard it aborts in most runs (checked by turning the guard off)."""

import os
import subprocess
import sys
import threading
import time

from utils import REPO

from autoassist_fairseq.data.collate import ExitGuard


def test_a_run_ending_during_collation_exits_cleanly():
    env = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1")
    runs = [subprocess.Popen([sys.executable, str(REPO / "tests" / "collation_at_exit.py")],
                             env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
            for _ in range(2)]  # at once: without the guard each aborts in most runs
    for proc in runs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0 and "trained" in out, err[-2000:]
        assert "terminate called" not in err


def test_exit_guard_waits_for_open_sections_and_refuses_new_ones():
    guard = ExitGuard()
    assert guard.enter()
    closer = threading.Thread(target=guard.close, kwargs={"timeout": 60})
    closer.start()
    deadline = time.monotonic() + 60  # a hang guard
    while not guard._closing and time.monotonic() < deadline:
        time.sleep(0.01)
    assert guard._closing and not guard.enter()  # closing: no section opens
    assert closer.is_alive()  # close waits for the open section (for up to 60 s) ...
    guard.leave()
    closer.join(60)
    assert not closer.is_alive()  # ... and returns once it left
    assert not guard.enter()  # and no section opens after it
    stuck = ExitGuard()
    assert stuck.enter()
    closer = threading.Thread(target=stuck.close, kwargs={"timeout": 0.2})
    closer.start()  # a section that never leaves delays the exit by the timeout only
    closer.join(60)
    assert not closer.is_alive() and stuck._open == 1

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
    left = []

    def finish():
        time.sleep(0.3)
        left.append(time.monotonic())
        guard.leave()

    threading.Thread(target=finish).start()
    guard.close(timeout=5)
    closed = time.monotonic()
    assert left and closed >= left[0]  # close waited for the open section
    assert not guard.enter()  # and no section opens after it
    stuck = ExitGuard()
    assert stuck.enter()
    t0 = time.monotonic()
    stuck.close(timeout=0.2)  # a section that never leaves delays the exit by the timeout only
    assert time.monotonic() - t0 < 2

"""Logs every Python process of a run (put this folder on PYTHONPATH and name the log in
AUTOASSIST_START_LOG): at exit, one line of start time, seconds alive, pid, parent pid, the
test that was running (pytest's PYTEST_CURRENT_TEST, which child processes inherit) and the
command line. Read it with ``python tests/process_starts.py LOG``. Processes that end by a
signal or os._exit (forked children) write nothing."""

import atexit
import os
import sys
import time

_started = time.time()


def _log():
    with open(os.environ["AUTOASSIST_START_LOG"], "a") as f:
        f.write("\t".join([f"{_started:.2f}", f"{time.time() - _started:.2f}", str(os.getpid()),
                           str(os.getppid()), os.environ.get("PYTEST_CURRENT_TEST", "-"),
                           " ".join(sys.argv)[:300]]) + "\n")


if os.environ.get("AUTOASSIST_START_LOG"):
    atexit.register(_log)

#!/usr/bin/env python
"""Run fairseq-train as N CPU workers on this machine (gloo), one Assistant each.

``torchrun`` cannot start fairseq on CPU (fairseq divides by torch.cuda.device_count()),
so this starts the N ranks itself, with fairseq's own --distributed-no-spawn flags:

    python scripts/launch_cpu_workers.py 2 -- fairseq-train DATA --task autoassist_translation ...

Every worker's output goes to this terminal prefixed with its rank. If a worker fails,
the others are stopped; Ctrl-C, SIGTERM or a closed terminal (SIGHUP) stops all of them,
and a launcher killed outright takes them with it (Linux). The exit code is the first
failing worker's.
"""

import argparse
import os
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _relay(rank, stream):
    for line in iter(stream.readline, ""):
        sys.stdout.write(f"[rank {rank}] {line}")
        sys.stdout.flush()


# looked up before any worker starts: the forked child only calls it
_PRCTL = __import__("ctypes").CDLL(None).prctl if sys.platform == "linux" else None


def _die_with_launcher():
    """In each worker before it execs (Linux): SIGTERM when the launcher dies, even by
    SIGKILL. The workers run in sessions of their own, so nothing else would reach them."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def _reap(procs, grace=10):
    """Wait for the workers to end, at most *grace* seconds in all; then SIGKILL the rest.
    A worker's group may outlive it (its data loaders, when it died by SIGKILL): what is
    left of every group is ended too."""
    deadline = time.monotonic() + grace
    for p in procs:
        try:
            p.wait(max(0.1, deadline - time.monotonic()))
        except subprocess.TimeoutExpired:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    for p in procs:
        try:
            os.killpg(p.pid, signal.SIGKILL)
        except ProcessLookupError:  # the group has ended with its worker
            pass


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python scripts/launch_cpu_workers.py 2 -- fairseq-train data-bin \\\n"
               "      --user-dir autoassist_fairseq --task autoassist_translation "
               "--arch transformer --max-tokens 4096")
    parser.add_argument("workers", type=int, help="number of CPU workers (ranks) to start")
    parser.add_argument("command", nargs=argparse.REMAINDER,
                        help="after --, the fairseq-train command and its flags, without "
                             "distributed flags (these are added per rank)")
    args = parser.parse_args(argv)
    command = args.command[1:] if args.command[:1] == ["--"] else args.command
    if args.workers < 1 or not command:
        parser.error("give a number of workers >= 1 and, after --, the fairseq-train command")
    if shutil.which(command[0]) is None:
        print(f"ERROR: command not found: {command[0]}"
              + (" (not an executable file)" if os.sep in command[0] else " (not on PATH)")
              + ": activate the environment that installs it (e.g. source .venv/bin/activate) "
                "or check its spelling; no worker was started", file=sys.stderr)
        return 2
    port = free_port()
    procs = []

    def stop_all(signum=signal.SIGTERM, frame=None):
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, signum)

    # before the first start: a Ctrl-C while workers start reaches those already started
    signal.signal(signal.SIGINT, lambda s, f: stop_all(signal.SIGINT))
    signal.signal(signal.SIGTERM, lambda s, f: stop_all(signal.SIGTERM))
    signal.signal(signal.SIGHUP, lambda s, f: stop_all(signal.SIGTERM))  # a closed terminal
    for rank in range(args.workers):
        cmd = command + [
            "--cpu", "--distributed-backend", "gloo",
            "--distributed-world-size", str(args.workers), "--distributed-rank", str(rank),
            "--distributed-init-method", f"tcp://127.0.0.1:{port}",
            "--distributed-no-spawn", "--device-id", "0"]
        if "--ddp-backend" not in command:
            # torch's DistributedDataParallel refuses CPU modules with device ids, which
            # fairseq always passes; fairseq's own legacy_ddp all-reduces on CPU
            cmd += ["--ddp-backend", "legacy_ddp"]
        try:
            proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                    text=True, start_new_session=True,
                                    preexec_fn=_die_with_launcher)
        except OSError as e:  # not executable, out of processes, ...: none may stay behind
            hint = "; activate the environment that installs it (e.g. source " \
                ".venv/bin/activate)" if isinstance(e, (FileNotFoundError, PermissionError)) else ""
            print(f"ERROR: cannot start rank {rank} ({command[0]}): {e}{hint}"
                  + (f"; stopping the {len(procs)} started before it" if procs else ""),
                  file=sys.stderr, flush=True)
            stop_all()
            _reap(procs)
            return 2
        threading.Thread(target=_relay, args=(rank, proc.stdout), daemon=True).start()
        procs.append(proc)
    code = 0
    try:
        while any(p.poll() is None for p in procs):
            failed = [p for p in procs if p.poll() not in (None, 0)]
            if failed and code == 0:
                code = failed[0].returncode
                print(f"[launcher] rank {procs.index(failed[0])} exited with {code}: "
                      "stopping the others", flush=True)
                stop_all()
            time.sleep(0.2)
    finally:
        _reap(procs)
    code = code or next((p.returncode for p in procs if p.returncode), 0)
    return code if code >= 0 else 128 - code  # a worker ended by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    sys.exit(main())

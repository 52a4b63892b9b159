#!/usr/bin/env python
"""Run fairseq-train as N CPU workers on this machine (gloo), one Assistant each.

``torchrun`` cannot start fairseq on CPU (fairseq divides by torch.cuda.device_count()),
so this starts the N ranks itself, with fairseq's own --distributed-no-spawn flags:

    python scripts/launch_cpu_workers.py 2 -- fairseq-train DATA --task autoassist_translation ...

Every worker's output goes to this terminal prefixed with its rank. If a worker fails or
is killed (kill -9, the OOM killer), the others are stopped at once (gloo would otherwise
leave them to an error of their own, or a wait, in the next collective), and the last line
names the rank that ended first and how: its exit code or signal. Ctrl-C, SIGTERM or a
closed terminal (SIGHUP) stops all of them, and a launcher killed outright takes them with
it (Linux). The exit code is the first failing worker's (128 + N for a signal N).
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


def describe_end(returncode) -> str:
    """How a worker ended, for the launcher's messages: ``exited with code 1``, ``was killed
    by SIGKILL (...)``."""
    if returncode >= 0:
        return f"exited with code {returncode}"
    try:
        name = signal.Signals(-returncode).name
    except ValueError:
        name = f"signal {-returncode}"
    hint = " (kill -9, or the kernel's out-of-memory killer: see dmesg)" \
        if returncode == -signal.SIGKILL else ""
    return f"was killed by {name}{hint}"


def first_failure(failed):
    """The worker to blame among *failed*, ``(rank, returncode)`` pairs of the workers seen
    ended with an error at one look. A worker killed by a signal comes first: when one rank
    dies, the others fail in their next collective (gloo: 'Connection closed by peer'),
    often before the launcher's next look, so the lowest rank with an error is not the
    cause. Then the lowest rank."""
    return min(failed, key=lambda f: (f[1] >= 0, f[0]))


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
    procs, relays = [], []
    asked = []  # the signals the launcher received: its workers' ends are then no failure

    def stop_all(signum=signal.SIGTERM, frame=None):
        for p in procs:
            if p.poll() is None:
                try:
                    os.killpg(p.pid, signum)
                except ProcessLookupError:  # ended (and reaped) since the poll
                    pass

    def on_signal(received, sent):
        asked.append(received)
        stop_all(sent)

    # before the first start: a Ctrl-C while workers start reaches those already started
    signal.signal(signal.SIGINT, lambda s, f: on_signal(s, signal.SIGINT))
    signal.signal(signal.SIGTERM, lambda s, f: on_signal(s, signal.SIGTERM))
    signal.signal(signal.SIGHUP, lambda s, f: on_signal(s, signal.SIGTERM))  # a closed terminal
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
        relays.append(threading.Thread(target=_relay, args=(rank, proc.stdout), daemon=True))
        relays[-1].start()
        procs.append(proc)
    cause = None  # (rank, returncode) of the worker that ended first with an error
    stopped = []  # the ranks the launcher stopped after it
    try:
        while True:
            codes = [p.poll() for p in procs]  # every worker's, at one look
            failed = [(rank, c) for rank, c in enumerate(codes) if c not in (None, 0)]
            if failed and cause is None and not asked:
                cause = first_failure(failed)
                stopped = [rank for rank, c in enumerate(codes) if c is None]
                if stopped:
                    print(f"[launcher] rank {cause[0]} {describe_end(cause[1])}: stopping "
                          f"rank{'s' * (len(stopped) > 1)} {', '.join(map(str, stopped))}",
                          flush=True)
                    stop_all()
            if None not in codes:
                break
            time.sleep(0.2)
    finally:
        _reap(procs)
        for thread in relays:  # their last lines before the launcher's own
            thread.join(2)
    if asked:
        print(f"[launcher] {signal.Signals(asked[0]).name} received: every worker was "
              "stopped", flush=True)
        code = next((p.returncode for p in procs if p.returncode), 0)
    elif cause is not None:
        # the last line: the other workers' own errors (gloo's 'Connection closed by peer'
        # in a collective that lost its peer) come before it, and follow from it
        by_launcher = (-signal.SIGTERM, -signal.SIGKILL)
        rest = [f"rank {rank} " + ("was stopped by the launcher" if rank in stopped
                                   and p.returncode in by_launcher
                                   else describe_end(p.returncode))
                for rank, p in enumerate(procs) if rank != cause[0]]
        errors = any(p.returncode > 0 for rank, p in enumerate(procs) if rank != cause[0])
        print(f"[launcher] the run failed: rank {cause[0]} {describe_end(cause[1])}"
              + (f"; after it, {', '.join(rest)}" if rest else "")
              + (f" (an error of theirs above, e.g. gloo's 'Connection closed by peer' in a "
                 f"collective, follows from rank {cause[0]}'s end)" if errors else ""),
              flush=True)
        code = cause[1]
    else:
        code = 0
    return code if code >= 0 else 128 - code  # a worker ended by signal N: 128 + N, as a shell says


if __name__ == "__main__":
    sys.exit(main())

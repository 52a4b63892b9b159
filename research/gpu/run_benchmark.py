#!/usr/bin/env python3
"""Run scripts/benchmark.py or scripts/benchmark_overhead.py on a GPU.

    python scripts/gpu/run_benchmark.py {benchmark,overhead} [--gpu] ARGS...

Both scripts add ``--cpu`` to every run they start (their figures so far come from CPU
machines). With ``--gpu`` this wrapper leaves that flag out, so that the runs train on the
GPU; the config named by ``--config`` must then not hold ``--cpu`` either. Without
``--gpu`` the scripts run as they are. ARGS are the script's own (see its --help).
"""

import sys
from pathlib import Path

SCRIPTS = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(SCRIPTS))

import benchmark  # noqa: E402


def main(argv):
    if not argv or argv[0] not in ("benchmark", "overhead"):
        print(__doc__.strip())
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    which, args = argv[0], argv[1:]
    if "--gpu" in args:
        args.remove("--gpu")
        if ("--cpu", None) not in benchmark.FORCED:
            sys.exit("run_benchmark.py: scripts/benchmark.py no longer forces --cpu as "
                     "expected (FORCED changed): update this wrapper")
        benchmark.FORCED = [f for f in benchmark.FORCED if f[0] != "--cpu"]
    if which == "benchmark":
        sys.argv = [str(SCRIPTS / "benchmark.py")] + args
        benchmark.main(args)
        return 0
    import benchmark_overhead  # shares the patched benchmark module

    sys.argv = [str(SCRIPTS / "benchmark_overhead.py")] + args
    benchmark_overhead.main(args)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except benchmark.BenchmarkError as err:
        sys.exit(f"run_benchmark.py: error: {err}")

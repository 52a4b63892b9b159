#!/usr/bin/env python3
"""Run research.bench, research.benchmark_overhead or research.fixed_budget on a GPU.

    python -m research.gpu.run_benchmark {benchmark,overhead,fixed_budget} [--gpu] ARGS...

They add ``--cpu`` to every run they start (their figures so far come from CPU
machines). With ``--gpu`` this wrapper leaves that flag out, so that the runs train on the
GPU, and a ``--cpu`` in the config named by ``--config`` is dropped too. Without
``--gpu`` they run as they are. ARGS are their own (see their --help).
"""

import signal
import sys

from research.bench import BenchmarkError, flags


def main(argv):
    if not argv or argv[0] not in ("benchmark", "overhead", "fixed_budget"):
        print(__doc__.strip())
        return 0 if argv and argv[0] in ("-h", "--help") else 2
    which, args = argv[0], argv[1:]
    if "--gpu" in args:
        args.remove("--gpu")
        if ("--cpu", None) not in flags.FORCED:
            sys.exit("run_benchmark: research.bench.flags no longer forces --cpu as "
                     "expected (FORCED changed): update this wrapper")
        # build_run_args reads the module's FORCED: both tools see the change
        flags.FORCED = [f for f in flags.FORCED if f[0] != "--cpu"]
    if which == "benchmark":
        from research.bench.cli import main as bench_main

        sys.argv = ["python -m research.bench"] + args
        bench_main(args)
        return 0
    if which == "fixed_budget":
        from research.fixed_budget import _terminate, main as fixed_budget_main

        signal.signal(signal.SIGTERM, _terminate)  # unwinds run_training, which stops its child
        sys.argv = ["python -m research.fixed_budget"] + args
        fixed_budget_main(args)
        return 0
    from research.benchmark_overhead import main as overhead_main

    sys.argv = ["python -m research.benchmark_overhead"] + args
    overhead_main(args)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except BenchmarkError as err:
        sys.exit(f"run_benchmark: error: {err}")

#!/usr/bin/env python3
"""The steps of research/gpu/check.sh: each prints PASS, FAIL or SKIP with its figures, and
all go into one JSON summary (OUT/gpu-check.json; the runs' logs: OUT/gpu-check.log).

    python -m research.gpu.check_steps --data DIR --out DIR --work DIR
        [--cpu-dry-run] [--steps all|core|perf|NAME,...] [--time-limit S] [--cpp-traces]

Steps (``core``: the first eight; ``perf``: the last two):
  env            torch, CUDA, the GPU and its driver, fairseq with its compiled extensions
  train_fp32     fairseq-train --task autoassist_translation, fp32: losses reach the
  train_fp16     Assistant (aa_acc logged), skipping after warm-up (aa_lambda > 0,
  train_amp      aa_accept_sent < 1, and a whole data pass in the trace with fewer pairs
                 than the corpus), the Boss's wait for batches as a share of the run
                 (at most 5%); the dry run uses the random rule (lambda_k stays 0 in its
                 few updates) and checks no wait share
  distributed    the same in a process group of one rank (--distributed-backend nccl;
                 gloo on CPU) without fairseq's spawn
  spawn          the same through fairseq's own one-process-per-GPU spawn
  kill_error     SIGKILL to the Assistant under --assistant-fallback error: the run stops
                 within seconds naming the cause, no process left behind
  kill_uniform   the same under uniform: the run continues and ends normally
  overhead       research/benchmark_overhead.py: the Boss's seconds per million tokens,
                 --task translation against autoassist with lambda_max 0 (goal: ratio 1.02)
  equal_compute  research/bench: baseline, the default and the random control at
                 the baseline's updates; valid loss and Boss tokens per second per arm

--cpu-dry-run: the same on CPU with tiny sizes; CUDA-only steps SKIP with the reason.
"""

import argparse
import json
import os
import platform
import re
import shlex
import subprocess
import sys
import time
from pathlib import Path

from research.bench.flags import FORCED, drop_flags, find_config, read_args_file
from research.gpu.check_runs import Run, fairseq_train, kill_assistant_during, train_checks

REPO = Path(__file__).resolve().parents[2]
STEPS = ["env", "train_fp32", "train_fp16", "train_amp", "distributed", "spawn",
         "kill_error", "kill_uniform", "overhead", "equal_compute"]
GROUPS = {"all": STEPS, "core": STEPS[:8], "perf": STEPS[8:]}
# sizes: on a GPU each group ends inside one 10-minute command of the device tool
PROFILES = {
    "gpu": {"config": "multi30k/transformer_small", "updates": 300, "log_interval": 10,
            "extra": [], "overhead_updates": 300, "repeats": 3, "equal_updates": 1500,
            "validations": 5, "wait_share_max": 0.05, "rule": []},
    # too few updates for lambda_k to leave 0: the random rule shows skipping in the trace
    "cpu": {"config": "demo/transformer_tiny", "updates": 40, "log_interval": 5,
            "extra": ["--assistant-warmup", "4", "--assistant-window", "64",
                      "--assistant-boss-queue-size", "1", "--max-tokens", "1024"],
            "rule": ["--assistant-rule", "random", "--assistant-random-rates", "1.0,0.5"],
            "overhead_updates": 10, "repeats": 1, "equal_updates": 30, "validations": 1,
            "wait_share_max": None},
}
CUDA_ONLY = "--fp16 and --amp need CUDA (fairseq's FP16Optimizer, torch.cuda.amp)"
NO_SPAWN_ON_CPU = ("fairseq spawns min(CUDA devices, world size) processes: none on a CPU "
                   "machine (README, Known limitations)")


def write_config(ctx):
    """The profile's config without --cpu (on a GPU) and the flags each step sets itself;
    fairseq's log format as every research run's (the records check_runs reads)."""
    tokens = read_args_file(find_config(ctx["profile"]["config"]))
    drop = {"--max-epoch", "--keep-last-epochs", "--no-epoch-checkpoints", "--log-interval",
            "--log-format"}
    if not ctx["dry"]:
        drop.add("--cpu")
    tokens = drop_flags(tokens, drop)
    tokens += ["--log-format", dict(FORCED)["--log-format"],
               "--log-interval", str(ctx["profile"]["log_interval"])] + ctx["profile"]["extra"]
    path = ctx["work"] / "check.args"
    path.write_text("# fairseq-train flags of the check, written by research/gpu/check_steps.py\n"
                    + shlex.join(tokens) + "\n")
    return tokens, path


def step_env(ctx):
    import torch
    import fairseq
    from fairseq.data import data_utils_fast  # noqa: F401  (batching needs it)

    fig = {"torch": torch.__version__, "cuda": torch.version.cuda,
           "cuda_available": torch.cuda.is_available(), "fairseq": fairseq.__version__,
           "python": platform.python_version(), "cpu_count": os.cpu_count()}
    if torch.cuda.is_available():
        fig["gpu"] = torch.cuda.get_device_name(0)
        try:
            fig["driver"] = subprocess.run(
                ["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                capture_output=True, text=True, timeout=30).stdout.strip() or None
        except (OSError, subprocess.TimeoutExpired):
            fig["driver"] = None
    ctx["summary"]["device"] = fig
    if not ctx["dry"] and not torch.cuda.is_available():
        return "FAIL", "torch sees no CUDA device (use --cpu-dry-run on a CPU machine)", fig
    return "PASS", "", fig


def step_train(ctx, name, flags):
    if ctx["dry"] and flags:
        return "SKIP", CUDA_ONLY, {}
    trace = ctx["work"] / name / "trace"
    run = fairseq_train(ctx, name, ["--max-update", str(ctx["profile"]["updates"]),
                                    "--assistant-trace-dir", str(trace)]
                        + ctx["profile"]["rule"] + flags)
    return train_checks(ctx, run, trace)


def step_distributed(ctx, name, spawn):
    if ctx["dry"] and spawn:
        return "SKIP", NO_SPAWN_ON_CPU, {}
    backend = "gloo" if ctx["dry"] else "nccl"
    trace = ctx["work"] / name / "trace"
    flags = ["--max-update", str(ctx["profile"]["updates"]), "--assistant-trace-dir", str(trace),
             "--distributed-world-size", "1", "--distributed-backend", backend,
             "--distributed-init-method", f"tcp://127.0.0.1:{free_port()}"]
    flags += ctx["profile"]["rule"]
    if not spawn:
        flags += ["--distributed-no-spawn", "--distributed-rank", "0"]
    run = fairseq_train(ctx, name, flags)
    status, reason, fig = train_checks(ctx, run, trace)
    fig["backend"] = backend
    if status == "PASS" and not re.search(r"distributed init \(rank 0\)", run.output):
        status, reason = "FAIL", "no 'distributed init (rank 0)' line: no process group was set up"
    return status, reason, fig


def step_kill(ctx, fallback):
    updates = 100000 if fallback == "error" else ctx["profile"]["updates"]
    return kill_assistant_during(ctx, f"kill_{fallback}", [
        "--max-update", str(updates), "--assistant-fallback", fallback])


def step_overhead(ctx):
    out = ctx["out"] / "overhead.json"
    cmd = [sys.executable, "-m", "research.gpu.run_benchmark", "overhead",
           "--data", str(ctx["data"]), "--config", str(ctx["config_path"]), "--out", str(out),
           "--updates", str(ctx["profile"]["overhead_updates"]),
           "--repeats", str(ctx["profile"]["repeats"]), "--work", str(ctx["work"] / "overhead")]
    run = Run.start(ctx, "overhead", cmd + ([] if ctx["dry"] else ["--gpu"])).finish(ctx)
    if run.returncode != 0 or not out.exists():
        return "FAIL", f"research.benchmark_overhead exited with {run.returncode}", {}
    res = json.loads(out.read_text())
    fig = {"seconds_per_mtok": res["seconds_per_mtok"], "ratio": res["ratio"],
           "ratio_interval95": res["ratio_interval95"], "goal": res["goal"]}
    if not ctx["dry"] and res["ratio"] > 1.02:
        return "FAIL", f"ratio {res['ratio']:.4f} over the goal 1.02", fig
    return "PASS", "" if not ctx["dry"] else "figures of a dry run mean nothing", fig


def step_equal_compute(ctx):
    bench = ctx["work"] / "equal-compute"
    cmd = [sys.executable, "-m", "research.gpu.run_benchmark", "benchmark",
           "--data", str(ctx["data"]), "--config", str(ctx["config_path"]), "--out", str(bench),
           "--max-update", str(ctx["profile"]["equal_updates"]), "--seed", "1", "--skip-bleu",
           "--validations", str(ctx["profile"]["validations"])]
    run = Run.start(ctx, "equal_compute", cmd + ([] if ctx["dry"] else ["--gpu"])).finish(ctx)
    results = bench / "results.json"
    if run.returncode != 0 or not results.exists():
        return "FAIL", f"research.bench exited with {run.returncode}", {}
    for name in ("results.json", "results.md"):
        (ctx["out"] / f"equal-compute-{name}").write_bytes((bench / name).read_bytes())
    arms = json.loads(results.read_text())["arms"]
    fig = {}
    for arm, m in arms.items():
        final = m["final"]
        fig[arm] = {"valid_loss": final.get("valid_loss"), "updates": final.get("updates"),
                    "boss_tokens": final.get("boss_tokens"), "wall_s": final.get("wall"),
                    "boss_tokens_per_s": (final["boss_tokens"] / final["wall"]
                                          if final.get("wall") else None)}
    missing = {"baseline", "autoassist", "random"} - set(fig)
    if missing:
        return "FAIL", f"arms missing from results.json: {sorted(missing)}", fig
    return "PASS", "", fig


def free_port():
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


RUNNERS = {
    "env": step_env,
    "train_fp32": lambda c: step_train(c, "train_fp32", []),
    "train_fp16": lambda c: step_train(c, "train_fp16", ["--fp16"]),
    "train_amp": lambda c: step_train(c, "train_amp", ["--amp"]),
    "distributed": lambda c: step_distributed(c, "distributed", spawn=False),
    "spawn": lambda c: step_distributed(c, "spawn", spawn=True),
    "kill_error": lambda c: step_kill(c, "error"),
    "kill_uniform": lambda c: step_kill(c, "uniform"),
    "overhead": step_overhead,
    "equal_compute": step_equal_compute,
}


def parse_steps(text):
    names = []
    for part in text.split(","):
        names += GROUPS.get(part, [part])
    unknown = [n for n in names if n not in RUNNERS]
    if unknown:
        raise SystemExit(f"check_steps.py: unknown steps {unknown}; choose from "
                         f"{sorted(GROUPS)} or {STEPS}")
    return [n for n in STEPS if n in names]


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--data", required=True, type=Path, help="a scripts/prepare-corpus.sh folder")
    p.add_argument("--out", required=True, type=Path, help="folder of the summary")
    p.add_argument("--work", required=True, type=Path, help="folder of the runs")
    p.add_argument("--cpu-dry-run", action="store_true", help="CPU, tiny sizes")
    p.add_argument("--steps", default="all", help="all, core, perf or step names, commas")
    p.add_argument("--time-limit", type=float, default=None,
                   help="seconds: later steps SKIP (default: none)")
    p.add_argument("--cpp-traces", action="store_true",
                   help="every run prints its threads' C++ and Python stacks on a fatal "
                        "signal (research/gpu/fatal_traces; PYTHONFAULTHANDLER)")
    a = p.parse_args(argv)
    steps = parse_steps(a.steps)
    a.out.mkdir(parents=True, exist_ok=True)
    a.work.mkdir(parents=True, exist_ok=True)
    start = time.monotonic()
    summary = {"mode": "cpu-dry-run" if a.cpu_dry_run else "gpu",
               "date": time.strftime("%Y-%m-%d %H:%M:%S %z"), "steps": {},
               "command": [sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv))}
    ctx = {"dry": a.cpu_dry_run, "data": a.data.resolve(), "out": a.out.resolve(),
           "work": a.work.resolve(), "summary": summary, "log": a.out / "gpu-check.log",
           "profile": PROFILES["cpu" if a.cpu_dry_run else "gpu"],
           "deadline": None if a.time_limit is None else start + a.time_limit,
           "cpp_traces": a.cpp_traces}
    ctx["log"].write_text("")
    ctx["tokens"], ctx["config_path"] = write_config(ctx)
    ctx["pairs"] = sum(1 for _ in open(ctx["data"] / "train.kept-lines"))
    for name in steps:
        t0 = time.monotonic()
        if ctx["deadline"] is not None and t0 > ctx["deadline"]:
            status, reason, fig = "SKIP", f"--time-limit {a.time_limit:.0f}s reached", {}
        else:
            try:
                status, reason, fig = RUNNERS[name](ctx)
            except Exception as err:  # a step's own error is its FAIL, the others still run
                status, reason, fig = "FAIL", f"{type(err).__name__}: {err}", {}
        seconds = time.monotonic() - t0
        summary["steps"][name] = {"status": status, "reason": reason, "seconds": round(seconds, 1),
                                  "figures": fig}
        print(f"[check] {status} {name} ({seconds:.0f}s){': ' + reason if reason else ''} "
              f"{json.dumps(fig, default=str)}", flush=True)
        (a.out / "gpu-check.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    summary["passed"] = all(s["status"] != "FAIL" for s in summary["steps"].values())
    summary["seconds"] = round(time.monotonic() - start, 1)
    (a.out / "gpu-check.json").write_text(json.dumps(summary, indent=2, default=str) + "\n")
    counts = {k: sum(s["status"] == k for s in summary["steps"].values())
              for k in ("PASS", "FAIL", "SKIP")}
    print(f"[check] {'PASSED' if summary['passed'] else 'FAILED'}: {counts}; summary: "
          f"{a.out / 'gpu-check.json'}", flush=True)
    return 0 if summary["passed"] else 1


if __name__ == "__main__":
    sys.exit(main())

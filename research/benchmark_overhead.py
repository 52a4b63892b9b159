#!/usr/bin/env python3
"""The Assistant's overhead on the Boss: seconds per million Boss tokens, with and without it.

    python -m research.benchmark_overhead --data DIR --config NAME --out FILE.json
        [--updates 300] [--repeats 3] [--seed 1] [--extra-args "..."] [--autoassist-args "..."]

Runs, alternating within one invocation on the same data, config and seed: ``--task
translation`` (fairseq's uniform batches) and ``--task autoassist_translation
--assistant-lambda-max 0`` (the Assistant runs, learns and builds every batch, but skips
nothing), ``--updates`` updates each, ``--repeats`` times, in the order A B, B A, A B, ...
so that a drift of the machine's speed falls on both alike. No validation, no checkpoints.

Boss seconds = the time fairseq's ``wps`` meter measures over each epoch (from its first
update to its last: training steps and the wait for every batch, collation and the
Assistant included), recovered per epoch as ``wpb * updates / wps``: both are logged with a
decimal, where ``train_wall`` is rounded to whole seconds; Boss tokens = non-padding source +
target tokens (EOS included): ``aa_boss_tok`` of the AutoAssist log, and for the baseline
the same count of fairseq's batches it trained (research/bench's recount). The JSON
holds both figures per run and their means, the ratio AutoAssist / baseline (goal: within
1.02) with a 95% interval from the repeats' paired ratios (Student's t on their logs), the
CPU model and the share of the machine's CPU other processes used during each run (above a
few percent the figures are not comparable: rerun when the machine is quiet).

``--boss-threads 1`` gives the Boss one torch thread (OMP_NUM_THREADS) in both arms. On a
machine with few cores this leaves a core to the Assistant, as a GPU machine does (the Boss
computes on the GPU, the Assistant on its own CPU core), so the ratio measures the Boss's
step and batches rather than two processes sharing cores, and repeats vary less.
"""

import argparse
import json
import os
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

from research.bench import BenchmarkError
from research.bench.budgets import baseline_batches, baseline_tokens_at
from research.bench.flags import build_run_args, data_langs, find_config, read_args_file
from research.bench.logs import parse_log
from research.bench.runs import machine_record, other_cpu_share, run_training

ARMS = {"translation": [], "autoassist_lambda0": ["--assistant-lambda-max", "0"]}


def boss_pace(records, tokens):
    """(Boss seconds, tokens, seconds per million tokens) of one run's log records."""
    epochs = [r for r in records if r["tag"] == "train"]
    if not epochs or not tokens:
        raise BenchmarkError("a run's log has no train line or no tokens: see its train.log")
    seconds, done = 0.0, 0
    for r in sorted(epochs, key=lambda r: r["num_updates"]):
        updates, done = r["num_updates"] - done, r["num_updates"]
        if r.get("wps"):
            seconds += r["wpb"] * updates / r["wps"]
    if seconds <= 0:
        raise BenchmarkError("a run's log has no wps on its train lines: see its train.log")
    return seconds, tokens, seconds / (tokens / 1e6)


def ratio_interval(ratios, level=0.95):
    """Interval of the geometric mean of paired ratios (Student's t on their logs); None
    with fewer than two repeats."""
    if len(ratios) < 2:
        return None
    from scipy import stats

    logs = np.log(np.asarray(ratios, dtype=np.float64))
    half = stats.t.ppf(0.5 + level / 2, len(logs) - 1) * logs.std(ddof=1) / np.sqrt(len(logs))
    return [float(np.exp(logs.mean() - half)), float(np.exp(logs.mean() + half))]


def measure(arm, rep, ctx):
    """Train one arm once; returns its figures."""
    name = f"{arm}-r{rep}"
    args = build_run_args(
        ctx["tokens"], "baseline" if arm == "translation" else arm, ctx["seed"],
        ctx["work"] / name / "checkpoints", ["--max-update", str(ctx["updates"])],
        ctx["extra"] + ["--no-save", "--disable-validation"],
        ARMS[arm] + (ctx["autoassist_args"] if arm != "translation" else []), ctx["langs"])
    records = parse_log(run_training(name, ctx["data"], args, ctx["work"]))
    last = max((r for r in records if r["tag"] == "train"), key=lambda r: r["num_updates"],
               default={})
    if arm == "translation":
        tokens = baseline_tokens_at(ctx["counts"], ctx["update_freq"], ctx["seed"],
                                              int(last.get("epoch", 1)),
                                              int(last.get("num_updates", 0)))[0]
    else:
        tokens = last.get("aa_boss_tok")
    seconds, tokens, pace = boss_pace(records, tokens)
    return {"run": name, "updates": int(last.get("num_updates", 0)), "boss_seconds": seconds,
            "boss_tokens": int(tokens), "seconds_per_mtok": pace,
            "other_cpu_share": other_cpu_share(ctx["work"] / name / "cpu.json")}


def parse_cli(argv):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  python -m research.benchmark_overhead --data work/multi30k --config "
               "multi30k/transformer_small --out work/overhead.json --updates 300 --repeats 3")
    p.add_argument("--data", required=True, type=Path,
                   help="a data directory written by scripts/prepare-corpus.sh")
    p.add_argument("--config", required=True,
                   help="configs/**/NAME.args name (e.g. multi30k/transformer_small), or a path")
    p.add_argument("--out", required=True, type=Path, help="the JSON file to write")
    p.add_argument("--updates", type=int, default=300, help="updates per run (default: 300)")
    p.add_argument("--repeats", type=int, default=3,
                   help="runs of each arm, alternating (default: 3)")
    p.add_argument("--seed", type=int, default=1, help="seed of every run (default: 1)")
    p.add_argument("--extra-args", default="", help="more fairseq-train flags, both arms")
    p.add_argument("--autoassist-args", default="",
                   help="more flags of the AutoAssist arm only (e.g. --assistant-sync)")
    p.add_argument("--boss-threads", type=int, default=None,
                   help="torch threads of the Boss in both arms (default: torch's own choice)")
    p.add_argument("--work", type=Path, default=None,
                   help="keep the runs' logs here (default: a temporary directory)")
    return p.parse_args(argv)


def main(argv=None):
    a = parse_cli(argv)
    if a.updates < 1 or a.repeats < 1:
        raise BenchmarkError(f"--updates {a.updates} and --repeats {a.repeats} must be >= 1")
    if not a.data.is_dir():
        raise BenchmarkError(f"data directory not found: {a.data}")
    if a.boss_threads is not None:
        if a.boss_threads < 1:
            raise BenchmarkError(f"--boss-threads {a.boss_threads} must be >= 1")
        os.environ["OMP_NUM_THREADS"] = str(a.boss_threads)  # read by each training's torch
    data = a.data.resolve()
    config = find_config(a.config).resolve()
    tokens, extra = read_args_file(config), shlex.split(a.extra_args)
    langs = data_langs(data, tokens, extra)
    with tempfile.TemporaryDirectory(prefix="overhead-") as tmp:
        work = (a.work or Path(tmp)).resolve()
        probe = build_run_args(tokens, "baseline", a.seed, work, [], extra, [], langs)
        counts, update_freq = baseline_batches(data, probe, a.seed)
        ctx = {"data": data, "tokens": tokens, "extra": extra, "langs": langs, "seed": a.seed,
               "autoassist_args": shlex.split(a.autoassist_args),
               "updates": a.updates, "work": work, "counts": counts, "update_freq": update_freq}
        runs = {arm: [] for arm in ARMS}
        for rep in range(a.repeats):
            order = list(ARMS) if rep % 2 == 0 else list(ARMS)[::-1]
            for arm in order:
                runs[arm].append(measure(arm, rep, ctx))
    pace = {arm: sum(r["seconds_per_mtok"] for r in rs) / len(rs) for arm, rs in runs.items()}
    paired = [b["seconds_per_mtok"] / t["seconds_per_mtok"]
              for t, b in zip(runs["translation"], runs["autoassist_lambda0"])]
    result = {
        "seconds_per_mtok": pace,
        "ratio": pace["autoassist_lambda0"] / pace["translation"],
        "ratio_per_repeat": paired, "ratio_interval95": ratio_interval(paired),
        "goal": "ratio within 1.02", "runs": runs, "boss_threads": a.boss_threads,
        "other_cpu_share_max": max((r["other_cpu_share"] or 0.0)
                                   for rs in runs.values() for r in rs),
        "machine": machine_record(), "updates": a.updates,
        "repeats": a.repeats, "seed": a.seed, "config": str(config), "data": str(data),
        "command": [sys.argv[0]] + (sys.argv[1:] if argv is None else list(argv)),
        "date": time.strftime("%Y-%m-%d %H:%M:%S %z")}
    a.out.parent.mkdir(parents=True, exist_ok=True)
    a.out.write_text(json.dumps(result, indent=2) + "\n")
    print(f"seconds per million Boss tokens: translation {pace['translation']:.2f}, "
          f"autoassist (lambda_max 0) {pace['autoassist_lambda0']:.2f}; ratio "
          f"{result['ratio']:.4f} (95% interval {result['ratio_interval95']}); other CPU up to {result['other_cpu_share_max']:.1%}; "
          f"written: {a.out}")
    return result


if __name__ == "__main__":
    try:
        main()
    except BenchmarkError as err:
        sys.exit(f"benchmark_overhead.py: error: {err}")

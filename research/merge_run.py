#!/usr/bin/env python3
"""Merge one finished fixed-budget run into another results folder.

``research.fixed_budget`` writes each run's figures into its ``--results`` folder (summary.json,
runs-CORPUS.json, the README table, curves-CORPUS.png). Runs trained elsewhere (a worktree
pinned at an older commit, a results folder outside the repository) are merged into the
committed docs/results/converged with this command, which uses the same merge, table and plot
as the runs themselves. ``--as-corpus``/``--as-arm`` enter a run under another name, e.g. plain
fairseq on a filtered corpus as an arm of the unfiltered corpus it is compared with.

    python -m research.merge_run /root/aa-work/converged/results-A multi30k-noisy-checked \\
        plain-0.70B-s1 --as-corpus multi30k-noisy --as-arm plain-checked

A SOURCE that is a ``results.json`` of ``research.bench`` (or of ``scripts/benchmark.py``
before it) enters that benchmark's plain
baseline (RUN ``baseline-sSEED``: the config's own schedule, inverse_sqrt) as the arm
``plain-inverse-sqrt``: its last validation, its BLEU, its Boss tokens, and the reducible loss
with the floor of plain fairseq at B of the same corpus and seed, already in the target.
"""

import json
import sys
from pathlib import Path

from research import fixed_budget_report as report
from research.bench import REPO, BenchmarkError, doc_parser


def merge_run(source: Path, corpus: str, run: str, target: Path, as_corpus=None,
              as_arm=None) -> dict:
    """Enter run *run* of SOURCE/runs-CORPUS.json into TARGET with
    :func:`.fixed_budget_report.record_run`, renamed by *as_corpus*/*as_arm* (the run's key
    then starts with *as_arm* instead of its arm); returns its summary entry."""
    runs_file = source / f"runs-{corpus}.json"
    if not runs_file.exists():
        raise BenchmarkError(f"{runs_file} does not exist: name the corpus of a finished run")
    runs = json.loads(runs_file.read_text())
    if run not in runs:
        raise BenchmarkError(f"{runs_file} has no run {run!r} (it has {sorted(runs)})")
    entry = dict(runs[run]["entry"])
    name = run
    if as_arm:
        if not run.startswith(entry["arm"] + "-"):
            raise BenchmarkError(f"run {run!r} is not named after its arm {entry['arm']!r}")
        name = as_arm + run[len(entry["arm"]):]  # ARM-SHAREB-sSEED: the arm may hold dashes
        entry["arm"] = as_arm
    if as_corpus:
        entry["corpus"] = as_corpus
    report.record_run(target, name, entry, runs[run]["args"], runs[run]["curve"])
    return entry


def bench_baseline(results_file: Path, corpus: str, run: str, target: Path) -> dict:
    """Enter the plain baseline *run* (``baseline-sSEED``) of a ``research.bench`` (or
    ``scripts/benchmark.py``) results.json into TARGET as ``plain-inverse-sqrt``; returns its
    summary entry. Its BLEU is the benchmark's own (scripts/benchmark.py scored
    ``checkpoint_best.pt``)."""
    bench = json.loads(results_file.read_text())
    if not run.startswith("baseline-s") or run not in bench.get("curves", {}):
        raise BenchmarkError(f"{results_file} has no baseline run {run!r} (its runs: "
                             f"{sorted(bench.get('curves', {}))})")
    seed = int(run[len("baseline-s"):])
    figures = next((s for s in bench.get("per_seed", []) if s.get("seed") == seed), None)
    if figures is None:
        raise BenchmarkError(f"{results_file} has no per-seed figures of seed {seed}")
    # research.bench keeps a seed's figures per arm; scripts/benchmark.py, before it, flat
    baseline = figures.get("arms", {}).get("baseline", {})
    bleu = figures.get("bleu_baseline", baseline.get("final_bleu"))
    other_cpu = figures.get("other_cpu_share_baseline", baseline.get("other_cpu_share"))
    summary = target / "summary.json"
    entries = json.loads(summary.read_text()) if summary.exists() else []
    plain = [e for e in entries if (e["corpus"], e["seed"], e["arm"], e["budget_share"],
                                    report.entry_schedule(e)) ==
             (corpus, seed, report.TARGET_ARM, 1.0, report.UNNAMED_SCHEDULE)]
    if not plain:
        raise BenchmarkError(f"{summary} has no plain fairseq at B of {corpus}, seed {seed}: "
                             "merge that run first (its updates and loss floor are needed)")
    end, plain = bench["curves"][run][-1], plain[0]
    floor = plain["valid_loss"] - plain["valid_reducible_loss"]  # the same corpus and criterion
    entry = {"corpus": corpus, "seed": seed, "arm": "plain-inverse-sqrt",
             "budget_share": round(end["updates"] / plain["updates"], 4),
             "valid_loss": end["valid_loss"],
             "valid_reducible_loss": round(end["valid_loss"] - floor, 4),
             "bleu": bleu, "boss_tokens": end["boss_tokens"],
             "updates": end["updates"], "wall_s": end["wall"],
             "other_cpu_share": other_cpu,
             "bleu_signature": None,  # scripts/benchmark.py kept it in its run folder only
             "schedule": "inverse_sqrt", "run": str(results_file)}
    name = report.run_name("plain-inverse-sqrt", entry["budget_share"], seed)
    report.record_run(target, name, entry, bench["command"], bench["curves"][run])
    return entry


def main(argv=None):
    p = doc_parser(__doc__)
    p.add_argument("source", type=Path, help="the --results folder the run was written to, "
                   "or a results.json of research.bench (its plain baseline)")
    p.add_argument("corpus", help="the run's --corpus (its runs-CORPUS.json)")
    p.add_argument("run", help="the run's name, ARM-SHAREB-sSEED (e.g. default-0.85B-s1)")
    p.add_argument("--to", type=Path, default=REPO / "docs" / "results" / "converged",
                   help="the results folder to merge into (default: docs/results/converged)")
    p.add_argument("--as-corpus", help="enter the run under this corpus name")
    p.add_argument("--as-arm", help="enter the run under this arm name")
    a = p.parse_args(argv)
    if a.source.is_file():
        if a.as_corpus or a.as_arm:
            p.error("--as-corpus/--as-arm: not for a benchmark's results.json (its baseline "
                    "is entered as plain-inverse-sqrt of CORPUS)")
        entry = bench_baseline(a.source, a.corpus, a.run, a.to)
    else:
        entry = merge_run(a.source, a.corpus, a.run, a.to, a.as_corpus, a.as_arm)
    print(f"merged into {a.to}: {json.dumps(entry)}")


if __name__ == "__main__":
    try:
        main()
    except BenchmarkError as err:
        sys.exit(f"merge_run.py: error: {err}")

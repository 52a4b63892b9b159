#!/usr/bin/env python3
"""Compare the arms of one benchmark against the baseline of another, seed by seed.

``research/bench`` compares arms trained on the same data. Some questions need a
baseline from other data with the same validation and test sets: the noise-filter oracle
(plain fairseq on a noisy corpus without its noisy pairs, ``research/drop_noise.py``)
against the baseline on the whole noisy corpus, for instance. This script reads the
``results.json`` files of both and computes, for every arm of ``--run`` and every seed it
shares with ``--base``, the figures of benchmark.py's equal-compute table against the
``baseline-s<seed>`` curve of ``--base``: validation loss and BLEU at equal Boss tokens and
at equal wall time, and the tokens and wall time to reach that baseline's best validation
loss and its final BLEU minus 0.2. Example::

    python -m research.compare_results \\
        --base docs/results/multi30k-noisy/results.json \\
        --base docs/results/multi30k-noisy-seed2/results.json \\
        --run work/bench-m30k-noisy-oracle/results.json --out comparison.json
"""

import argparse
import json
import re
import sys
from pathlib import Path

from research.bench.metrics import arm_metrics
from research.bench.report import fmt, fmt_tokens


def load(path):
    try:
        results = json.loads(Path(path).read_text())
    except (OSError, ValueError) as err:
        raise SystemExit(f"compare_results.py: error: cannot read {path}: {err}")
    if "curves" not in results or "bleu_curves" not in results:
        raise SystemExit(f"compare_results.py: error: {path} has no curves: give a "
                         "results.json written by research/bench")
    return results


def compare(bases, run):
    """{seed: {arm: metrics}} for every seed of *run* whose baseline one of *bases* has; the
    arm ``base:baseline`` is that baseline itself, at the same equal tokens and wall."""
    base_curves, base_bleus = {}, {}
    for results in bases:
        base_curves.update(results["curves"])
        base_bleus.update(results["bleu_curves"])
    out = {}
    # --base's own baseline first: its figures at the same equal tokens and wall
    names = [f"base:baseline-s{m.group(1)}" for m in (re.fullmatch(r"baseline-s(\d+)", n)
                                                       for n in run["curves"]) if m]
    for name, curve in [(n, base_curves.get(n[5:])) for n in names] + list(run["curves"].items()):
        if curve is None:
            continue
        arm, seed = re.fullmatch(r"(.+)-s(\d+)", name).groups()
        base = base_curves.get(f"baseline-s{seed}")
        if base is None:
            continue
        bleus = (base_bleus if name.startswith("base:") else run["bleu_curves"]).get(
            name.removeprefix("base:"), [])
        seed_curves = [c for n, c in run["curves"].items() if n.endswith(f"-s{seed}")] + [base]
        equal_tokens = min(c[-1]["boss_tokens"] for c in seed_curves)
        equal_wall = min(c[-1]["wall"] for c in seed_curves)
        out.setdefault(int(seed), {})[arm] = arm_metrics(
            curve, bleus, base,
            base_bleus.get(f"baseline-s{seed}", []), equal_tokens, equal_wall)
    if not out:
        raise SystemExit("compare_results.py: error: no seed of --run has a baseline in --base "
                         f"(--run has {', '.join(sorted(run['curves']))})")
    return out


def markdown(table):
    rows = ["| seed | arm | Boss tokens | wall (s) | equal tokens | valid loss at equal tokens | "
            "BLEU at equal tokens | tokens / wall to the base's best loss | "
            "tokens / wall to the base's final BLEU - 0.2 |", "|" + "---|" * 9]
    for seed, arms in sorted(table.items()):
        for arm, m in arms.items():
            rows.append(
                f"| {seed} | {arm} | {fmt_tokens(m['final']['boss_tokens'])} | "
                f"{fmt(m['final']['wall'], '.0f')} | {fmt_tokens(m['equal_tokens'])} | "
                f"{fmt(m['valid_loss_at_equal_tokens'])} | "
                f"{fmt(m['bleu_at_equal_tokens'], '.2f')} | "
                f"{fmt(m['tokens_to_target_loss_ratio'])} / "
                f"{fmt(m['wall_to_target_loss_ratio'])} | "
                f"{fmt(m['tokens_to_target_bleu_ratio'])} / "
                f"{fmt(m['wall_to_target_bleu_ratio'])} |")
    return "\n".join(rows)


def main(argv=None):
    p = argparse.ArgumentParser(
        description=__doc__.split("\n\n")[0],
        epilog="example: python -m research.compare_results --base "
               "docs/results/multi30k-noisy/results.json --run "
               "work/bench-m30k-noisy-oracle/results.json --out comparison.json")
    p.add_argument("--base", action="append", required=True, type=Path,
                   help="results.json with the baseline-s<seed> curves (repeatable)")
    p.add_argument("--run", required=True, type=Path, help="results.json whose arms to compare")
    p.add_argument("--out", type=Path, help="write the figures there as JSON (with the table)")
    a = p.parse_args(argv)
    table = compare([load(path) for path in a.base], load(a.run))
    text = markdown(table)
    print(text)
    if a.out:
        a.out.write_text(json.dumps({
            "command": ["research/compare_results.py"] + (sys.argv[1:] if argv is None else argv),
            "base": [str(b) for b in a.base], "run": str(a.run),
            "seeds": {str(s): arms for s, arms in table.items()}, "table": text}, indent=2) + "\n")
    return table


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The budget-aware schedules compared, from fixed-budget summaries: each schedule at each
share of B against cosine at the same share, and against plain fairseq at B with cosine
(the target of every earlier comparison); the Assistant arms against plain fairseq at their
share with their own schedule.

    python -m research.schedule_report SUMMARY.json [SUMMARY.json ...] [--corpus NAME]

Rows of different summaries (say, one trained on a CPU and one on a GPU) are compared only
within their own summary: the same run on two machines does not end at the same figures.
"""

import json
import sys
from collections import defaultdict
from pathlib import Path
from statistics import mean

from research.bench import BenchmarkError, doc_parser
from research.fixed_budget_report import TARGET_ARM, UNNAMED_SCHEDULE, entry_schedule, matches

SCHEDULE_ORDER = ("cosine", "linear", "rex")


def _key(rows):
    """{(arm, share, schedule): {seed: row}}."""
    out = defaultdict(dict)
    for e in rows:
        out[(e["arm"], round(e["budget_share"], 2), entry_schedule(e))][e["seed"]] = e
    return out


def _pair(values, spec):
    return " / ".join(format(v, spec) for v in values)


def schedule_table(rows):
    """Markdown: plain fairseq at each share and schedule, its seeds' validation loss and
    test BLEU, their means, the mean difference from cosine at that share, and per seed whether it matches
    plain fairseq at B with cosine (loss no higher, BLEU at most 0.3 below)."""
    by = _key(rows)
    targets = by.get((TARGET_ARM, 1.0, UNNAMED_SCHEDULE), {})
    lines = ["| share | schedule | valid loss (per seed) | test BLEU (per seed) | mean loss, BLEU | "
             "against cosine: loss, BLEU | matches plain at B with cosine (per seed) |",
             "|" + "---|" * 7]
    shares = sorted({s for a, s, _ in by if a == TARGET_ARM})
    for share in shares:
        for schedule in SCHEDULE_ORDER:
            runs = by.get((TARGET_ARM, share, schedule))
            if not runs:
                continue
            seeds = sorted(runs)
            loss = [runs[s]["valid_loss"] for s in seeds]
            bleu = [runs[s]["bleu"] for s in seeds]
            cosine = by.get((TARGET_ARM, share, UNNAMED_SCHEDULE), {})
            both = [s for s in seeds if s in cosine]
            against = ""
            if schedule != UNNAMED_SCHEDULE and both:
                d_loss = mean(runs[s]["valid_loss"] - cosine[s]["valid_loss"] for s in both)
                d_bleu = mean(runs[s]["bleu"] - cosine[s]["bleu"] for s in both)
                against = f"{d_loss:+.3f}, {d_bleu:+.2f}"
            match = " / ".join(
                "n/a" if s not in targets else
                "target" if runs[s] is targets[s] else
                ("yes" if matches(runs[s], targets[s]) else "no") +
                f" ({runs[s]['valid_loss'] - targets[s]['valid_loss']:+.3f}, "
                f"{runs[s]['bleu'] - targets[s]['bleu']:+.2f})" for s in seeds)
            lines.append(f"| {share:.2f} | {schedule} | {_pair(loss, '.3f')} | "
                         f"{_pair(bleu, '.2f')} | {mean(loss):.3f}, {mean(bleu):.2f} | {against} | "
                         f"{match} |")
    return "\n".join(lines)


def arms_table(rows):
    """Markdown: each Assistant arm against plain fairseq at its share and schedule."""
    by = _key(rows)
    lines = ["| arm | share | schedule | valid loss (per seed) | test BLEU (per seed) | "
             "against plain fairseq: loss, BLEU (mean) |", "|" + "---|" * 6]
    for (arm, share, schedule), runs in sorted(by.items()):
        plain = by.get((TARGET_ARM, share, schedule), {})
        seeds = sorted(runs)
        both = [s for s in seeds if s in plain]
        if arm == TARGET_ARM or not both:
            continue
        d_loss = mean(runs[s]["valid_loss"] - plain[s]["valid_loss"] for s in both)
        d_bleu = mean(runs[s]["bleu"] - plain[s]["bleu"] for s in both)
        lines.append(f"| {arm} | {share:.2f} | {schedule} | "
                     f"{_pair([runs[s]['valid_loss'] for s in seeds], '.3f')} | "
                     f"{_pair([runs[s]['bleu'] for s in seeds], '.2f')} | "
                     f"{d_loss:+.3f}, {d_bleu:+.2f} |")
    return "\n".join(lines) if len(lines) > 2 else ""


def main(argv=None):
    p = doc_parser(__doc__, 1)
    p.add_argument("summaries", nargs="+", type=Path, help="fixed-budget summary.json files")
    p.add_argument("--corpus", help="only this corpus's rows")
    a = p.parse_args(argv)
    for path in a.summaries:
        try:
            rows = json.loads(path.read_text())
        except (OSError, ValueError) as e:
            raise BenchmarkError(f"{path}: not a readable summary.json ({e})") from None
        rows = [e for e in rows if a.corpus in (None, e["corpus"]) and e.get("bleu") is not None]
        if not rows:
            raise BenchmarkError(f"{path}: no rows with a test BLEU"
                                 + (f" of corpus {a.corpus}" if a.corpus else ""))
        print(f"## {path}\n\n{schedule_table(rows)}\n")
        arms = arms_table(rows)
        if arms:
            print(f"{arms}\n")


if __name__ == "__main__":
    try:
        main()
    except BenchmarkError as err:
        sys.exit(f"schedule_report.py: error: {err}")

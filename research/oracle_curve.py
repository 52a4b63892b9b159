#!/usr/bin/env python
"""The oracle curve: how much of the reducible loss the easiest pairs hold, over training.

    autoassist-diagnose --data work/multi30k --checkpoint RUN/checkpoints/checkpoint{1,3,6}.pt \\
        --out multi30k.json
    python -m research.oracle_curve --curve multi30k=multi30k.json --curve tatoeba=tatoeba.json \\
        --out docs/results/converged/oracle-curve

Reads the curves that ``autoassist-diagnose`` writes for several checkpoints of one run
(``{"curve": rows}``), or its files of one checkpoint each (``--curve`` repeated with the
same corpus, or comma-separated files, add them up), and writes, per corpus and checkpoint (sorted by data passes), the
share of the reducible loss (and of the raw loss) that an oracle skipping the lowest-loss
pairs first removes with its reference share of the target tokens: OUT.json (the rows),
OUT.png (one plot: the shares against data passes, with the density reference line times
the token share, the former bound of the verdict; the verdict now rests on the noise share,
autoassist-diagnose --help) and OUT.md (a Markdown table).
"""

import json
import os
import sys

from autoassist_fairseq.diagnose import curve_row
from research.bench import doc_parser


def read_curve(path):
    """The rows of an ``autoassist-diagnose`` file (a curve or one diagnosis) and the
    (reference share, density bound) they were diagnosed with."""
    try:
        with open(path) as f:
            saved = json.load(f)
    except (OSError, ValueError) as err:
        sys.exit(f"error: cannot read {path}: {err}")
    diagnoses = [saved] if isinstance(saved, dict) and "checkpoint" in saved else \
        saved.get("diagnoses", []) if isinstance(saved, dict) else []
    if not diagnoses or "oracle_skipped_share_reducible_loss_at_reference" not in diagnoses[0]:
        sys.exit(f"error: {path} is not a diagnosis of the reducible loss: write it with "
                 "autoassist-diagnose --checkpoint CKPT [CKPT ...] --out FILE")
    return ([curve_row(d) for d in diagnoses],
            {(d["reference_share"], d["max_density"]) for d in diagnoses})


def markdown(curves, share):
    """One Markdown table of every corpus's rows."""
    lines = [f"| corpus | checkpoint | data passes | updates | mean loss (nats) | mean reducible "
             f"loss | floor share of the loss | oracle at {share:.0%} of the tokens: reducible "
             "share | raw share | density (reducible) | verdict |",
             "|" + "---|" * 11]
    for corpus, rows in curves.items():
        for r in rows:
            lines.append(
                f"| {corpus} | {r['checkpoint']} | {r['passes']:.2f} | {r['num_updates']} | "
                f"{r['mean_loss']:.3f} | {r['mean_reducible_loss']:.3f} | "
                f"{r['floor_share_of_loss']:.1%} | "
                f"{r['oracle_skipped_share_reducible_loss_at_reference']:.1%} | "
                f"{r['oracle_skipped_share_raw_loss_at_reference']:.1%} | "
                f"{r['skip_density_oracle']:.2f} | {r['verdict']} |")
    return "\n".join(lines) + "\n"


def plot(curves, share, max_density, path):
    """The oracle's skipped share of the reducible (solid) and raw (dashed) loss against
    data passes, one colour per corpus, with the density reference line."""
    import logging

    logging.getLogger("matplotlib").setLevel(logging.WARNING)
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2))
    for i, (corpus, rows) in enumerate(curves.items()):
        x = [r["passes"] for r in rows]
        ax.plot(x, [r["oracle_skipped_share_reducible_loss_at_reference"] for r in rows],
                marker="o", color=f"C{i}", label=f"{corpus}: reducible loss")
        ax.plot(x, [r["oracle_skipped_share_raw_loss_at_reference"] for r in rows],
                marker=".", ls="--", color=f"C{i}", label=f"{corpus}: raw loss")
    ax.axhline(max_density * share, color="gray", ls=":",
               label=f"density {max_density:g} x {share:.0%} (reference)")
    ax.axhline(share, color="black", lw=0.8, label=f"no gain: {share:.0%} (density 1)")
    ax.set_xlabel("data passes of the plain fairseq run")
    ax.set_ylabel(f"loss share the oracle skips with {share:.0%} of the tokens")
    ax.set_ylim(bottom=0)
    ax.grid(alpha=0.3)
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None):
    p = doc_parser(__doc__, 1)
    p.add_argument("--curve", action="append", required=True, metavar="CORPUS=FILE[,FILE...]",
                   help="a corpus name and autoassist-diagnose files of its checkpoints "
                        "(repeatable)")
    p.add_argument("--out", required=True, help="output prefix (writes .json, .png, .md)")
    a = p.parse_args(argv)
    curves, bounds = {}, set()
    for item in a.curve:
        corpus, sep, path = item.partition("=")
        if not sep or not corpus or not path:
            p.error(f"--curve {item!r}: expected CORPUS=FILE[,FILE...]")
        for one in path.split(","):
            rows, found = read_curve(one)
            curves.setdefault(corpus, []).extend(rows)
            bounds |= found
    for corpus, rows in curves.items():
        rows.sort(key=lambda r: (r["passes"], r["num_updates"] or 0))
    if len(bounds) != 1:
        sys.exit(f"error: the curves were diagnosed with different (or no recorded) "
                 f"--reference-share/--max-density: {sorted(bounds)}; rerun them alike")
    (share, max_density), = bounds
    os.makedirs(os.path.dirname(a.out) or ".", exist_ok=True)
    with open(a.out + ".json", "w") as f:
        json.dump({"reference_share": share, "max_density": max_density, "curves": curves},
                  f, indent=1)
    table = markdown(curves, share)
    with open(a.out + ".md", "w") as f:
        f.write(table)
    plot(curves, share, max_density, a.out + ".png")
    print(table, end="")


if __name__ == "__main__":
    main()

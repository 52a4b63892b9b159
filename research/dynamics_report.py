#!/usr/bin/env python
"""How well the Boss's own losses, pass after pass, find labelled noise: training-dynamics
scores beside the pair checks and Bicleaner, per label.

    python -m research.dynamics_report --data WORK/data --mix WORK/mix/train \\
        --losses WORK/losses/pass1.npz WORK/losses/pass2.npz WORK/losses/pass4.npz \\
        --out docs/results/noise/dynamics-paracrawl-seed0.json

DATA is a corpus prepared by ``scripts/prepare-corpus.sh`` from the mix of
``research.dynamics_mix`` (MIX.labels, MIX.rows, MIX.bicleaner; DATA/train.kept-lines maps
the binarised pairs to the mix's lines), with its feature file (the pair checks). Each
``--losses`` file is ``autoassist-diagnose --losses-out`` of one checkpoint of a run on DATA,
in training order: every pair's mean token loss in eval mode at the end of a pass. The
scores, all "higher: more noise-like", each computed from the corpus alone:

``loss_last``, ``stall`` and ``dynamics`` of
:mod:`autoassist_fairseq.diagnose.dynamics` from the first and the last file (flagged at
its corpus-set bar), and

* ``union_dynamics``: the checks' union (flagged by either first, then the larger of the
  two scores' percentiles);
* with ``--visits-checkpoint``, ``visits_dynamics`` and ``union_visits_dynamics``: the same
  from the first and latest visit's loss of the training passes themselves, which the
  Assistant recorded (:func:`autoassist_fairseq.diagnose.dynamics.visits_dynamics`).

For each: ROC AUC of A+L against V+F, the share of A+L found at V+F shares of 5-50%, flag
rates per label (and of the clean pairs, whose rate is the cost on a clean corpus), with
bootstrap intervals over the labelled pairs. Only the checkpoints' losses are read: the
Boss's training forward passes see the same pairs with dropout, at other points of the pass.
"""

import json
import sys
from pathlib import Path

import numpy as np

from autoassist_fairseq.diagnose.dynamics import BAR, BINS, pair_dynamics, visits_dynamics
from autoassist_fairseq.features.prepared import flagged_pairs, language_pair
from autoassist_fairseq.tools.bootstrap import bootstrap
from autoassist_fairseq.tools.check_dynamics import percentile
from autoassist_fairseq.tools.check_figures import flag_rates, noise_auc, noise_found_at
from autoassist_fairseq.tools.labelled_pairs import AUC_NOISE, VALID
from research.add_noise import LABEL_OF_KIND
from research.bench import doc_parser

SHARES = (0.05, 0.1, 0.2, 0.3, 0.5)


def read_mix(prefix):
    """(kind, label, labelled row, Bicleaner score) of every line of the mix: the files of
    ``research.dynamics_mix``, or those of ``research.add_noise`` (PREFIX.labels holds the
    noise kinds; labels by :data:`research.add_noise.LABEL_OF_KIND`, every line a row)."""
    lines = np.array(Path(f"{prefix}.labels").read_text().split("\n")[:-1])
    if not Path(f"{prefix}.rows").exists():
        labels = np.array([LABEL_OF_KIND[k] for k in lines])
        return lines, labels, np.arange(len(lines)), np.full(len(lines), np.nan)
    rows = np.loadtxt(f"{prefix}.rows", dtype=np.int64)
    bic = np.array([float(x) if x else np.nan
                    for x in Path(f"{prefix}.bicleaner").read_text().split("\n")[:-1]])
    return lines, lines, rows, bic


def per_label_rates(labels, flags):
    """Each score's flag rate per label and for A+L and V+F (check_report's
    :func:`flag_rates`, without its cleaning and union rows: every pair here was trained)."""
    rate = flag_rates(labels, np.zeros(len(labels), dtype=bool), flags, (AUC_NOISE, VALID))
    return {n: rate[n] for n in flags}


def main(argv=None):
    p = doc_parser(__doc__)
    p.add_argument("--data", required=True, help="the prepared mix (with its feature file)")
    p.add_argument("--mix", required=True, help="prefix of research.dynamics_mix's output")
    p.add_argument("--losses", nargs="+", required=True,
                   help="autoassist-diagnose --losses-out files, in training order")
    p.add_argument("--visits-checkpoint", default=None, metavar="CKPT",
                   help="also score the dynamics of the training passes' own losses, which "
                        "the Assistant of CKPT recorded (``visits_*``)")
    p.add_argument("--bootstrap", type=int, default=1000, help="resamples (default: 1000)")
    p.add_argument("--out", required=True, help="the JSON report to write")
    a = p.parse_args(argv)
    data = Path(a.data)
    src, tgt = language_pair(data)
    kept = np.loadtxt(data / "train.kept-lines", dtype=np.int64)
    mix_kinds, mix_labels, mix_rows, mix_bic = read_mix(a.mix)
    kinds, labels, rows, bic = mix_kinds[kept], mix_labels[kept], mix_rows[kept], mix_bic[kept]
    check_flags, check_score, _ = flagged_pairs(data, src, tgt)
    try:
        scores, dyn_flag, inputs = pair_dynamics(a.losses[0], a.losses[-1], len(kept))
    except ValueError as err:
        sys.exit(f"error: {err}")
    flags = {"checks": check_flags}
    visits = None
    if a.visits_checkpoint:
        try:
            visits = visits_dynamics(a.visits_checkpoint, inputs["ntok"])
        except ValueError as err:
            sys.exit(f"error: {err}")
    flags["dynamics"] = dyn_flag
    flags["union_dynamics"] = check_flags | dyn_flag
    # the checks' union score ranks the flagged pairs first (pair_checks.union_score)
    ranked = {"checks": check_score, **scores}
    ranked["union_dynamics"] = flags["union_dynamics"] + np.maximum(
        percentile(check_score), percentile(scores["dynamics"]))
    if visits is not None:  # pairs visited once: no score, ranked as typical (the median)
        v = visits[0]["dynamics"]
        ranked["visits_dynamics"] = np.where(np.isnan(v), np.nanmedian(v), v)
        flags["visits_dynamics"] = visits[1]
        flags["union_visits_dynamics"] = check_flags | visits[1]
        ranked["union_visits_dynamics"] = flags["union_visits_dynamics"] + np.maximum(
            percentile(check_score), percentile(ranked["visits_dynamics"]))
    if not np.isnan(bic).all():
        ranked["bicleaner"] = -bic
    names = sorted(set(labels.tolist()))
    out = {
        "auc": {n: noise_auc(labels, s) for n, s in ranked.items()},
        "flag_rate": per_label_rates(labels, flags),
        "noise_found_at_valid_share": {n: {str(v): noise_found_at(labels, s, v) for v in SHARES}
                                       for n, s in ranked.items()},
        "loss_by_label": {k: {"first": float(np.median(inputs["first"][labels == k])),
                              "last": float(np.median(inputs["last"][labels == k])),
                              "dynamics": float(np.median(scores["dynamics"][labels == k])),
                              "ntok": float(np.median(inputs["ntok"][labels == k])),
                              "pairs": int(np.count_nonzero(labels == k))} for k in names},
        "losses": list(a.losses), "bar": BAR, "bins": BINS,
    }
    if not np.array_equal(kinds, labels):  # research.add_noise's kinds: each against clean
        noise_kinds = sorted(set(kinds.tolist()) - {"clean"})
        out["flag_rate_by_kind"] = {n: {k: float(f[kinds == k].mean()) for k in
                                        noise_kinds + ["clean"]} for n, f in flags.items()}
        against_clean = {k: np.where(kinds == k, "A", np.where(kinds == "clean", "V", "-"))
                         for k in noise_kinds}
        out["auc_by_kind"] = {n: {k: noise_auc(against_clean[k], s) for k in noise_kinds}
                              for n, s in ranked.items()}
    if a.bootstrap:
        drawn = np.flatnonzero(rows >= 0)

        def figures(index):
            pick = drawn[index]
            fig = {f"auc {n}": noise_auc(labels[pick], s[pick]) for n, s in ranked.items()}
            for n, f in flags.items():
                for group in (AUC_NOISE, VALID):
                    g = np.isin(labels[pick], group)
                    fig[f"{n} {'+'.join(group)}"] = float(f[pick][g].mean()) if g.any() \
                        else float("nan")
            for n, s in ranked.items():
                fig[f"{n} A+L at V+F 0.05"] = noise_found_at(labels[pick], s[pick], 0.05)
            return fig

        out["intervals"] = bootstrap(figures, len(drawn), a.bootstrap, 0)
    Path(a.out).parent.mkdir(parents=True, exist_ok=True)
    Path(a.out).write_text(json.dumps(out, indent=1))
    print("AUC " + ", ".join(f"{n} {v:.3f}" for n, v in out["auc"].items()))
    for n, r in out["flag_rate"].items():
        print(f"flagged by {n}: " + ", ".join(f"{k} {v:.1%}" for k, v in r.items()))
    print("A+L at V+F 5%: " + ", ".join(f"{n} {v['0.05']:.1%}" for n, v in
                                        out["noise_found_at_valid_share"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(main())

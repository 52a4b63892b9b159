#!/usr/bin/env python
"""Write the mix of ``autoassist-check-report`` (labelled pairs among clean ones) as a raw
training set, for training a Boss on it and reading its losses per label.

    python -m research.dynamics_mix LABELLED.tsv.gz --clean PREFIX [PREFIX ...] \\
        --src en --tgt de --share 0.1 --seed 0 --out WORK/mix/train

Writes OUT.SRC, OUT.TGT (the mixed pairs, in the order of
:func:`autoassist_fairseq.tools.labelled_pairs.mix`, the same sample and order as the
report with the same seed and share), OUT.labels (the label of each line: V, F, A, L, T,
MT, E, or ``clean``), OUT.rows (its row in the labelled file, -1 for a clean pair) and
OUT.bicleaner (Bicleaner's score, empty for clean pairs). ``scripts/prepare-corpus.sh``
then prepares OUT as any raw corpus; its ``train.kept-lines`` maps the binarised pairs back
to these lines.
"""

import os
import sys

import numpy as np

from autoassist_fairseq.tools.labelled_pairs import mix, read_clean, read_labelled
from research.bench import doc_parser


def main(argv=None):
    p = doc_parser(__doc__)
    p.add_argument("labelled", help="labelled TSV (autoassist-check-report's input)")
    p.add_argument("--clean", nargs="+", required=True, metavar="PREFIX",
                   help="clean corpus PREFIX.SRC / PREFIX.TGT (plain or .gz); pooled")
    p.add_argument("--src", required=True, help="source language")
    p.add_argument("--tgt", required=True, help="target language")
    p.add_argument("--share", type=float, default=0.1,
                   help="share of labelled pairs in the mix (default: 0.1)")
    p.add_argument("--seed", type=int, default=0, help="seed of the sample (default: 0)")
    p.add_argument("--out", required=True, help="output prefix: OUT.SRC, OUT.TGT, ...")
    a = p.parse_args(argv)
    try:
        labelled = read_labelled(a.labelled, a.src, a.tgt)
        clean_src, clean_tgt = read_clean(a.clean, a.src, a.tgt)
        src, tgt, labels, row = mix(labelled, clean_src, clean_tgt, a.share, a.seed)
    except (FileNotFoundError, ValueError) as err:
        sys.exit(f"error: {err}")
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    bic = labelled["bicleaner"]
    columns = {a.src: src, a.tgt: tgt, "labels": labels, "rows": [str(r) for r in row],
               "bicleaner": ["" if r < 0 or bic is None or np.isnan(bic[r]) else repr(float(bic[r]))
                             for r in row]}
    for suffix, lines in columns.items():
        with open(f"{a.out}.{suffix}", "w", encoding="utf-8", newline="\n") as f:
            f.writelines(line.replace("\n", " ").replace("\r", " ") + "\n" for line in lines)
    print(f"wrote {len(src)} pairs ({int(np.count_nonzero(row >= 0))} labelled) to {a.out}.*")
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""What a filter dropped, per noise kind: the share of each kind's prepared training pairs
that are missing from each filtered corpus.

    python -m research.filter_kinds --labels MIX.labels --data DATA FILTERED [FILTERED ...]
        [--out FILE.json]

MIX.labels: one label a raw training line (``clean`` or a noise kind; research/add_noise.py
or research/dynamics_study.sh). DATA: the prepared corpus (its train.kept-lines maps each
binarised pair to its raw line). FILTERED: a corpus that autoassist-filter, or the
fixed-budget harness's filtered-data folders, wrote from DATA (its train.kept-lines holds the
raw lines of the pairs it kept). A plain fairseq run on FILTERED trains every kept pair each
pass, so these shares are also the shares of each kind's tokens it never trains.
"""

import collections
import json
import sys
from pathlib import Path

import numpy as np

from research.bench import doc_parser


def kept_lines(folder: Path) -> np.ndarray:
    path = folder / "train.kept-lines"
    if not path.exists():
        sys.exit(f"filter_kinds: {path} not found: give a corpus prepared by "
                 "scripts/prepare-corpus.sh or written by autoassist-filter")
    return np.loadtxt(path, dtype=np.int64, ndmin=1)


def dropped_by_kind(labels, prepared, filtered):
    """{kind: (prepared pairs, share of them not in *filtered*)} over the raw lines."""
    total = collections.Counter(labels[i] for i in prepared)
    kept = collections.Counter(labels[i] for i in filtered)
    return {kind: (n, 1 - kept[kind] / n) for kind, n in sorted(total.items())}


def main(argv=None):
    p = doc_parser(__doc__, 1)
    p.add_argument("--labels", required=True, type=Path, help="one label a raw training line")
    p.add_argument("--data", required=True, type=Path, help="the prepared corpus")
    p.add_argument("filtered", nargs="+", type=Path, help="filtered corpora of DATA")
    p.add_argument("--out", type=Path, help="write the shares as JSON here too")
    a = p.parse_args(argv)
    labels = a.labels.read_text(encoding="utf-8").split("\n")
    prepared = kept_lines(a.data)
    if prepared.max() >= len(labels):
        sys.exit(f"filter_kinds: {a.data}/train.kept-lines names line {prepared.max() + 1} "
                 f"but {a.labels} has {len(labels)} lines: give the labels of DATA's raw text")
    report = {}
    for folder in a.filtered:
        shares = dropped_by_kind(labels, prepared, kept_lines(folder))
        report[str(folder)] = {k: {"pairs": n, "dropped": round(s, 4)}
                               for k, (n, s) in shares.items()}
        print(f"{folder}: " + ", ".join(f"{k} {s:.1%} of {n:,}" for k, (n, s) in shares.items()))
    if a.out:
        a.out.write_text(json.dumps(report, indent=1) + "\n")


if __name__ == "__main__":
    main()

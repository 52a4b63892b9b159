#!/usr/bin/env python3
"""The noise-filter oracle: a prepared noisy corpus without its labelled noisy pairs; or,
with ``--by checks``, without the pairs its pair checks flag (what a user could filter).

A noise-aware selection rule can at best leave out every noisy pair and nothing else.
Training plain fairseq on what remains measures that bound: if even the clean pairs alone
do not reach the noisy baseline's loss with clearly fewer Boss tokens, no rule can by
skipping the noise. This script writes that corpus from a directory of
``scripts/prepare-corpus.sh`` whose training pairs carry labels (``research/add_noise.py``):

* ``OUT/train.SRC-TGT.{SRC,TGT}.{bin,idx}``: the binarised training pairs whose label is
  ``clean``, copied token for token (same dictionary, same subwords: validation losses of
  the two corpora compare directly);
* ``OUT/train.kept-lines``: their raw line numbers, as prepare-corpus.sh writes them;
* the dictionaries, valid and test splits, ``raw/`` and ``spm/`` linked to DATA's;
* ``OUT/train.SRC-TGT.autoassist.*``: the TF-IDF features (``autoassist-features``), so that
  ``python -m research.bench --data OUT`` runs every arm.

``--by checks`` keeps instead the pairs that ``autoassist-features``' pair checks do not
flag (``checks.columns.flagged`` of DATA's pair-checks file, no labels needed): the
corpus a user gets who filters with the checks before training plain fairseq, the simple
alternative to accepting flagged pairs at the floor (the product's ``autoassist-filter``,
whose code this runs, with the corpus's labels counted beside).

Example::

    python -m research.drop_noise --data work/multi30k-noisy --out work/multi30k-noisy-oracle
    python -m research.drop_noise --data work/multi30k-noisy --by checks \
        --out work/multi30k-noisy-checked
"""

import argparse
from collections import Counter
from pathlib import Path

import numpy as np

from autoassist_fairseq.features import prepared
from autoassist_fairseq.tools import filter as corpus_filter


def fail(message):
    raise SystemExit(f"drop_noise.py: error: {message}")


def read_labels(data, num_pairs):
    """Per binarised training pair, its label: DATA/train.noise-labels through train.kept-lines."""
    labels_path, kept_path = data / "train.noise-labels", data / "train.kept-lines"
    for path, why in ((labels_path, "copy the OUT.labels of research/add_noise.py there"),
                      (kept_path, "rerun scripts/prepare-corpus.sh, which writes it")):
        if not path.exists():
            fail(f"{path} not found: {why}")
    labels = np.array(labels_path.read_text(encoding="utf-8").splitlines(), dtype=object)
    kept = np.loadtxt(kept_path, dtype=np.int64, ndmin=1)
    if len(kept) and kept.max() >= len(labels):
        fail(f"{kept_path} refers to raw line {kept.max()} but {labels_path} has "
             f"{len(labels)} lines: the labels belong to another corpus")
    if len(kept) != num_pairs:
        fail(f"{kept_path} has {len(kept)} lines for {num_pairs} binarised pairs: rerun "
             "scripts/prepare-corpus.sh")
    return labels[kept]


def drop_noise(data, out, by="labels", drop_share=0.0):
    data, out = Path(data), Path(out)
    if data.resolve() == out.resolve():
        fail("--out must differ from --data")
    try:
        src, tgt = prepared.language_pair(data)
        num_pairs = len(prepared.open_training_sides(data, src, tgt)[src])
        if by == "checks":  # what a user gets from autoassist-filter
            if not (data / "train.kept-lines").exists():
                fail(f"{data / 'train.kept-lines'} not found: rerun scripts/prepare-corpus.sh, "
                     "which writes it")
            flags, dropped = corpus_filter.filter_flagged(data, out, drop_share=drop_share)
            labels = np.where(flags, "flagged", np.where(dropped, "ranked", "clean")).astype(object)
        else:
            labels = read_labels(data, num_pairs)
            keep = np.flatnonzero(labels == "clean")
            if not len(keep):
                fail(f"no pair of {data} is labelled clean: nothing to train on")
            corpus_filter.write_corpus(data, out, keep)
    except (FileNotFoundError, ValueError) as err:
        fail(err)
    counts = Counter(labels.tolist())
    print(f"kept {counts['clean']} of {len(labels)} pairs; dropped "
          + ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()) if kind != "clean"))
    if by == "checks" and (data / "train.noise-labels").exists():
        noise = read_labels(data, num_pairs)  # what the checks dropped, by the corpus's labels
        dropped = Counter(noise[labels != "clean"].tolist())
        print("dropped by label: " + ", ".join(
            f"{kind} {dropped[kind]} of {n}" for kind, n in sorted(Counter(noise.tolist()).items())))
    print(f"wrote {out}")


def main(argv=None):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                epilog="example: python -m research.drop_noise --data "
                                       "work/multi30k-noisy --out work/multi30k-noisy-oracle")
    p.add_argument("--data", required=True, type=Path,
                   help="directory of scripts/prepare-corpus.sh (with train.noise-labels for "
                        "--by labels)")
    p.add_argument("--out", required=True, type=Path, help="the new data directory")
    p.add_argument("--by", choices=("labels", "checks"), default="labels",
                   help="drop the pairs not labelled clean (labels, the oracle; needs "
                        "train.noise-labels) or the pairs the pair checks flag (checks)")
    p.add_argument("--drop-share", type=float, default=0.0, metavar="S",
                   help="with --by checks: autoassist-filter's --drop-share, the share S of "
                        "the pairs that rank as most noise-like (those beyond the flagged "
                        "ones count as 'ranked')")
    a = p.parse_args(argv)
    if a.drop_share and a.by != "checks":
        p.error("--drop-share needs --by checks")
    drop_noise(a.data, a.out, a.by, a.drop_share)


if __name__ == "__main__":
    main()

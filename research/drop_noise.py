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
flag (``features.pair_checks.flagged`` of DATA's pair-checks file, no labels needed): the
corpus a user gets who filters with the checks before training plain fairseq, the simple
alternative to accepting flagged pairs at the floor.

Example::

    python -m research.drop_noise --data work/multi30k-noisy --out work/multi30k-noisy-oracle
    python -m research.drop_noise --data work/multi30k-noisy --by checks \
        --out work/multi30k-noisy-checked
"""

import argparse
from collections import Counter
from pathlib import Path

import numpy as np
import torch


def language_pair(data):
    """(source, target) of the binarised training set of a prepared directory."""
    idx = sorted(p.name for p in data.glob("train.*-*.*.idx"))
    if not idx:
        raise SystemExit(f"drop_noise.py: error: no binarised training set in {data} "
                         "(train.SRC-TGT.*.idx); give a directory of scripts/prepare-corpus.sh")
    src, tgt = idx[0].split(".")[1].split("-")
    return src, tgt


def read_labels(data):
    """Per binarised training pair, its label: DATA/train.noise-labels through train.kept-lines."""
    labels_path, kept_path = data / "train.noise-labels", data / "train.kept-lines"
    for path, why in ((labels_path, "copy the OUT.labels of research/add_noise.py there"),
                      (kept_path, "rerun scripts/prepare-corpus.sh, which writes it")):
        if not path.exists():
            raise SystemExit(f"drop_noise.py: error: {path} not found: {why}")
    labels = np.array(labels_path.read_text(encoding="utf-8").splitlines(), dtype=object)
    kept = np.loadtxt(kept_path, dtype=np.int64, ndmin=1)
    if len(kept) and kept.max() >= len(labels):
        raise SystemExit(f"drop_noise.py: error: {kept_path} refers to raw line {kept.max()} "
                         f"but {labels_path} has {len(labels)} lines: the labels belong to "
                         "another corpus")
    return labels[kept], kept


def open_side(prefix):
    from fairseq.data import indexed_dataset

    return indexed_dataset.make_dataset(prefix, impl=indexed_dataset.infer_dataset_impl(prefix))


def write_subset(dataset, prefix_out, keep, dict_path):
    """Copy the rows *keep* of a binarised side into a new mmap dataset."""
    from fairseq.data import Dictionary, indexed_dataset

    builder = indexed_dataset.make_builder(indexed_dataset.data_file_path(prefix_out), "mmap",
                                           vocab_size=len(Dictionary.load(str(dict_path))))
    for i in keep:
        builder.add_item(torch.as_tensor(dataset[int(i)]))
    builder.finalize(indexed_dataset.index_file_path(prefix_out))


def link(target, name):
    """OUT/name -> target (absolute), replacing an old link."""
    if name.is_symlink() or name.exists():
        name.unlink()
    name.symlink_to(target.resolve())


def flagged_pairs(data, src, tgt):
    """Per binarised training pair, whether the pair checks of its feature file flag it, at
    the settings its header records (what the task reads)."""
    from autoassist_fairseq.features.store import FeatureStore

    prefix = str(data / f"train.{src}-{tgt}.autoassist")
    try:
        return FeatureStore.open(prefix).suspect_pairs()
    except (FileNotFoundError, ValueError) as err:
        raise SystemExit(f"drop_noise.py: error: {err}")


def drop_noise(data, out, by="labels"):
    data, out = Path(data), Path(out)
    if data.resolve() == out.resolve():
        raise SystemExit("drop_noise.py: error: --out must differ from --data")
    src, tgt = language_pair(data)
    if by == "labels":
        labels, kept = read_labels(data)
    else:
        kept_path = data / "train.kept-lines"
        if not kept_path.exists():
            raise SystemExit(f"drop_noise.py: error: {kept_path} not found: rerun "
                             "scripts/prepare-corpus.sh, which writes it")
        kept = np.loadtxt(kept_path, dtype=np.int64, ndmin=1)
        flags = flagged_pairs(data, src, tgt)
        if len(flags) != len(kept):
            raise SystemExit(f"drop_noise.py: error: the pair checks of {data} cover "
                             f"{len(flags)} pairs, train.kept-lines {len(kept)}: rebuild the "
                             "features with autoassist-features")
        labels = np.where(flags, "flagged", "clean").astype(object)
    sides = {lang: open_side(str(data / f"train.{src}-{tgt}.{lang}")) for lang in (src, tgt)}
    for side in sides.values():  # checked before anything is written
        if len(side) != len(labels):
            raise SystemExit(f"drop_noise.py: error: {data}/train.kept-lines has {len(labels)} "
                             f"lines for {len(side)} binarised pairs: rerun "
                             "scripts/prepare-corpus.sh")
    keep = np.flatnonzero(labels == "clean")
    if not len(keep):
        why = "is labelled clean" if by == "labels" else "passes the pair checks"
        raise SystemExit(f"drop_noise.py: error: no pair of {data} {why}: nothing to train on")
    out.mkdir(parents=True, exist_ok=True)
    for path in data.iterdir():
        if path.name.startswith(("valid.", "test.", "dict.")) or path.name in ("raw", "spm"):
            link(path, out / path.name)
    for lang, side in sides.items():
        write_subset(side, str(out / f"train.{src}-{tgt}.{lang}"), keep,
                     data / f"dict.{lang}.txt")
    np.savetxt(out / "train.kept-lines", kept[keep], fmt="%d")
    counts = Counter(labels.tolist())
    print(f"kept {len(keep)} of {len(labels)} pairs; dropped "
          + ", ".join(f"{kind} {n}" for kind, n in sorted(counts.items()) if kind != "clean"))
    if by == "checks" and (data / "train.noise-labels").exists():
        noise, _ = read_labels(data)  # what the checks dropped, by the corpus's labels
        dropped = Counter(noise[labels != "clean"].tolist())
        print("flagged by label: " + ", ".join(
            f"{kind} {dropped[kind]} of {n}" for kind, n in sorted(Counter(noise.tolist()).items())))
    from autoassist_fairseq.features.build import build_features
    build_features(str(out), src, tgt)
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
    a = p.parse_args(argv)
    drop_noise(a.data, a.out, a.by)


if __name__ == "__main__":
    main()

"""The mix of labelled and clean pairs prepared as ``scripts/prepare-corpus.sh`` prepares a
training set, and counted as ``fairseq-preprocess --joined-dictionary`` binarises it: what
``autoassist-check-report`` runs the pair checks on, so that they see the mix as
``autoassist-features`` sees a corpus.
"""

import os
from typing import Dict

import numpy as np

from ..features.tfidf import count_matrix
from ..checks.words import Pieces
from ..prepare import clean_corpus, spm_train_encode


def prepare(src_lines, tgt_lines, src: str, tgt: str, workdir: str, bpe_size: int,
            ratio: float, max_chars: int, max_len: int):
    """The training-set steps of ``scripts/prepare-corpus.sh`` on the mixed text
    (:mod:`..prepare.clean_corpus`, :mod:`..prepare.spm_train_encode`): returns
    the line number (in the mix) of every kept pair and its subword pieces per side."""
    raw, spm = os.path.join(workdir, "raw"), os.path.join(workdir, "spm")
    os.makedirs(raw, exist_ok=True)
    mixed = [os.path.join(workdir, f"mixed.{lang}") for lang in (src, tgt)]
    for path, lines in zip(mixed, (src_lines, tgt_lines)):
        with open(path, "w", encoding="utf-8", newline="\n") as f:
            f.writelines(line.replace("\n", " ") + "\n" for line in lines)
    rawf = [os.path.join(raw, f"train.{lang}") for lang in (src, tgt)]
    unf = [os.path.join(spm, f"train.unfiltered.{lang}") for lang in (src, tgt)]
    out = [os.path.join(spm, f"train.{lang}") for lang in (src, tgt)]
    ratio_args = ["--ratio", str(ratio)] if ratio else ["--no-ratio-filter"]
    steps = [
        (clean_corpus.main, ["--in-src", mixed[0], "--in-tgt", mixed[1], "--out-src", rawf[0],
                             "--out-tgt", rawf[1], "--filter", "--min-len", "1", "--max-len", "0",
                             "--max-chars", str(max_chars), "--no-ratio-filter",
                             "--line-ids-out", os.path.join(raw, "train.kept-lines")]),
        (spm_train_encode.main, ["train", "--model-prefix", os.path.join(spm, "spm"),
                                 "--vocab-size", str(bpe_size), "--threads", "1"] + rawf),
        (spm_train_encode.main, ["encode", "--model", os.path.join(spm, "spm.model"),
                                 "--inputs"] + rawf + ["--outputs"] + unf),
        (clean_corpus.main, ["--in-src", unf[0], "--in-tgt", unf[1], "--out-src", out[0],
                             "--out-tgt", out[1], "--filter", "--min-len", "1", "--max-len",
                             str(max_len)] + ratio_args +
         ["--line-ids-in", os.path.join(raw, "train.kept-lines"),
          "--line-ids-out", os.path.join(workdir, "train.kept-lines")]),
    ]
    for main, argv in steps:
        try:
            failed = main(argv)
        except RuntimeError as err:  # sentencepiece's trainer: e.g. too few pieces
            if main is not spm_train_encode.main:
                raise
            raise ValueError(f"sentencepiece could not train a vocabulary of --bpe-size "
                             f"{bpe_size} on the mix ({err}); give a larger --bpe-size "
                             "(prepare-corpus.sh's default: 8000)") from None
        if failed:
            raise RuntimeError(f"preparation step failed: {' '.join(argv)}")
    with open(os.path.join(workdir, "train.kept-lines")) as f:
        kept = np.array([int(x) for x in f.read().split()], dtype=np.int64)
    pieces = []
    for path in out:
        with open(path, encoding="utf-8", newline="\n") as f:
            pieces.append([line.split() for line in f.read().split("\n")[:-1]])
    return kept, pieces


def joined_counts(src_pieces, tgt_pieces):
    """Subword counts of both sides over one vocabulary (the ``--joined-dictionary`` of
    ``fairseq-preprocess``, up to the order of its ids), the vocabulary's symbols, and each
    side's :class:`..checks.words.Pieces` (the langid check's input)."""
    vocab: Dict[str, int] = {}
    sides = []
    for side in (src_pieces, tgt_pieces):
        ids = np.fromiter((vocab.setdefault(p, len(vocab)) for sent in side for p in sent),
                          dtype=np.int64)
        sides.append((ids, np.cumsum([0] + [len(sent) for sent in side])))
    symbols = list(vocab)  # insertion order: symbol of id i
    return ([count_matrix(ids, offsets, len(vocab)) for ids, offsets in sides], symbols,
            [Pieces(ids, offsets, symbols) for ids, offsets in sides])

"""A prepared data directory as the tools read it: its language pair, each binarised pair's
raw line, the training sides, and which pairs the pair checks of its feature file flag (the
decision training makes), with each check's scores.
"""

from pathlib import Path
from typing import Optional

import numpy as np


def language_pair(data: Path):
    """(source, target) of the binarised training set of a data directory."""
    from .binarised import binarised_pairs

    pairs = binarised_pairs(data, "train")
    if not pairs:
        raw = sorted(p.name for p in Path(data).glob("train.*-*.*") if p.is_file() and
                     p.name.count(".") == 2 and p.suffix[1:] in p.name.split(".")[1].split("-"))
        hint = (f" (it holds {', '.join(raw[:2])}: raw text of fairseq-preprocess --dataset-impl "
                "raw; binarise it again without that flag)") if raw else ""
        raise FileNotFoundError(f"no binarised training set in {data} (train.SRC-TGT.*.idx)"
                                f"{hint}; give a directory of scripts/prepare-corpus.sh or "
                                "fairseq-preprocess")
    if len(pairs) > 1:  # which one was meant is not for a tool to guess
        raise ValueError(f"{data} holds the training sets of {len(pairs)} language pairs "
                         f"({', '.join('-'.join(p) for p in pairs)}): the tools read one "
                         "pair's training set; give a directory with one (fairseq-preprocess "
                         "--destdir per pair)")
    return pairs[0]


def kept_lines(data: Path, num_pairs: int) -> Optional[np.ndarray]:
    """The raw line number of each binarised training pair (DATA/train.kept-lines), or None
    when DATA has no such file."""
    path = Path(data) / "train.kept-lines"
    if not path.exists():
        return None
    kept = np.loadtxt(path, dtype=np.int64, ndmin=1)
    if len(kept) != num_pairs:
        raise ValueError(f"{path} has {len(kept)} lines for {num_pairs} binarised pairs: "
                         "rerun scripts/prepare-corpus.sh")
    return kept


def open_training_sides(data: Path, src: str, tgt: str):
    """{language: fairseq's indexed dataset of that side of the training set} (mmap, or lazy
    or cached: :func:`.binarised.open_side`)."""
    from .binarised import open_side

    sides = {lang: open_side(str(Path(data) / f"train.{src}-{tgt}.{lang}"))
             for lang in (src, tgt)}
    if len(sides[src]) != len(sides[tgt]):
        raise ValueError(f"{data}: the {src} side has {len(sides[src])} training sentences, "
                         f"the {tgt} side {len(sides[tgt])}: rerun the preparation")
    return sides


def flagged_pairs(data: Path, src: str, tgt: str):
    """Per binarised training pair, whether a pair check of its feature file flags it (as the
    task decides it), the union's noise score of each pair
    (:func:`..checks.flags.union_score`), and the settings the checks ran with. The file is
    checked against the binarised text, as training checks it."""
    flags, _, union, settings = check_evidence(data, src, tgt)
    return flags, union, settings


def check_evidence(data: Path, src: str, tgt: str):
    """:func:`flagged_pairs` with each check's (score, flags) before the union's score:
    (flags, per_check, union, settings)."""
    from ..checks.flags import check_scores, union_score
    from .training import open_checked_features

    sides = open_training_sides(data, src, tgt)
    store = open_checked_features(str(data), "train", src, tgt, np.asarray(sides[src].sizes),
                                  np.asarray(sides[tgt].sizes), len(sides[src]))
    flags = store.suspect_pairs()
    settings = store.pair_check_settings()
    per_check, margin = check_scores(store.pair_check_columns(), settings)
    return flags, per_check, union_score(per_check, margin), settings

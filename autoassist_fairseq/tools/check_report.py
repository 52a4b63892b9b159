"""``autoassist-check-report``: how well the pair checks find labelled noise.

The checks fit on the corpus they check, so labelled pairs alone would be a corpus made of
noise. The command mixes them into a clean corpus of the same language pair at a chosen
share, prepares the mix as ``scripts/prepare-corpus.sh`` does (the same cleaning step,
joint sentencepiece BPE, the same subword filters), counts the subwords of each side over one
joined vocabulary (what ``fairseq-preprocess --joined-dictionary`` binarises) and runs
:func:`..features.pair_checks.pair_checks`, the function ``autoassist-features`` runs. It
then scores every check on the labelled pairs:

- ``flag_rate[check][label]``: share of each label's pairs flagged by a check (of those that
  reached the checks; also for the groups ``A+L`` and ``V+F``); ``cleaning`` is the share
  the cleaning step dropped, ``union`` the share dropped or flagged by any check;
- ``flag_rate_by_kind[check][kind]``, ``counts_by_kind``: the same per value of the labelled
  file's optional ``kind`` column (e.g. the noise kinds of ``research/add_noise.py
  --labelled-out``), over the labelled pairs alone;
- ``precision`` / ``recall`` of the union for noise (``A``, ``L``, ``T``) against valid
  translations (``V``, ``F``);
- ``auc[name]``: area under the ROC curve of each score for ``V``+``F`` against ``A``+``L``
  (scikit-learn), for each check's continuous score, the union
  (:func:`..features.check_flags.union_score`; ``union_max_margin``: the union's pairs ranked
  by their largest margin alone) and ``bicleaner``; pairs the cleaning dropped rank above all;
- ``noise_found_at_valid_share[score][s]``: the share of ``A``+``L`` pairs above the bar of
  that score which ``V``+``F`` pairs pass but for a share s (0.05, 0.1, 0.2, 0.3, 0.5);
- ``auc_halves``: those scores' AUCs on the even and on the odd rows of the labelled file,
  two samples of it;
- ``opusfilter``: OpusFilter's common heuristic filters on the same pairs, side by side
  (:func:`opusfilter_report`; where opusfilter is installed, unless ``--no-opusfilter``);
- ``intervals[figure]``: for the goals' figures (:func:`key_figures`), how far each would
  move on another labelled sample of the same size drawn the same way (:mod:`.bootstrap`
  over the labelled pairs, ``--bootstrap`` resamples), OpusFilter's heuristics' among
  them (``auc opusfilter union``, ...), each resample's figures on the same rows for all;
- with ``--dynamics-passes K``, the Boss's training dynamics beside the checks: ``dynamics``
  and ``union_dynamics`` under ``auc``, ``flag_rate`` and ``noise_found_at_valid_share``,
  with their intervals (:mod:`.check_dynamics`);
- ``pairs_per_cpu_second``: the ``pair_checks`` call, the preparation with it, and
  OpusFilter's heuristics (``cpu_seconds``: the preparation's and the checks').

Over 300 lines: one command's pipeline (read, mix, prepare, check, score), read top to
bottom; each part is used by this command alone.

Example::

    autoassist-check-report labelled.tsv.gz --clean tatoeba/train wmt/newstest2012 \\
        --src en --tgt de --out report.json
"""

import argparse
import csv
import gzip
import importlib.util
import json
import logging
import os
import sys
import tempfile
import time
import zlib
from typing import Dict, List, Optional, Sequence, Tuple

import numpy as np
from sklearn.metrics import roc_auc_score

from ..features.check_settings import check_available
from ..features.pair_checks import PairCheckSettings, add_settings_arguments, check_scores, \
    pair_checks, settings_from_args, union_score
from ..features.tfidf import count_matrix
from ..features.words import Pieces
from ..prepare import clean_corpus, spm_train_encode
from .bootstrap import bootstrap

logger = logging.getLogger("autoassist_fairseq.check_report")

NOISE = ("A", "L", "T")  # precision / recall: these against VALID
VALID = ("V", "F")
LABELS = VALID + NOISE + ("MT", "E")  # the labels a labelled file may hold (case counts)
AUC_NOISE = ("A", "L")  # the kinds the checks claim to catch
CLEAN = "clean"  # the label of the clean corpus's own pairs


def _lines(path: str) -> List[str]:
    """The lines of a UTF-8 text file (gzip where *path* ends in ``.gz``), each with its
    ``\n``; a file that is not gzip, or a line that is not UTF-8, raises ValueError naming
    the file, the line and the fix."""
    try:
        if path.endswith(".gz"):
            with gzip.open(path, "rb") as f:
                raw = f.read()
        else:
            with open(path, "rb") as f:
                raw = f.read()
    except (gzip.BadGzipFile, EOFError, zlib.error) as err:
        raise ValueError(f"{path} is not a complete gzip file ({err}): give the file "
                         "gzip-compressed whole, or a plain-text file without the .gz "
                         "suffix") from None
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        line = raw.count(b"\n", 0, err.start) + 1
        column = err.start - (raw.rfind(b"\n", 0, err.start) + 1) + 1
        raise ValueError(f"{path} line {line}: not UTF-8 (byte 0x{raw[err.start]:02x} at byte "
                         f"{column} of the line); give the file in UTF-8, e.g. converted with "
                         "iconv -f LATIN1 -t UTF-8") from None
    lines = text.split("\n")  # "\n" alone ends a line, as csv and the preparation read it
    if not lines[-1]:
        lines.pop()
    return [line + "\n" for line in lines]


def read_labelled(path: str, src: str, tgt: str) -> Dict[str, list]:
    """Columns *src*, *tgt*, ``label`` and (optional) ``bicleaner`` and ``kind`` of a labelled
    TSV (``kind``: None where the file has no such column).

    Raises:
        FileNotFoundError: no file at *path*.
        ValueError: it is not gzip though named ``.gz``, a line is not UTF-8, a line has
            fewer fields than the header, a ``bicleaner`` field is not a number, a column
            or every pair is missing, or a label is unknown; the message names the file,
            the line and the column, and the fix.
    """
    if not os.path.isfile(path):
        raise FileNotFoundError(f"labelled pairs not found: {path}")
    reader = csv.DictReader(_lines(path), delimiter="\t", quoting=csv.QUOTE_NONE)
    missing = [c for c in (src, tgt, "label") if c not in (reader.fieldnames or [])]
    if missing:
        raise ValueError(f"{path} has no column {', '.join(missing)} (columns: "
                         f"{', '.join(reader.fieldnames or [])}); it needs one column per "
                         "language named as --src/--tgt, and 'label'")
    rows, bicleaner = [], []
    for row in reader:  # QUOTE_NONE: one record a line, so line_num is the record's line
        short = [c for c in reader.fieldnames if row[c] is None]
        if short:
            raise ValueError(
                f"{path} line {reader.line_num}: {len(reader.fieldnames) - len(short)} fields "
                f"where the header has {len(reader.fieldnames)} (no column "
                f"{', '.join(repr(c) for c in short)}); give every line a tab-separated field "
                "for each column of the header, empty where a value is unknown")
        if "bicleaner" in row:
            value = row["bicleaner"].strip()
            try:
                bicleaner.append(float(value) if value else np.nan)
            except ValueError:
                raise ValueError(f"{path} line {reader.line_num}, column 'bicleaner': "
                                 f"{value!r} is not a number; give the Bicleaner score, or "
                                 "leave the field empty for a pair without one") from None
        rows.append(row)
    if not rows:
        raise ValueError(f"{path} holds no pairs")
    labels = [(r["label"] or "").strip() for r in rows]
    unknown = sorted(set(labels) - set(LABELS))
    if unknown:
        count = sum(label in unknown for label in labels)
        raise ValueError(f"{path} has {count} pairs with labels outside the known set: "
                         f"{', '.join(repr(u) for u in unknown)}; the labels are "
                         f"{', '.join(LABELS)} (upper case; V, F: valid translations, A, L, "
                         "T: noise)")
    kind = [(r["kind"] or "").strip() for r in rows] if "kind" in rows[0] else None
    return {"src": [r[src] for r in rows], "tgt": [r[tgt] for r in rows], "label": labels,
            "bicleaner": np.array(bicleaner) if "bicleaner" in rows[0] else None, "kind": kind}


def _text(prefix: str, lang: str) -> List[str]:
    for path in (f"{prefix}.{lang}", f"{prefix}.{lang}.gz"):
        if os.path.isfile(path):
            return [line[:-1] for line in _lines(path)]
    raise FileNotFoundError(f"clean corpus side not found: {prefix}.{lang} (nor .gz)")


def read_clean(prefixes: Sequence[str], src: str, tgt: str):
    """All pairs of the clean corpora, pooled."""
    sources, targets = [], []
    for prefix in prefixes:
        s, t = _text(prefix, src), _text(prefix, tgt)
        if len(s) != len(t):
            raise ValueError(f"clean corpus {prefix}: {len(s)} {src} lines against {len(t)} "
                             f"{tgt} lines; line N of one side must translate line N of the other")
        sources += s
        targets += t
    return sources, targets


def mix(labelled: dict, clean_src, clean_tgt, share: float, seed: int):
    """Labelled pairs plus as many clean pairs (sampled) as make them *share* of the mix,
    shuffled. Returns (sources, targets, labels, row of each pair in the labelled file or -1)."""
    n = len(labelled["label"])
    want = int(round(n * (1.0 - share) / share))
    if want > len(clean_src):
        raise ValueError(f"a share of {share} needs {want} clean pairs, the clean corpus has "
                         f"{len(clean_src)}: give a larger --share or more --clean corpora")
    rng = np.random.default_rng(seed)
    clean = rng.choice(len(clean_src), size=want, replace=False)
    src = list(labelled["src"]) + [clean_src[i] for i in clean]
    tgt = list(labelled["tgt"]) + [clean_tgt[i] for i in clean]
    labels = list(labelled["label"]) + [CLEAN] * want
    row = np.concatenate([np.arange(n), np.full(want, -1)])
    order = rng.permutation(len(src))
    return ([src[i] for i in order], [tgt[i] for i in order], [labels[i] for i in order],
            row[order])


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
    side's :class:`..features.words.Pieces` (the langid check's input)."""
    vocab: Dict[str, int] = {}
    sides = []
    for side in (src_pieces, tgt_pieces):
        ids = np.fromiter((vocab.setdefault(p, len(vocab)) for sent in side for p in sent),
                          dtype=np.int64)
        sides.append((ids, np.cumsum([0] + [len(sent) for sent in side])))
    symbols = list(vocab)  # insertion order: symbol of id i
    return ([count_matrix(ids, offsets, len(vocab)) for ids, offsets in sides], symbols,
            [Pieces(ids, offsets, symbols) for ids, offsets in sides])


def _auc(labels: np.ndarray, score: np.ndarray) -> float:
    """AUC of *score* (higher: more likely noise) for A+L against V+F."""
    pick = np.isin(labels, VALID + AUC_NOISE) & ~np.isnan(score)
    y = np.isin(labels[pick], AUC_NOISE)
    score = score[pick]
    finite = score[np.isfinite(score)]
    low, high = (finite.min(), finite.max()) if finite.size else (0.0, 0.0)
    # dropped pairs (+inf): above every pair that reached the checks
    score = np.clip(score, low - 1.0, high + 1.0)
    if y.all() or not y.any():
        return float("nan")
    return float(roc_auc_score(y, score))


def noise_found_at(labels: np.ndarray, score: np.ndarray, valid_share: float) -> float:
    """The share of A+L pairs that rank above the bar of *score* (higher: noise) which lets
    through all but *valid_share* of the V+F pairs: how much noise a filter at that bar
    drops (``--drop-share`` of autoassist-filter ranks by the union's score)."""
    pick = np.isin(labels, VALID + AUC_NOISE) & ~np.isnan(score)
    noise, valid = score[pick & np.isin(labels, AUC_NOISE)], score[pick & np.isin(labels, VALID)]
    if not len(noise) or not len(valid):
        return float("nan")
    bar = np.quantile(valid, 1.0 - valid_share, method="higher")
    return float(np.mean(noise > bar))


def flagged_union(dropped: np.ndarray, flags: Dict[str, np.ndarray]) -> np.ndarray:
    """Pairs the cleaning dropped or any check flagged."""
    union = dropped.copy()
    for f in flags.values():
        union |= f
    return union


def key_figures(labels: np.ndarray, union: np.ndarray, union_scores: np.ndarray,
                bicleaner: Optional[np.ndarray],
                heuristics: Optional[Dict[str, np.ndarray]] = None) -> Dict[str, float]:
    """The goals' figures: the union's flag rates of A+L, V+F and L, its precision and
    recall, the AUCs of the union's score and of Bicleaner's and their difference, and the
    A+L each finds at V+F = 5% (*union*: dropped or flagged; *union_scores*: +inf where
    dropped). *heuristics* (``flag``: OpusFilter's union flag, ``score``: the number of its
    filters that reject a pair, on the same rows): that union's A+L and V+F flag rates, AUC,
    A+L found at V+F = 5%, and the checks' union's AUC and A+L found less its own (the
    same differences against Bicleaner)."""
    out = {}
    for name, group in (("union A+L", AUC_NOISE), ("union V+F", VALID), ("union L", ("L",))):
        pick = np.isin(labels, group)
        out[name] = float(union[pick].mean()) if pick.any() else float("nan")
    noise, valid = np.isin(labels, NOISE), np.isin(labels, VALID)
    true_pos = int(np.count_nonzero(union & noise))
    out["precision"] = true_pos / max(int(np.count_nonzero(union & (noise | valid))), 1)
    out["recall"] = true_pos / max(int(np.count_nonzero(noise)), 1)
    out["auc union"] = _auc(labels, union_scores)
    out["union A+L found at V+F 5%"] = noise_found_at(labels, union_scores, 0.05)
    if bicleaner is not None:
        out["auc bicleaner"] = _auc(labels, -bicleaner)
        out["auc union - bicleaner"] = out["auc union"] - out["auc bicleaner"]
        out["bicleaner A+L found at V+F 5%"] = noise_found_at(labels, -bicleaner, 0.05)
        out["union - bicleaner A+L found at V+F 5%"] = \
            out["union A+L found at V+F 5%"] - out["bicleaner A+L found at V+F 5%"]
    if heuristics is not None:
        for name, group in (("opusfilter union A+L", AUC_NOISE),
                            ("opusfilter union V+F", VALID)):
            pick = np.isin(labels, group)
            out[name] = float(heuristics["flag"][pick].mean()) if pick.any() else float("nan")
        out["auc opusfilter union"] = _auc(labels, heuristics["score"])
        out["auc union - opusfilter union"] = out["auc union"] - out["auc opusfilter union"]
        out["opusfilter union A+L found at V+F 5%"] = noise_found_at(
            labels, heuristics["score"], 0.05)
        out["union - opusfilter union A+L found at V+F 5%"] = \
            out["union A+L found at V+F 5%"] - out["opusfilter union A+L found at V+F 5%"]
    return out


def report_intervals(labels: np.ndarray, drawn: np.ndarray, union: np.ndarray,
                     union_scores: np.ndarray, bicleaner: Optional[np.ndarray],
                     heuristics: Optional[Dict[str, np.ndarray]], replicates: int,
                     seed: int) -> Dict[str, Dict[str, float]]:
    """``intervals``: :func:`key_figures` over *replicates* resamples (with replacement) of
    the rows *drawn* (the labelled pairs; the clean pairs stay out). Each resample's figures
    of the checks, of Bicleaner and of OpusFilter's heuristics are computed on the same
    resampled rows, so that their intervals and differences compare."""

    def figures(index):
        pick = drawn[index]
        return key_figures(labels[pick], union[pick], union_scores[pick],
                           None if bicleaner is None else bicleaner[pick],
                           None if heuristics is None else
                           {k: v[pick] for k, v in heuristics.items()})

    return bootstrap(figures, len(drawn), replicates, seed)


def flag_rates(labels: np.ndarray, dropped: np.ndarray, flags: Dict[str, np.ndarray],
               groups: Sequence[Sequence[str]] = ()) -> Dict[str, Dict[str, float]]:
    """``flag_rate[check][label]``: the share of each label's pairs that the cleaning
    dropped, that a check flagged (of those that reached it) or that either did (``union``);
    also for each group of labels in *groups* (named by its labels joined by '+')."""
    kinds = sorted(set(labels.tolist()))
    union = flagged_union(dropped, flags)
    flag_rate: Dict[str, Dict[str, float]] = {}
    for name, f in [("cleaning", dropped)] + list(flags.items()) + [("union", union)]:
        reached = ~dropped if name not in ("cleaning", "union") else np.ones_like(dropped)
        flag_rate[name] = {k: float(f[(labels == k) & reached].mean())
                           if ((labels == k) & reached).any() else float("nan") for k in kinds}
        for group in groups:
            pick = np.isin(labels, group) & reached
            flag_rate[name]["+".join(group)] = float(f[pick].mean()) if pick.any() else float("nan")
    return flag_rate


def _counts(labels: np.ndarray, dropped: np.ndarray) -> Dict[str, Dict[str, int]]:
    return {k: {"pairs": int(np.count_nonzero(labels == k)),
                "reached_checks": int(np.count_nonzero((labels == k) & ~dropped)),
                "dropped_by_cleaning": int(np.count_nonzero((labels == k) & dropped))}
            for k in sorted(set(labels.tolist()))}


def report(labels: np.ndarray, dropped: np.ndarray, flags: Dict[str, np.ndarray],
           scores: Dict[str, np.ndarray], union_scores: Dict[str, np.ndarray], bicleaner,
           half: Optional[np.ndarray] = None, kinds: Optional[np.ndarray] = None) -> dict:
    """The figures of the module's docstring. *labels*, *dropped*: every labelled pair and the
    clean pairs; *flags* / *scores*: per check, NaN / False where the pair was dropped;
    *union_scores*: the union's scores by name, +inf where the pair was dropped; *half*:
    0 or 1 for the even and odd rows of the labelled file (-1 for the clean pairs); *kinds*:
    the labelled file's ``kind`` of each pair (None for the clean pairs), or None."""
    union = flagged_union(dropped, flags)
    flag_rate = flag_rates(labels, dropped, flags, (AUC_NOISE, VALID))  # the goals' groups
    goals = key_figures(labels, union, union_scores["union"], bicleaner)
    ranked = dict(union_scores)
    if bicleaner is not None:
        ranked["bicleaner"] = -bicleaner  # higher Bicleaner scores mean a valid translation
    auc = {name: _auc(labels, s) for name, s in {**scores, **ranked}.items()}
    found = {name: {str(v): noise_found_at(labels, s, v) for v in (0.05, 0.1, 0.2, 0.3, 0.5)}
             for name, s in ranked.items()}
    halves = {}
    if half is not None:  # two samples of the labelled pairs: how far a figure moves
        for h, key in ((0, "even_rows"), (1, "odd_rows")):
            other = np.where(half == 1 - h, "other half", labels)
            halves[key] = {name: _auc(other, s) for name, s in ranked.items()}
    out = {
        "flag_rate": flag_rate,
        "precision": goals["precision"],
        "recall": goals["recall"],
        "auc": auc,
        "noise_found_at_valid_share": found,
        "auc_halves": halves,
        "counts": _counts(labels, dropped),
    }
    if kinds is not None:  # the labelled pairs alone, per kind
        pick = np.array([k is not None for k in kinds], dtype=bool)
        by_kind = np.array([str(k) for k in kinds[pick]])
        out["flag_rate_by_kind"] = flag_rates(by_kind, dropped[pick],
                                              {name: f[pick] for name, f in flags.items()})
        out["counts_by_kind"] = _counts(by_kind, dropped[pick])
    return out


def opusfilter_report(labels: np.ndarray, src_lines, tgt_lines, src: str,
                      tgt: str) -> Tuple[dict, Dict[str, np.ndarray]]:
    """OpusFilter's heuristic filters (:mod:`.opusfilter_heuristics`) on the raw text of
    every pair of the mix: their parameters, each filter's and the union's flag rates per
    label (and A+L, V+F), the AUCs of each filter's flag and of the union's score (the number
    of filters that reject a pair), the union's ``noise_found_at_valid_share``, and the pairs
    the filters score a CPU second; and the union's ``flag`` and ``score`` of every pair
    (:func:`key_figures`'s *heuristics*, for the bootstrap)."""
    from .opusfilter_heuristics import heuristic_flags, heuristics

    start = time.process_time()
    flags = heuristic_flags(src_lines, tgt_lines, src, tgt)
    seconds = time.process_time() - start
    count = np.sum([f.astype(np.float64) for f in flags.values()], axis=0)
    kinds = sorted(set(labels.tolist()))
    rate: Dict[str, Dict[str, float]] = {}
    for name, f in list(flags.items()) + [("union", count > 0)]:
        rate[name] = {k: float(f[labels == k].mean()) for k in kinds}
        for group in (AUC_NOISE, VALID):
            pick = np.isin(labels, group)
            rate[name]["+".join(group)] = float(f[pick].mean()) if pick.any() else float("nan")
    auc = {name: _auc(labels, f.astype(np.float64)) for name, f in flags.items()}
    auc["union"] = _auc(labels, count)
    block = {"parameters": dict(heuristics(src, tgt)), "flag_rate": rate, "auc": auc,
             "noise_found_at_valid_share": {
                 "union": {str(v): noise_found_at(labels, count, v)
                           for v in (0.05, 0.1, 0.2, 0.3, 0.5)}},
             "pairs_per_cpu_second": len(labels) / max(seconds, 1e-9)}
    return block, {"flag": count > 0, "score": count}


def write_pairs(path, row, labels, dropped, flags, scores, union_flag, union, bicleaner,
                src_lines, tgt_lines, langs) -> None:
    """Every labelled pair, in the labelled file's order, as a TSV (gzip where *path* ends
    in ``.gz``): its row, label, whether the cleaning dropped it, each check's flag and score
    (empty where it did not reach the checks), the union's flag (:func:`flagged_union`) and
    score, Bicleaner's score and the two sides: what a check flags, to read."""
    names = sorted(flags)
    opener = gzip.open if path.endswith(".gz") else open
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)

    def number(x):
        return "" if x is None or np.isnan(x) else f"{x:.4g}"

    with opener(path, "wt", encoding="utf-8") as f:
        f.write("\t".join(["row", "label", "dropped", *[f"{n}_flag" for n in names],
                           *[f"{n}_score" for n in names], "union_flag", "union_score",
                           "bicleaner", *langs]) + "\n")
        for i in np.flatnonzero(row >= 0)[np.argsort(row[row >= 0], kind="stable")]:
            reached = not dropped[i]
            f.write("\t".join([
                str(row[i]), labels[i], str(int(dropped[i])),
                *[str(int(flags[n][i])) if reached else "" for n in names],
                *[number(scores[n][i]) if reached else "" for n in names],
                str(int(union_flag[i])), number(union[i]) if reached else "",
                "" if bicleaner is None else number(bicleaner[i]),
                src_lines[i].replace("\t", " "), tgt_lines[i].replace("\t", " ")]) + "\n")


def check_report(args) -> dict:
    labelled = read_labelled(args.labelled, args.src, args.tgt)
    clean_src, clean_tgt = read_clean(args.clean, args.src, args.tgt)
    src_lines, tgt_lines, labels, row = mix(labelled, clean_src, clean_tgt, args.share, args.seed)
    settings = settings_from_args(args)
    start = time.process_time()
    with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
        kept, (src_pieces, tgt_pieces) = prepare(
            src_lines, tgt_lines, args.src, args.tgt, workdir, args.bpe_size,
            0.0 if args.no_ratio_filter else args.ratio, args.max_chars, args.max_len)
    counts, symbols, pieces = joined_counts(src_pieces, tgt_pieces)
    prepared = time.process_time()
    checks = pair_checks(*counts, symbols=symbols, settings=settings, texts=pieces,
                         langs=(args.src, args.tgt))
    checked = time.process_time()
    labels = np.asarray(labels)
    n = len(labels)
    dropped = np.ones(n, dtype=bool)
    dropped[kept] = False
    flags, scores = {}, {}
    # dropped pairs: above all (+inf)
    union_scores = {"union": np.full(n, np.inf), "union_max_margin": np.full(n, np.inf)}
    per_check, margin = check_scores(checks, settings)
    for name in per_check:
        f, s = np.zeros(n, dtype=bool), np.full(n, np.nan)
        f[kept], s[kept] = per_check[name][1], per_check[name][0]
        flags[name], scores[name] = f, s
    union_scores["union"][kept] = union_score(per_check, margin)
    union_scores["union_max_margin"][kept] = margin
    bicleaner = None
    if labelled["bicleaner"] is not None:
        bicleaner = np.full(n, np.nan)
        bicleaner[row >= 0] = labelled["bicleaner"][row[row >= 0]]
    kinds = None
    if labelled["kind"] is not None:
        kinds = np.array([labelled["kind"][r] if r >= 0 else None for r in row], dtype=object)
    out = report(labels, dropped, flags, scores, union_scores, bicleaner,
                 half=np.where(row >= 0, row % 2, -1), kinds=kinds)
    union = flagged_union(dropped, flags)
    # pairs a CPU second (process time: all threads of this process; one core under
    # OMP_NUM_THREADS=1): the pair_checks call on the pairs that reached it, and the
    # preparation (cleaning, sentencepiece training and encoding, counts) with it on the mix
    out["pairs_per_cpu_second"] = {
        "pair_checks": len(kept) / max(checked - prepared, 1e-9),
        "preparation and pair_checks": n / max(checked - start, 1e-9)}
    out["cpu_seconds"] = {"preparation": prepared - start, "pair_checks": checked - prepared}
    heuristics = None
    if not args.no_opusfilter and importlib.util.find_spec("opusfilter") is not None:
        out["opusfilter"], heuristics = opusfilter_report(labels, src_lines, tgt_lines,
                                                          args.src, args.tgt)
        out["pairs_per_cpu_second"]["opusfilter heuristics"] = \
            out["opusfilter"]["pairs_per_cpu_second"]
    if args.pairs_out:
        write_pairs(args.pairs_out, row, labels, dropped, flags, scores, union,
                    union_scores["union"], bicleaner, src_lines, tgt_lines, (args.src, args.tgt))
    drawn = np.flatnonzero(row >= 0)  # a new labelled sample; the clean pairs stay
    if args.bootstrap:
        out["intervals"] = report_intervals(labels, drawn, union, union_scores["union"],
                                            bicleaner, heuristics, args.bootstrap, args.seed)
    if args.dynamics_passes:
        from .check_dynamics import add_dynamics, dynamics_columns, train_dynamics

        with tempfile.TemporaryDirectory(dir=args.workdir) as workdir:
            score, dyn_flags = train_dynamics(workdir, args.src, args.tgt, src_pieces,
                                              tgt_pieces, args.dynamics_passes)
        columns = dynamics_columns(kept, n, dropped, union, union_scores["union"], score,
                                   dyn_flags)
        add_dynamics(out, labels, dropped, columns, args.dynamics_passes, drawn,
                     args.bootstrap, args.seed)
    out.update({
        "labelled": args.labelled, "clean_corpus": list(args.clean),
        "share": args.share, "pairs": {"labelled": int(np.count_nonzero(row >= 0)),
                                       "clean": int(np.count_nonzero(row < 0))},
        "preparation": {"bpe_size": args.bpe_size, "max_chars": args.max_chars,
                        "max_len": args.max_len,
                        "ratio": None if args.no_ratio_filter else args.ratio},
        "pair_checks": settings.to_dict(), "seed": args.seed,
    })
    return out


def get_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="autoassist-check-report", description=__doc__.split("\n\n")[0] + " Mixes "
        "labelled pairs into a clean corpus, prepares and checks the mix as scripts/"
        "prepare-corpus.sh and autoassist-features do, and writes per-label flag rates, "
        "precision, recall and ROC AUCs as JSON.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="example:\n  autoassist-check-report labelled.tsv.gz --clean tatoeba/train "
               "wmt/newstest2012 --src en --tgt de --out report.json")
    parser.add_argument("labelled", help="TSV (plain or .gz) with a header line and columns "
                        "named as --src and --tgt, 'label' (V, F, A, L, T, MT, E) and optional "
                        "'bicleaner' and 'kind' (flag rates per kind too, e.g. research/"
                        "add_noise.py --labelled-out)")
    parser.add_argument("--clean", nargs="+", required=True, metavar="PREFIX",
                        help="clean corpus PREFIX.SRC / PREFIX.TGT (plain or .gz); several are "
                             "pooled")
    parser.add_argument("--src", required=True, help="source language (column and file suffix)")
    parser.add_argument("--tgt", required=True, help="target language (column and file suffix)")
    parser.add_argument("--out", required=True, help="the JSON report to write")
    parser.add_argument("--share", type=float, default=0.1,
                        help="share of labelled pairs in the mix; clean pairs are sampled to "
                             "make it up (default: 0.1)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the sample (default: 0)")
    parser.add_argument("--bpe-size", type=int, default=8000,
                        help="sentencepiece vocabulary, as prepare-corpus.sh (default: 8000)")
    parser.add_argument("--ratio", type=float, default=1.5,
                        help="the piece-ratio filter, as prepare-corpus.sh (default: 1.5)")
    parser.add_argument("--no-ratio-filter", action="store_true",
                        help="no piece-ratio filter, as prepare-corpus.sh")
    parser.add_argument("--max-len", type=int, default=250,
                        help="most pieces a side, as prepare-corpus.sh (default: 250)")
    parser.add_argument("--max-chars", type=int, default=2000,
                        help="most characters a side, as prepare-corpus.sh (default: 2000)")
    parser.add_argument("--bootstrap", type=int, default=1000, metavar="N",
                        help="resamples of the labelled pairs for 'intervals': how far each "
                             "goal's figure would move on another sample of the same size "
                             "(0: none; default: 1000)")
    parser.add_argument("--workdir", default=None,
                        help="folder for the temporary prepared text (default: the system's)")
    parser.add_argument("--pairs-out", default=None, metavar="TSV",
                        help="also write every labelled pair with each check's flag and score, "
                             "the union's, Bicleaner's and its two sides (gzip for .gz)")
    parser.add_argument("--no-opusfilter", action="store_true",
                        help="leave out the 'opusfilter' block: OpusFilter's heuristic filters "
                             "on the same pairs (run where opusfilter is installed)")
    parser.add_argument("--dynamics-passes", type=int, default=0, metavar="K",
                        help="also train the small Boss (CPU) with the plugin K passes over the "
                             "kept pairs and report the training dynamics between passes 1 "
                             "and K ('dynamics', and 'union_dynamics' with the checks; "
                             "K >= 2; default: 0, none)")
    add_settings_arguments(parser)
    return parser


def cli_main(argv=None) -> int:
    args = get_parser().parse_args(argv)
    logging.basicConfig(format="%(asctime)s | %(levelname)s | %(name)s | %(message)s",
                        level=logging.INFO, stream=sys.stdout)
    if not 0.0 < args.share < 1.0:
        logger.error(f"--share must be between 0 and 1 (got {args.share})")
        return 2
    if args.bootstrap < 0 or args.bootstrap == 1:
        logger.error(f"--bootstrap needs 0 (no intervals) or at least 2 resamples (got "
                     f"{args.bootstrap})")
        return 2
    if args.dynamics_passes and args.dynamics_passes < 2:
        logger.error(f"--dynamics-passes {args.dynamics_passes}: the dynamics compare the "
                     "losses of pass 1 with a later pass; give 2 or more (e.g. 4), or 0 for none")
        return 2
    if args.bpe_size < 1:
        logger.error(f"--bpe-size must be at least 1 sentencepiece piece (got {args.bpe_size}; "
                     "prepare-corpus.sh's default: 8000)")
        return 2
    try:
        check_available(settings_from_args(args))  # names, bars and py3langid, before the work
    except ValueError as err:
        logger.error(str(err))
        return 2
    try:
        out = check_report(args)
    except (FileNotFoundError, ValueError, RuntimeError) as err:
        logger.error(str(err))
        return 1
    os.makedirs(os.path.dirname(os.path.abspath(args.out)), exist_ok=True)
    with open(args.out, "w") as f:
        json.dump(out, f, indent=1)
    u = out["flag_rate"]["union"]
    logger.info(f"wrote {args.out}: union flags " + ", ".join(f"{k} {v:.1%}" for k, v in u.items())
                + f"; precision {out['precision']:.3f}, recall {out['recall']:.3f}; AUC "
                + ", ".join(f"{k} {v:.3f}" for k, v in out["auc"].items())
                + (f"; OpusFilter's heuristics: union AUC {out['opusfilter']['auc']['union']:.3f}"
                   if "opusfilter" in out else ""))
    if "flag_rate_by_kind" in out:
        logger.info("union flags per kind: " + ", ".join(
            f"{k} {v:.1%}" for k, v in out["flag_rate_by_kind"]["union"].items()))
    return 0


if __name__ == "__main__":
    sys.exit(cli_main())

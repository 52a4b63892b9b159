"""The figures of ``autoassist-check-report``: how well a score or a flag tells the labelled
noise from the valid translations.

Every function takes the labels of the pairs (:mod:`.labelled_pairs`) and, per pair, whether
the preparation's cleaning dropped it, the checks' flags and scores and the union's. A pair
the cleaning dropped never reached the checks: its flags are False and its scores NaN, and
the union's scores rank it above every pair that reached them (+inf), since it is out of the
corpus whatever the bar.
"""

from typing import Dict, Optional, Sequence

import numpy as np
from sklearn.metrics import roc_auc_score

from .bootstrap import bootstrap
from .labelled_pairs import AUC_NOISE, NOISE, VALID

# the shares s of V+F pairs a bar may drop at which ``noise_found_at_valid_share`` is reported
VALID_SHARES = (0.05, 0.1, 0.2, 0.3, 0.5)


def noise_auc(labels: np.ndarray, score: np.ndarray) -> float:
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
    out["auc union"] = noise_auc(labels, union_scores)
    out["union A+L found at V+F 5%"] = noise_found_at(labels, union_scores, 0.05)
    if bicleaner is not None:
        out["auc bicleaner"] = noise_auc(labels, -bicleaner)
        out["auc union - bicleaner"] = out["auc union"] - out["auc bicleaner"]
        out["bicleaner A+L found at V+F 5%"] = noise_found_at(labels, -bicleaner, 0.05)
        out["union - bicleaner A+L found at V+F 5%"] = \
            out["union A+L found at V+F 5%"] - out["bicleaner A+L found at V+F 5%"]
    if heuristics is not None:
        for name, group in (("opusfilter union A+L", AUC_NOISE),
                            ("opusfilter union V+F", VALID)):
            pick = np.isin(labels, group)
            out[name] = float(heuristics["flag"][pick].mean()) if pick.any() else float("nan")
        out["auc opusfilter union"] = noise_auc(labels, heuristics["score"])
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
    """The figures of :mod:`.check_report`'s docstring. *labels*, *dropped*: every labelled
    pair and the clean pairs; *flags* / *scores*: per check, NaN / False where the pair was
    dropped; *union_scores*: the union's scores by name, +inf where the pair was dropped;
    *half*: 0 or 1 for the even and odd rows of the labelled file (-1 for the clean pairs);
    *kinds*: the labelled file's ``kind`` of each pair (None for the clean pairs), or None."""
    union = flagged_union(dropped, flags)
    flag_rate = flag_rates(labels, dropped, flags, (AUC_NOISE, VALID))  # the goals' groups
    goals = key_figures(labels, union, union_scores["union"], bicleaner)
    ranked = dict(union_scores)
    if bicleaner is not None:
        ranked["bicleaner"] = -bicleaner  # higher Bicleaner scores mean a valid translation
    auc = {name: noise_auc(labels, s) for name, s in {**scores, **ranked}.items()}
    found = {name: {str(v): noise_found_at(labels, s, v) for v in VALID_SHARES}
             for name, s in ranked.items()}
    halves = {}
    if half is not None:  # two samples of the labelled pairs: how far a figure moves
        for h, key in ((0, "even_rows"), (1, "odd_rows")):
            other = np.where(half == 1 - h, "other half", labels)
            halves[key] = {name: noise_auc(other, s) for name, s in ranked.items()}
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

"""Scores, flags and the union of the pair checks, read from their columns (:data:`COLUMNS`).

What the Boss and the Assistant need of the checks: the feature file's header holds each
check's counts (:func:`flag_counts`), and the Boss marks the flagged pairs (:func:`flagged`,
:func:`check_languages_differ`). This module imports numpy and :mod:`.settings` alone,
so that ``fairseq-train --user-dir`` and ``fairseq-generate --user-dir`` load none of the
checks' fitting code (:mod:`.columns`, scikit-learn's SVD and naive Bayes).
"""

from typing import Dict, Optional

import numpy as np

from .settings import CHECK, FLAG_PROBABILITY, MIN_OWN_LANGUAGE_SHARE, REGISTRY, \
    PairCheckSettings


def langid_flags(column: np.ndarray, bar: float):
    """The langid check's (score, flags, union margin) from its column of the pair checks
    (:mod:`.langid`)."""
    score = np.nan_to_num(column, nan=-np.inf)
    return score, score > bar, np.where(np.isnan(column), -np.inf, column - bar)


def check_scores(checks: np.ndarray, settings: Optional[PairCheckSettings] = None):
    """Per check that ran, its continuous score (higher: more likely noise) and its flags;
    and the union's margin: above 0 exactly where a check flags (the largest of the checks'
    margins over their thresholds, on a log-odds or log scale), for ROC curves.

    Returns:
        (dict name -> (score, flags), np.ndarray margin)
    """
    settings = settings or PairCheckSettings()
    checks = np.asarray(checks, dtype=np.float64)
    out, margins = {}, []
    eps = 1e-6
    src_p, tgt_p, own = CHECK["language"].at
    digits, lexical = CHECK["digits"].at, list(CHECK["lexical"].at)
    (unrelated,), (script,), (langid,) = (CHECK[c].at for c in ("unrelated", "script", "langid"))
    with np.errstate(invalid="ignore", divide="ignore"):
        if not np.isnan(checks[:, [src_p, tgt_p]]).all():
            p = np.clip(np.nanmax(np.nan_to_num(checks[:, [src_p, tgt_p]], nan=0.0), axis=1),
                        eps, 1 - eps)
            t = settings.flag_probability
            margin = np.log(p / (1 - p)) - np.log(t / (1 - t))
            if checks.shape[1] > own and not np.isnan(checks[:, own]).all():
                # nats per subword: x4 puts a side's mean on the scale of a sentence's log-odds
                evidence = np.where(np.isnan(checks[:, own]), np.inf, checks[:, own])
                margin = np.maximum(margin, 4.0 * (settings.language_evidence - evidence))
            out["language"] = (margin, margin > 0)
            margins.append(margin)
        if not np.isnan(checks[:, unrelated]).all():
            p = np.nan_to_num(checks[:, unrelated], nan=0.0)
            out["unrelated"] = (p, p > settings.unrelated_p_value)
            margins.append(np.log(p + eps) - np.log(settings.unrelated_p_value + eps))
        if checks.shape[1] > max(digits) and not np.isnan(checks[:, digits[0]]).all():
            different, a, b = (np.nan_to_num(checks[:, i], nan=0.0) for i in digits)
            share = different / np.maximum(a + b, 1.0)
            one_side = (a == 0) | (b == 0)
            hit = np.where(one_side, different >= settings.digits_one_side,
                           (different >= settings.digits_min_different) &
                           (share >= settings.digits_share))
            out["digits"] = (share, hit)
            margins.append(np.where(hit, share, np.minimum(share - settings.digits_share, -eps)))
        if checks.shape[1] > max(lexical) and not np.isnan(checks[:, lexical]).all():
            # the worse side's score; NaN (too few subwords to tell): never flagged; x4 as
            # the own-language evidence (nats per subword to a sentence's log-odds)
            score = np.fmin(checks[:, lexical[0]], checks[:, lexical[1]])
            margin = 4.0 * (settings.lexical_bar - np.where(np.isnan(score), np.inf, score))
            out["lexical"] = (-score, margin > 0)
            margins.append(margin)
        if checks.shape[1] > script and "script" in settings.checks:
            share = checks[:, script]  # NaN: too few letters of a rare script, never flagged
            hit = share >= settings.script_share
            out["script"] = (np.nan_to_num(share, nan=0.0), hit)
            margins.append(np.where(np.isnan(share), -np.inf, share - settings.script_share + eps))
        if checks.shape[1] > langid and "langid" in settings.checks:
            score, hit, margin = langid_flags(checks[:, langid], settings.langid_bar)
            out["langid"] = (score, hit)
            margins.append(margin)  # nats of log-likelihood: a log-odds scale
    margin = np.max(margins, axis=0) if margins else np.full(len(checks), -np.inf)
    return out, margin


def union_score(per_check: Dict[str, tuple], margin: np.ndarray) -> np.ndarray:
    """The union's continuous score (higher: more likely noise), to rank pairs: every pair
    that a check flags above every pair that none flags, in the order of its largest margin
    over a bar (*margin* of :func:`check_scores`); the others in the order of the sum of the
    checks' scores, each standardised over the corpus (mean 0, sd 1).

    The largest margin orders the unflagged pairs by their single strongest check; the sum
    lets several weak signals add up, and no labels choose how (docs/results/paracrawl).

    Args:
        per_check (dict): name -> (score, flags), the first output of :func:`check_scores`.
        margin (np.ndarray): the second output, > 0 exactly where a check flags.
    """
    margin = np.asarray(margin, dtype=np.float64)
    total = np.zeros(len(margin))
    for score, _ in per_check.values():
        score = np.asarray(score, dtype=np.float64)
        finite = np.isfinite(score)
        if not finite.any():
            continue
        score = np.where(finite, score, np.median(score[finite]))  # no evidence: typical
        sd = score.std()
        if sd > 0:
            total += (score - score.mean()) / sd
    hit = margin > 0
    if hit.any():
        top = float(total[~hit].max()) if (~hit).any() else 0.0
        over = np.nan_to_num(margin[hit], posinf=np.finfo(np.float64).max / 4)
        total[hit] = top + 1.0 + over
    return total


def flag_counts(checks: np.ndarray, settings: Optional[PairCheckSettings] = None) -> Dict[str, int]:
    """Pairs flagged in all, and by each check."""
    per_check, _ = check_scores(checks, settings)
    counts = {"flagged": int(np.count_nonzero(flagged(checks, settings)))}
    counts.update({c.count_key: 0 for c in REGISTRY})  # those that did not run
    counts.update({CHECK[name].count_key: int(np.count_nonzero(f))
                   for name, (_, f) in per_check.items()})
    return counts


def flagged(checks: np.ndarray, settings: Optional[PairCheckSettings] = None) -> np.ndarray:
    """Whether any check that ran flags each pair (output of :func:`pair_check_columns` -> bool per
    pair)."""
    checks = np.asarray(checks)
    flags = np.zeros(len(checks), dtype=bool)
    for _, f in check_scores(checks, settings)[0].values():
        flags |= f
    return flags


def check_languages_differ(probability: np.ndarray, source: str = "the feature file") -> None:
    """Raise ValueError when fewer than :data:`MIN_OWN_LANGUAGE_SHARE` of the sides are
    confidently in their own side's language: then the identifier cannot tell the two
    languages apart, and its flags would be chance. *probability*: the output of
    :func:`.language.other_language_probability` or :func:`.columns.pair_check_columns`
    (NaN columns: the language check did not run, nothing to check)."""
    probability = np.asarray(probability)[:, :2]
    if probability.size and np.isnan(probability).all():
        return
    share = float(np.mean(probability < 1.0 - FLAG_PROBABILITY)) if probability.size else 1.0
    if share < MIN_OWN_LANGUAGE_SHARE:
        raise ValueError(f"pair checks of {source}: only {share:.0%} of the sentences are "
                         "clearly in their own side's language, so its two sides do not look "
                         "like two languages (one language on both sides?) and the checks "
                         "cannot tell noise; train without them (--assistant-pair-checks off)")

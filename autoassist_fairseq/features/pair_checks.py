"""Pair checks: evidence, from a pair's own tokens, that it is noise the Boss should not learn.

Loss-based rules see noise late: a pair must be visited, often twice, before its loss can
mark it, and an untranslated copy is easy for the Boss, so its loss never marks it. The
most common noise of crawled corpora is visible in the text itself (Khayrallah & Koehn,
2018): the source copied as the target, or a target in the wrong language. Both are a
side written in the *other* language of the pair.

The check is a naive Bayes language identifier with one class per side of the corpus,
fitted on the corpus itself (scikit-learn's ``MultinomialNB`` over the same subword counts
as the TF-IDF features): the source rows are one language, the target rows the other. A
side gets P(it is in the other side's language); it is flagged above
:data:`FLAG_PROBABILITY`. Noise in the corpus blurs the two classes only a little: a
side written in the wrong language still scores far closer to the class it belongs to.
No model is downloaded, and any language pair with distinct subword statistics works; a
corpus whose sides are one language cannot be told apart, which
:func:`check_languages_differ` reports instead of flagging pairs at random.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.naive_bayes import MultinomialNB

# P(side in the other language) above which a side is flagged; naive Bayes probabilities are
# extreme (a sentence of 10 subwords in the wrong language gets P > 0.999), so the bar leaves
# alone the short sides made of names and numbers that both languages share (P near 0.5).
FLAG_PROBABILITY = 0.99
# Below this share of sides confidently in their own language, the sides are not two
# languages to the check (e.g. one language on both sides), and its flags mean nothing.
MIN_OWN_LANGUAGE_SHARE = 0.5


def other_language_probability(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> np.ndarray:
    """P(each side is written in the other side's language), per pair.

    Args:
        src_counts (scipy.sparse.csr_matrix): source subword counts (pairs x vocabulary).
        tgt_counts (scipy.sparse.csr_matrix): target subword counts over the same
            vocabulary (fairseq-preprocess ``--joined-dictionary``).

    Returns:
        np.ndarray: ``float32`` (pairs x 2): column 0 P(source side is in the target
        language), column 1 P(target side is in the source language). A side without
        tokens gets 0.5.
    """
    if src_counts.shape != tgt_counts.shape:
        raise ValueError(f"pair checks need both sides over one vocabulary (fairseq-preprocess "
                         f"--joined-dictionary): source counts {src_counts.shape}, target "
                         f"counts {tgt_counts.shape}")
    n = src_counts.shape[0]
    if n == 0:
        return np.zeros((0, 2), dtype=np.float32)
    # class 0: the source language, 1: the target language; one side at a time, so that the
    # two count matrices are never stacked into a copy (2 x 4.5M rows for WMT14)
    nb = MultinomialNB(alpha=1.0, fit_prior=False)
    nb.partial_fit(src_counts, np.zeros(n, dtype=np.int64), classes=[0, 1])
    nb.partial_fit(tgt_counts, np.ones(n, dtype=np.int64))
    return np.stack([nb.predict_proba(src_counts)[:, 1], nb.predict_proba(tgt_counts)[:, 0]],
                    axis=1).astype(np.float32)


def flagged(probability: np.ndarray) -> np.ndarray:
    """Whether each pair has a side in the wrong language (output of
    :func:`other_language_probability` -> bool per pair)."""
    return (np.asarray(probability) > FLAG_PROBABILITY).any(axis=1)


def check_languages_differ(probability: np.ndarray, source: str = "the feature file") -> None:
    """Raise ValueError when fewer than :data:`MIN_OWN_LANGUAGE_SHARE` of the sides are
    confidently in their own side's language: then the identifier cannot tell the two
    languages apart, and its flags would be chance."""
    probability = np.asarray(probability)
    share = float(np.mean(probability < 1.0 - FLAG_PROBABILITY)) if probability.size else 1.0
    if share < MIN_OWN_LANGUAGE_SHARE:
        raise ValueError(f"pair checks of {source}: only {share:.0%} of the sentences are "
                         "clearly in their own side's language, so its two sides do not look "
                         "like two languages (one language on both sides?) and the checks "
                         "cannot tell noise; train without --assistant-pair-checks")

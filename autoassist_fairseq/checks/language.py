"""The language check: is a side written in the other side's language?

The most common noise of crawled corpora is visible in the text itself (Khayrallah & Koehn,
2018): the source copied as the target, or a target in the wrong language. Both are a side
written in the *other* language of the pair.

The check is a naive Bayes language identifier with one class per side of the corpus,
fitted on the corpus itself (scikit-learn's ``MultinomialNB`` over the same subword counts
as the TF-IDF features). A side gets P(it is in the other side's language); it is flagged
above :data:`.settings.FLAG_PROBABILITY`. Noise blurs the two classes only a little.
No model is downloaded; a corpus whose sides are one language cannot be told apart, which
:func:`.flags.check_languages_differ` reports instead of flagging pairs at random.

A side also gets its own-language evidence: the mean naive Bayes log-likelihood ratio (its
language against the other) of the subwords it does not share with the other side (names
and numbers are copied across; a third language is not). A real sentence scores far above
0, a third language near it; at most :data:`.settings.LANGUAGE_EVIDENCE` flags.
"""

import numpy as np
import scipy.sparse as sp
from sklearn.naive_bayes import MultinomialNB

_MIN_OWN_SUBWORDS = 3  # unshared subwords a side needs for its own-language evidence


def other_language_probability(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> np.ndarray:
    """P(each side is written in the other side's language), per pair: the first two columns
    of :func:`language_scores`."""
    return language_scores(src_counts, tgt_counts)[:, :2]


def language_scores(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> np.ndarray:
    """The language check's scores of each pair.

    Args:
        src_counts (scipy.sparse.csr_matrix): source subword counts (pairs x vocabulary).
        tgt_counts (scipy.sparse.csr_matrix): target subword counts over the same
            vocabulary (fairseq-preprocess ``--joined-dictionary``).

    Returns:
        np.ndarray: ``float32`` (pairs x 3): column 0 P(source side is in the target
        language), column 1 P(target side is in the source language) (a side without tokens
        gets 0.5), column 2 the own-language evidence: of the two sides, the smaller mean
        log-likelihood ratio (own language against the other, nats per subword) over its
        subwords that the other side lacks (+inf for a side with fewer than 3 such).
    """
    check_one_vocabulary(src_counts, tgt_counts)
    if src_counts.shape[0] == 0:
        return np.zeros((0, 3), dtype=np.float32)
    return language_apply(language_fit(src_counts, tgt_counts), src_counts, tgt_counts)


def check_one_vocabulary(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> None:
    if src_counts.shape != tgt_counts.shape:
        raise ValueError(f"pair checks need both sides over one vocabulary (fairseq-preprocess "
                         f"--joined-dictionary): source counts {src_counts.shape}, target "
                         f"counts {tgt_counts.shape}")


def language_fit(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> MultinomialNB:
    """The language check's two-class identifier, fitted on a corpus's pairs (at least one)."""
    n = src_counts.shape[0]
    # class 0: the source language, 1: the target language; one side at a time, so that the
    # two count matrices are never stacked into a copy (2 x 4.5M rows for WMT14)
    nb = MultinomialNB(alpha=1.0, fit_prior=False)
    nb.partial_fit(src_counts, np.zeros(n, dtype=np.int64), classes=[0, 1])
    nb.partial_fit(tgt_counts, np.ones(n, dtype=np.int64))
    return nb


def language_apply(nb: MultinomialNB, src_counts: sp.csr_matrix,
                   tgt_counts: sp.csr_matrix) -> np.ndarray:
    """:func:`language_scores` of pairs under an identifier of :func:`language_fit` (fitted
    on them, or on another corpus over the same vocabulary)."""
    n = src_counts.shape[0]
    if n == 0:
        return np.zeros((0, 3), dtype=np.float32)
    out = np.empty((n, 3), dtype=np.float32)
    out[:, 0] = nb.predict_proba(src_counts)[:, 1]
    out[:, 1] = nb.predict_proba(tgt_counts)[:, 0]
    ratio = (nb.feature_log_prob_[0] - nb.feature_log_prob_[1]).astype(np.float32)
    shared = src_counts.minimum(tgt_counts)
    evidence = []
    for counts, sign in ((src_counts, 1.0), (tgt_counts, -1.0)):
        own = counts - shared
        own_len = np.asarray(own.sum(axis=1)).ravel()
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = sign * (own @ ratio) / own_len
        # too few subwords of its own to tell (a name or two): left to column 0/1
        evidence.append(np.where(own_len >= _MIN_OWN_SUBWORDS, mean, np.inf))
    out[:, 2] = np.minimum(*evidence)
    return out

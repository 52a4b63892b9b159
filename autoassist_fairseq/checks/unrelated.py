"""The unrelated check: are a pair's two sides more alike than random pairings of the corpus?

A misaligned pair (the target of another sentence, in the right language) passes the
language check (:mod:`.language`). This check asks whether the two sides are more alike
than random pairings of the corpus are, in a cross-language latent semantic space
(cross-language LSI, `Dumais et al., 1997
<https://cdn.aaai.org/Symposia/Spring/1997/SS-97-05/SS97-05-003.pdf>`_): a truncated SVD of
the joined TF-IDF rows ``[source | target]`` of the corpus learns which source and target
subwords occur together; each side is projected alone and the two projections are compared
(cosine). A pair's p-value is the share of random pairings (source of one pair, target of
another) at least as similar; it is flagged above
:data:`.settings.UNRELATED_P_VALUE`.

Invariant: the random pairings pair the source of one pair with the target of another, never
its own, so a p-value compares a pair with the corpus's unrelated pairs only.
"""

from typing import Optional

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize
from sklearn.utils.extmath import randomized_svd, svd_flip

_LSI_COMPONENTS = 100  # latent dimensions of cross-language LSI
_LSI_FIT_PAIRS = 200_000  # pairs the SVD is fitted on (a random sample beyond that)
_NULL_PAIRS = 200_000  # random pairings that make the p-values' reference distribution
_ROWS_PER_STEP = 16_384  # rows projected at a time: memory stays O(step x components)


def unrelated_p_value(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix,
                      seed: int = 0) -> np.ndarray:
    """Per pair (``float32``), the share of random pairings of the corpus whose two sides are
    at least as similar in cross-language LSI (see the module's docstring): near 0 for a
    translation, spread over [0, 1] for two unrelated sentences; 0 for all if the corpus is
    too small to compare with random pairings. *seed*: of the SVD's sample and the pairings.
    """
    lsi, sides = unrelated_fit(src_counts, tgt_counts, seed)
    return unrelated_apply(lsi, sides=sides)


class LsiSpace:
    """What the unrelated-sides check learns from a corpus (:func:`unrelated_fit`): each
    side's TF-IDF weights, the cross-language LSI maps and the sorted similarities of the
    random pairings; ``maps`` is None where the corpus was too small."""

    def __init__(self, tfidf, maps, null):
        self.tfidf, self.maps, self.null = tfidf, maps, null

    def sides(self, src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix):
        """Each side's TF-IDF rows under the fitted weights, L2-normalised."""
        return [normalize(t.transform(c).astype(np.float32))
                for t, c in zip(self.tfidf, (src_counts, tgt_counts))]


def _similarity(sides, maps, src_rows, tgt_rows):
    out = np.empty(len(src_rows), dtype=np.float32)
    for start in range(0, len(src_rows), _ROWS_PER_STEP):
        a, b = (normalize(side[rows[start:start + _ROWS_PER_STEP]] @ m)
                for side, rows, m in zip(sides, (src_rows, tgt_rows), maps))
        out[start:start + len(a)] = (a * b).sum(axis=1)
    return out


def lsi_components(rows: sp.csr_matrix, k: int, seed: int) -> np.ndarray:
    """The *k* components (k x columns) of scikit-learn's ``TruncatedSVD(k,
    random_state=seed).fit(rows)`` (its randomized SVD, signs flipped as it flips them), the
    same numbers, without what ``fit`` adds that the check does not use: the rows projected
    on the components, and their variances."""
    u, _, vt = randomized_svd(rows, k, n_oversamples=10, n_iter=5,
                              power_iteration_normalizer="auto", transpose="auto",
                              flip_sign=False, random_state=seed)
    return svd_flip(u, vt, u_based_decision=False)[1]


def unrelated_fit(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix, seed: int = 0):
    """The unrelated-sides check fitted on a corpus: ``(LsiSpace, the corpus's TF-IDF
    sides)``. *seed*: of the SVD's sample and the pairings."""
    n = src_counts.shape[0]
    tfidf = [TfidfTransformer(sublinear_tf=True).fit(c) for c in (src_counts, tgt_counts)]
    sides = [normalize(t.transform(c).astype(np.float32))
             for t, c in zip(tfidf, (src_counts, tgt_counts))]
    rng = np.random.default_rng(seed)
    fit_rows = np.sort(rng.choice(n, min(n, _LSI_FIT_PAIRS), replace=False))
    # far fewer latent dimensions than columns, so that each must join the two sides: with
    # as many as one side's vocabulary, dimensions of one side only fit as well, and the
    # two projections of a translation come out unrelated
    k = min(_LSI_COMPONENTS, len(fit_rows) // 4, sum(x.shape[1] for x in sides) // 4)
    if n < 3 or k < 2:
        return LsiSpace(tfidf, None, None), sides
    components = lsi_components(sp.hstack([x[fit_rows] for x in sides], format="csr"), k, seed)
    split = sides[0].shape[1]
    maps = (components[:, :split].T, components[:, split:].T)
    null_src = rng.integers(n, size=_NULL_PAIRS)
    null_tgt = (null_src + rng.integers(1, n, size=_NULL_PAIRS)) % n  # another pair's target
    return LsiSpace(tfidf, maps, np.sort(_similarity(sides, maps, null_src, null_tgt))), sides


def unrelated_apply(lsi: LsiSpace, src_counts: Optional[sp.csr_matrix] = None,
                    tgt_counts: Optional[sp.csr_matrix] = None, sides=None) -> np.ndarray:
    """:func:`unrelated_p_value` of pairs (their counts, or *sides*: their
    :meth:`LsiSpace.sides`) against the random pairings of the corpus *lsi* was fitted on."""
    if sides is None:
        sides = lsi.sides(src_counts, tgt_counts)
    n = sides[0].shape[0]
    if lsi.maps is None:
        return np.zeros(n, dtype=np.float32)
    rows = np.arange(n)
    null = lsi.null
    at_least = len(null) - np.searchsorted(null, _similarity(sides, lsi.maps, rows, rows),
                                           side="left")
    return (at_least / len(null)).astype(np.float32)

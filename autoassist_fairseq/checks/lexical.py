"""The lexical check: do a pair's two sides translate each other, word by word?

A misaligned crawled pair is often a neighbouring line of the same page: on the same topic,
with the same names, so as alike as a translation in a topic space (cross-language LSI,
:func:`.unrelated.unrelated_p_value`). What it lacks is the word-for-word correspondence of
a translation. The check learns a translation table of the corpus itself, IBM Model 1
(`Brown et al., 1993 <https://aclanthology.org/J93-2003/>`_) over the subwords of the two
sides, by EM on a sample of its pairs (no download, no pretrained model), in both
directions. A side's *translation score* is the mean, over its subwords that the other side
does not hold as such (names and numbers are copied across and prove nothing) and that the
table knows, of

    log p(f | other side) - log p(f | a random side of the corpus),

with p(f | side) = min(1, sum over the side's subwords e of t(f | e)), both floored at
:data:`MIN_PROBABILITY`: nats per subword by which the pair's other side explains it better
than any side would. A translation scores well above 0, a misaligned pair or a side in a
third language near or below it. The pair's score is the smaller of its two sides'; it is
flagged below :data:`LEXICAL_BAR`.

Two folds: a pair of the fitting sample is scored by the table fitted on the other half,
never by one fitted on it (a word seen once would otherwise explain its own pair's words
and every misaligned pair would look translated). All sums are numpy/scipy sparse products:
the EM over the (source subword, target subword) co-occurrences of at most
:data:`_FIT_PAIRS` pairs, the scoring over the table pruned to the likelier entries,
:data:`_ROWS_PER_STEP` pairs at a time.
"""

import numpy as np
import scipy.sparse as sp

from .settings import LEXICAL_BAR  # noqa: F401  (the bar's home)

# table entries below this are pruned, and a subword's probability is floored at it
MIN_PROBABILITY = 0.01
FLOOR = float(np.log(MIN_PROBABILITY))
_FIT_PAIRS = 50_000  # pairs the tables are fitted on (a random sample beyond that)
_MAX_TRIPLES = 10_000_000  # (pair, source, target) subword triples of the sample, at most
_ITERATIONS = 5  # EM iterations
_TOP_ENTRIES = 8  # likeliest translations of a subword kept in the table
_MIN_SUBWORDS = 2  # subwords a side needs (not copied, known to the table) to be scored
_MIN_COUNT = 5  # pairs of a fold a subword must occur in for its table to know it
_ROWS_PER_STEP = 100_000


def _binary(counts: sp.csr_matrix) -> sp.csr_matrix:
    x = sp.csr_matrix(counts, dtype=np.float32, copy=True)
    x.data[:] = 1.0
    return x


def _triples(src: sp.csr_matrix, tgt: sp.csr_matrix):
    """Every (source subword, target subword) of each pair's distinct subwords, and the
    target subword's position in *tgt* (the (pair, target subword) it explains)."""
    ls, lt = np.diff(src.indptr), np.diff(tgt.indptr)
    per_pair = ls * lt
    pair = np.repeat(np.arange(src.shape[0]), per_pair)
    start = np.repeat(np.cumsum(per_pair) - per_pair, per_pair)
    k = np.arange(len(pair)) - start  # position within the pair's ls x lt block
    lt_p = lt[pair]
    e = src.indices[src.indptr[pair] + k // lt_p]
    position = tgt.indptr[pair] + k % lt_p
    return e, tgt.indices[position], position


def fit_table(src: sp.csr_matrix, tgt: sp.csr_matrix,
              iterations: int = _ITERATIONS) -> sp.csr_matrix:
    """IBM Model 1 t(target subword | source subword) (vocabulary x vocabulary, sparse) by EM
    over *src*, *tgt* (binary subword presence of the sample's pairs), pruned to each source
    subword's :data:`_TOP_ENTRIES` likeliest translations of at least :data:`MIN_PROBABILITY`."""
    v_src, v_tgt = src.shape[1], tgt.shape[1]
    e, f, group = _triples(src, tgt)  # group: the posterior's normaliser
    entries, cell = np.unique(e.astype(np.int64) * v_tgt + f, return_inverse=True)
    del e, f
    src_of_cell = (entries // v_tgt).astype(np.int64)
    t = np.ones(len(entries), dtype=np.float64)  # uniform start: every cell alike
    for _ in range(iterations):
        value = t[cell]
        posterior = value / np.bincount(group, weights=value, minlength=tgt.nnz)[group]
        expected = np.bincount(cell, weights=posterior, minlength=len(entries))
        t = expected / np.bincount(src_of_cell, weights=expected, minlength=v_src)[src_of_cell]
    # each source subword's _TOP_ENTRIES likeliest translations (entries are sorted by source
    # subword): the scoring's sparse product costs at most that many per subword
    rank = np.arange(len(t)) - np.repeat(np.searchsorted(src_of_cell, np.arange(v_src)),
                                         np.bincount(src_of_cell, minlength=v_src))
    order = np.lexsort((-t, src_of_cell))
    keep = np.zeros(len(t), dtype=bool)
    keep[order[rank < _TOP_ENTRIES]] = True
    keep &= t >= MIN_PROBABILITY
    return sp.csr_matrix((t[keep].astype(np.float32),
                          (src_of_cell[keep], (entries[keep] % v_tgt))), shape=(v_src, v_tgt))


def side_scores(src: sp.csr_matrix, tgt: sp.csr_matrix, table: sp.csr_matrix,
                known: np.ndarray, baseline: np.ndarray, joined: bool = True) -> np.ndarray:
    """Each pair's target side's translation score (the module's docstring) under *table*
    (t(target | source)): the mean over its subwords that are not on the source side (with
    *joined* vocabularies) and that the table knows (*known*) of log p(f | source side) minus
    *baseline* (log p(f | a random side)), both less :data:`FLOOR`; NaN with fewer than
    :data:`_MIN_SUBWORDS` such subwords."""
    n = src.shape[0]
    out = np.full(n, np.nan, dtype=np.float32)
    for start in range(0, n, _ROWS_PER_STEP):
        s, t = src[start:start + _ROWS_PER_STEP], tgt[start:start + _ROWS_PER_STEP]
        own = (t - t.multiply(s) if joined else t).multiply(known[None, :]).tocsr()
        own.eliminate_zeros()
        prob = (s @ table).multiply(own).tocsr()
        prob.data = np.minimum(prob.data, 1.0)
        # log max(p, e^FLOOR) - FLOOR: 0 for the subwords the source side does not explain,
        # which the sparse product leaves out
        gain = prob
        gain.data = np.maximum(np.log(np.maximum(gain.data, 1e-30)) - FLOOR, 0.0)
        k = np.asarray(own.sum(axis=1)).ravel()
        with np.errstate(invalid="ignore", divide="ignore"):
            mean = (np.asarray(gain.sum(axis=1)).ravel() - own @ baseline) / k
        out[start:start + len(k)] = np.where(k >= _MIN_SUBWORDS, mean, np.nan)
    return out


def lexical_scores(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix,
                   seed: int = 0, joined: bool = True) -> np.ndarray:
    """Per pair, the translation scores of its source side and of its target side (pairs x 2,
    ``float32``, nats per subword; NaN: too few subwords to tell). See the module's
    docstring.

    Args:
        src_counts, tgt_counts (scipy.sparse.csr_matrix): subword counts of each side.
        seed (int): seed of the fitting sample (default: 0).
        joined (bool): one vocabulary on both sides (a column is the same subword on both),
            so that a subword copied across is left out of the score (default: True).
    """
    n = src_counts.shape[0]
    if n == 0:
        return np.zeros((0, 2), dtype=np.float32)
    src, tgt = _binary(src_counts), _binary(tgt_counts)
    rng = np.random.default_rng(seed)
    rows = np.sort(rng.choice(n, min(n, _FIT_PAIRS), replace=False))
    lengths = np.diff(src.indptr)[rows] * np.diff(tgt.indptr)[rows]
    rows = rows[np.cumsum(lengths) <= _MAX_TRIPLES]
    folds = (rows[0::2], rows[1::2])
    out = np.empty((n, 2), dtype=np.float32)
    for col, (a, b) in enumerate(((tgt, src), (src, tgt))):
        # column 0: the source side explained by the target side (t(source | target)).
        # Two folds: a pair of the sample is scored by the table of the other fold, never by
        # one fitted on it (a word seen once would otherwise explain its own pair's words)
        for fit_rows, score_rows in ((folds[0], None), (folds[1], folds[0])):
            table = fit_table(a[fit_rows], b[fit_rows])
            df = np.bincount(b[fit_rows].indices, minlength=b.shape[1])
            known = (df >= _MIN_COUNT).astype(np.float32)
            # log P(subword | a random side): what the table gives any side
            share = np.bincount(a[fit_rows].indices,
                                minlength=a.shape[1]) / max(len(fit_rows), 1)
            baseline = np.log(np.clip(share @ table, np.exp(FLOOR), 1.0)) - FLOOR
            if score_rows is None:
                out[:, col] = side_scores(a, b, table, known, baseline, joined)
            else:
                out[score_rows, col] = side_scores(a[score_rows], b[score_rows], table, known,
                                                   baseline, joined)
    return out


"""The three scikit-learn estimators the pair checks fit, done with numpy and scipy: the same
numbers, to the bit (tests/test_pair_checks.py compares them with scikit-learn's), without
importing scikit-learn, which imports scipy.stats and pandas and costs ``autoassist-score-pairs``
about 0.8 CPU s of its 8 on Tatoeba.

- :func:`normalize`: ``sklearn.preprocessing.normalize(x)`` (rows to unit L2 norm);
- :class:`Tfidf`: ``TfidfTransformer(sublinear_tf=True)`` (smoothed idf, rows normalised);
- :class:`NaiveBayes`: ``MultinomialNB(alpha=1.0, fit_prior=False)`` fitted on two classes,
  one count matrix each (two ``partial_fit`` calls), and its ``predict_proba``.

Each does the operations of scikit-learn's code in its order and precision (for
:func:`normalize` of sparse rows, those of its Cython loop: a float64 sum, in the stored order,
of each entry's square taken in the data's precision).
"""

import numpy as np
import scipy.sparse as sp


def _l2_rows(x: sp.csr_matrix) -> None:
    """Divide each row of *x* by its L2 norm, in place (a row of zeros is left)."""
    data, indptr = x.data, x.indptr
    lengths = np.diff(indptr)
    squares = data * data  # in the data's precision, as the loop's x[j] * x[j]
    sums = np.zeros(len(lengths), dtype=np.float64)
    order = np.argsort(lengths, kind="stable")  # the rows still summing are a suffix
    start, first = indptr[:-1][order], 0
    for j in range(int(lengths.max()) if len(lengths) else 0):
        while lengths[order[first]] <= j:
            first += 1
        rows = order[first:]
        sums[rows] += squares[start[first:] + j]  # one row's terms in their stored order
    norms = np.sqrt(sums)
    nonzero = np.repeat(sums != 0.0, lengths)
    data[nonzero] = data[nonzero] / np.repeat(norms, lengths)[nonzero]


def normalize(x):
    """``sklearn.preprocessing.normalize(x)``: a copy of *x* (a csr matrix, or a 2-d float
    array) with rows of unit L2 norm."""
    if sp.issparse(x):
        x = x.tocsr(copy=True)
        _l2_rows(x)
        return x
    x = np.array(x, copy=True)
    norms = np.sqrt(np.einsum("ij,ij->i", x, x))
    norms[norms < 10 * np.finfo(norms.dtype).eps] = 1.0
    x /= norms[:, None]
    return x


class Tfidf:
    """``TfidfTransformer(sublinear_tf=True).fit(counts)``: ``idf_`` (smoothed: ln((1 + n) /
    (1 + df)) + 1, in the counts' precision) and :meth:`transform`."""

    def __init__(self, counts: sp.csr_matrix):
        dtype = counts.dtype if counts.dtype in (np.float64, np.float32) else np.float64
        df = np.bincount(counts.indices, minlength=counts.shape[1]).astype(dtype, copy=False)
        df += 1.0
        self.idf_ = np.full_like(df, fill_value=counts.shape[0] + 1, dtype=dtype)
        self.idf_ /= df
        np.log(self.idf_, out=self.idf_)
        self.idf_ += 1.0

    def transform(self, counts: sp.csr_matrix) -> sp.csr_matrix:
        """(1 + ln count) x idf of each entry, rows normalised (a new matrix)."""
        x = counts.astype(counts.dtype if counts.dtype in (np.float64, np.float32)
                          else np.float64, copy=True).tocsr()
        np.log(x.data, x.data)
        x.data += 1.0
        x.data *= self.idf_[x.indices]
        _l2_rows(x)
        return x


class NaiveBayes:
    """``MultinomialNB(alpha=1.0, fit_prior=False)`` after ``partial_fit(class_counts[0],
    0, classes=[0, 1])`` and ``partial_fit(class_counts[1], 1)``: ``feature_log_prob_``,
    ``class_log_prior_`` and :meth:`predict_proba`."""

    def __init__(self, *class_counts: sp.csr_matrix):
        n_classes = len(class_counts)
        feature_count = np.zeros((n_classes, class_counts[0].shape[1]), dtype=np.float64)
        for label, counts in enumerate(class_counts):
            y = np.zeros((counts.shape[0], n_classes), dtype=np.float64)
            y[:, label] = 1.0
            feature_count += y.T @ counts
        smoothed = feature_count + 1.0
        self.feature_log_prob_ = np.log(smoothed) - np.log(smoothed.sum(axis=1).reshape(-1, 1))
        self.class_log_prior_ = np.full(n_classes, -np.log(n_classes))

    def predict_proba(self, counts: sp.csr_matrix) -> np.ndarray:
        """P(class | row) of each row (rows x classes)."""
        joint = counts @ self.feature_log_prob_.T + self.class_log_prior_
        # scikit-learn's _logsumexp over each row
        top = np.max(joint, axis=1, keepdims=True)
        at_top = joint == top
        rest = np.array(joint, copy=True)
        rest[at_top] = -np.inf
        m = np.sum(at_top.astype(rest.dtype), axis=1, keepdims=True, dtype=rest.dtype)
        shift = np.where(np.isfinite(top), top, 0)
        total = np.sum(np.exp(rest - shift), axis=1, keepdims=True, dtype=rest.dtype)
        total = np.where(total == 0, total, total / m)
        log_total = np.squeeze(np.log1p(total) + np.log(m) + top, axis=1)
        return np.exp(joint - np.atleast_2d(log_total).T)

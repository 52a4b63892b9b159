"""TF-IDF features of source-target pairs, computed with scikit-learn.

A pair's feature row is ``[tfidf(source) | tfidf(target)]``: source and target token ids
live in separate column blocks (dimension ``|V_src| + |V_tgt|``), so the same subword on
either side is a different feature. Each block uses scikit-learn's smoothed idf,
``idf(t) = ln((1 + n) / (1 + df(t))) + 1``, on raw counts; then the whole row is
L2-normalised. We normalise the joint row (not each block) so that every pair has the
same norm: the logit ``psi_i . theta`` then does not grow with sentence length, and one
learning rate suits short and long pairs alike.
"""

from typing import Iterable, Optional

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfTransformer
from sklearn.preprocessing import normalize


def count_matrix(
    tokens: np.ndarray,
    offsets: np.ndarray,
    vocab_size: int,
    ignore_ids: Optional[Iterable[int]] = None,
) -> sp.csr_matrix:
    """Bag-of-tokens counts of many sentences, without a Python loop per sentence.

    Args:
        tokens (np.ndarray): all token ids, sentence after sentence.
        offsets (np.ndarray): ``len(sentences) + 1`` start offsets into *tokens*.
        vocab_size (int): number of columns.
        ignore_ids (iterable of int, optional): ids that carry no content
            (bos, pad, eos) and get no column weight (default: None).

    Returns:
        scipy.sparse.csr_matrix: ``float32`` counts, one row per sentence.
    """
    tokens = np.asarray(tokens, dtype=np.int64)
    offsets = np.asarray(offsets, dtype=np.int64)
    n_rows = len(offsets) - 1
    if tokens.size and (tokens.min() < 0 or tokens.max() >= vocab_size):
        raise ValueError(
            f"token id out of range [0, {vocab_size}): the dictionary does not belong to "
            "this dataset; rebuild with the dictionaries fairseq-preprocess wrote"
        )
    data = np.ones(tokens.shape[0], dtype=np.float32)
    if ignore_ids is not None:
        ignore = np.asarray(list(ignore_ids), dtype=np.int64)
        data[np.isin(tokens, ignore)] = 0.0
    counts = sp.csr_matrix((data, tokens, offsets), shape=(n_rows, vocab_size))
    counts.sum_duplicates()
    counts.eliminate_zeros()
    return counts


def tfidf_features(src_counts: sp.csr_matrix, tgt_counts: sp.csr_matrix) -> sp.csr_matrix:
    """TF-IDF of source and target counts, side by side, rows L2-normalised.

    Args:
        src_counts (scipy.sparse.csr_matrix): source counts (pairs x ``|V_src|``).
        tgt_counts (scipy.sparse.csr_matrix): target counts (pairs x ``|V_tgt|``).

    Returns:
        scipy.sparse.csr_matrix: ``float32`` features (pairs x ``|V_src| + |V_tgt|``),
        row *i* belonging to dataset index *i*.
    """
    if src_counts.shape[0] != tgt_counts.shape[0]:
        raise ValueError(
            f"source has {src_counts.shape[0]} sentences but target has "
            f"{tgt_counts.shape[0]}: the two sides of the dataset are not aligned"
        )
    blocks = [
        TfidfTransformer(norm=None, smooth_idf=True).fit_transform(counts)
        for counts in (src_counts, tgt_counts)
    ]
    features = sp.hstack(blocks, format="csr", dtype=np.float32)
    normalize(features, norm="l2", copy=False)
    features.sort_indices()
    return features

import math

import numpy as np
import pytest

from autoassist_fairseq.features.tfidf import count_matrix, tfidf_features


def _offsets(sentences):
    return np.cumsum([0] + [len(s) for s in sentences])


def test_tfidf_matches_hand_computation():
    # source vocab: 0=pad-like ignored, 1..3 words; target vocab 0..2
    src = [[1, 1, 2, 0], [2, 3, 0]]
    tgt = [[1], [1, 2, 2]]
    S = count_matrix(np.concatenate(src), _offsets(src), 4, ignore_ids=[0])
    T = count_matrix(np.concatenate(tgt), _offsets(tgt), 3, ignore_ids=[0])
    X = tfidf_features(S, T).toarray()
    assert X.shape == (2, 7)

    def idf(df, n=2):
        return math.log((1 + n) / (1 + df)) + 1

    # pair 0: src {1: 2, 2: 1}, tgt {1: 1}; df: src1=1, src2=2, src3=1, tgt1=2, tgt2=1
    row0 = np.zeros(7)
    row0[1], row0[2], row0[4 + 1] = 2 * idf(1), 1 * idf(2), 1 * idf(2)
    row1 = np.zeros(7)
    row1[2], row1[3], row1[4 + 1], row1[4 + 2] = idf(2), idf(1), idf(2), 2 * idf(1)
    for got, want in ((X[0], row0), (X[1], row1)):
        np.testing.assert_allclose(got, want / np.linalg.norm(want), rtol=1e-6)
    assert X[:, 0].sum() == 0  # ignored ids get no weight


def test_rows_align_with_sentences():
    rng = np.random.default_rng(0)
    sentences = [rng.integers(1, 50, size=rng.integers(1, 9)) for _ in range(100)]
    C = count_matrix(np.concatenate(sentences), _offsets(sentences), 50)
    for i in (0, 17, 99):
        np.testing.assert_array_equal(C[i].toarray()[0], np.bincount(sentences[i], minlength=50))


def test_out_of_range_token_is_rejected():
    with pytest.raises(ValueError, match="dictionary does not belong"):
        count_matrix(np.array([5]), np.array([0, 1]), 3)


def test_misaligned_sides_are_rejected():
    S = count_matrix(np.array([1, 2]), np.array([0, 1, 2]), 3)
    T = count_matrix(np.array([1]), np.array([0, 1]), 3)
    with pytest.raises(ValueError, match="not aligned"):
        tfidf_features(S, T)

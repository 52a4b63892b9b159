import numpy as np
import scipy.sparse as sp

from autoassist_fairseq.assistant import Assistant, AssistantHParams
from autoassist_fairseq.assistant.model import predict_proba, sgd_step
from autoassist_fairseq.features.store import FeatureStore
from autoassist_fairseq.features.tfidf import count_matrix, tfidf_features


def _store(tmp_path, n=4000, vocab=200, seed=0):
    rng = np.random.default_rng(seed)
    sents = [rng.integers(1, vocab, size=rng.integers(4, 15)) for _ in range(n)]
    offsets = np.cumsum([0] + [len(s) for s in sents])
    C = count_matrix(np.concatenate(sents), offsets, vocab)
    X = tfidf_features(C, C)
    FeatureStore.save(str(tmp_path / "f"), X, {"fingerprint": "x"})
    return FeatureStore.open(str(tmp_path / "f")), sents


def test_sgd_step_is_eq5():
    X = sp.csr_matrix(np.array([[1.0, 0.0], [0.0, 1.0], [1.0, 1.0]]))
    z = np.array([1.0, 0.0, 1.0])
    theta = np.array([0.2, -0.1])
    before = theta.copy()
    probs, bias = sgd_step(X, z, theta, 0.05, lr=0.5, weight_decay=0.1)
    p = 1 / (1 + np.exp(-(X.toarray() @ before + 0.05)))
    np.testing.assert_allclose(probs, p)
    grad = X.toarray().T @ (p - z) / 3
    np.testing.assert_allclose(theta, 0.9 * before - 0.5 * grad)
    assert np.isclose(bias, 0.05 - 0.5 * (p - z).mean())
    np.testing.assert_allclose(predict_proba(X, theta, bias),
                               1 / (1 + np.exp(-(X.toarray() @ theta + bias))))


def test_learns_planted_rule(tmp_path):
    store, sents = _store(tmp_path)
    # loss high exactly when one of the tokens 1..14 occurs: about half the pairs
    hard = np.array([bool((s < 15).any()) for s in sents])
    assert 0.35 < hard.mean() < 0.65
    losses = np.where(hard, 5.0, 1.0) + np.random.default_rng(1).normal(0, 0.1, len(sents))
    assistant = Assistant(store, AssistantHParams(lr=2.0, warmup=5))
    train, held_out = np.arange(3000), np.arange(3000, 4000)
    rng = np.random.default_rng(2)
    for _ in range(300):  # bounded number of updates of 64 pairs
        ids = rng.choice(train, 64, replace=False)
        assistant.learn(ids, losses[ids])
    pred = assistant.utility(held_out) > 0.5
    assert np.mean(pred == hard[held_out]) >= 0.9
    assert assistant.stats["accuracy"] >= 0.85
    assert assistant.schedule.lam > 0.5  # trusted once it is right


def test_lambda_stays_near_zero_at_chance(tmp_path):
    store, sents = _store(tmp_path)
    rng = np.random.default_rng(3)
    assistant = Assistant(store, AssistantHParams(rule="paper", warmup=5))
    for _ in range(300):
        ids = rng.choice(len(sents), 64, replace=False)
        assistant.learn(ids, rng.normal(3.0, 1.0, 64))  # losses unrelated to the features
    assert assistant.schedule.lam < 0.1
    np.testing.assert_allclose(assistant.accept_probability(np.arange(100)), 1.0, atol=0.1)


def test_untrained_assistant_shrinks_nothing(tmp_path):
    store, _ = _store(tmp_path, n=100)
    assistant = Assistant(store, AssistantHParams())
    np.testing.assert_array_equal(assistant.accept_probability(np.arange(100)), 1.0)


def test_state_dict_round_trip(tmp_path):
    store, sents = _store(tmp_path, n=500)
    rng = np.random.default_rng(0)
    a = Assistant(store, AssistantHParams(warmup=0))
    for _ in range(20):
        ids = rng.choice(500, 32, replace=False)
        a.learn(ids, rng.normal(2, 1, 32))
    b = Assistant(store, AssistantHParams(warmup=0))
    b.load_state_dict(a.state_dict())
    assert b.stats == a.stats
    np.testing.assert_allclose(b.utility(np.arange(500)), a.utility(np.arange(500)), rtol=1e-5)

"""The selection rules: pure functions, the per-pair history, and a simulated stream."""

import numpy as np
import pytest

from autoassist_fairseq.assistant import Assistant, AssistantHParams
from autoassist_fairseq.assistant.rules import (PairHistory, learnable_utility,
                                                parse_random_rates, pass_rate,
                                                update_high_threshold, update_strikes)
from autoassist_fairseq.features.store import FeatureStore
from autoassist_fairseq.features.tfidf import count_matrix, tfidf_features

LEARNABLE, LEARNED, NOISE = 0, 1, 2


def test_parse_random_rates_and_pass_rate():
    rates = parse_random_rates(" 1.0, 0.8,0.74")
    assert rates == (1.0, 0.8, 0.74)
    assert [pass_rate(rates, e) for e in (1, 2, 3, 4, 9)] == [1.0, 0.8, 0.74, 0.74, 0.74]


def test_high_threshold_is_an_ema_of_the_quantile_and_refuses_nonfinite():
    losses = np.arange(1.0, 11.0)
    q = update_high_threshold(None, losses, 0.8, 0.9)
    assert q == pytest.approx(np.quantile(losses, 0.8))
    assert update_high_threshold(q, losses + 10, 0.8, 0.9) == pytest.approx(q + 1.0)
    for bad in (np.array([1.0, np.inf]), np.array([np.nan]), np.zeros(0)):
        with pytest.raises(ValueError, match="finite"):
            update_high_threshold(q, bad, 0.8, 0.9)


def test_strikes_count_high_visits_without_decline():
    last = np.array([np.nan, 5.0, 5.0, 5.0, 5.0], dtype=np.float16)
    strikes = np.array([0, 1, 1, 1, 3], dtype=np.uint8)
    losses = np.array([6.0, 5.0, 4.5, 2.0, 5.05])
    # 0: first visit, high -> 1; 1: high, flat -> 2; 2: high, fell 10% -> restart at 1;
    # 3: below the threshold -> cleared; 4: high, rose -> 4
    got = update_strikes(last, strikes, losses, high=3.0, min_decline=0.02)
    assert got.tolist() == [1, 2, 1, 0, 4]
    assert got.dtype == np.uint8
    # a decline smaller than min_decline does not count as learning
    assert update_strikes(last[1:2], strikes[1:2], np.array([4.95]), 3.0, 0.02)[0] == 2
    assert update_strikes(np.array([5.0]), np.array([255], np.uint8), np.array([5.0]),
                          3.0, 0.0)[0] == 255  # saturates instead of wrapping to 0


def test_learnable_utility_cases():
    g = np.array([0.3, 0.9, 0.9, 0.9])
    last = np.array([np.nan, 1.0, 6.0, 6.0])
    strikes = np.array([0, 0, 1, 2], dtype=np.uint8)
    u = learnable_utility(g, last, strikes, threshold=3.0, patience=2)
    np.testing.assert_array_equal(u, [0.3, 0.0, 1.0, 0.0])  # unseen, learned, hard, noise
    np.testing.assert_array_equal(learnable_utility(g, last, strikes, None, 2), g)


def test_history_state_is_compact_and_exact():
    rng = np.random.default_rng(0)
    h = PairHistory(100000, 0.8, 0.9, 0.02, 2)
    for _ in range(30):
        ids = rng.choice(100000, 500, replace=False)
        h.observe(ids, rng.gamma(4.0, 1.0, 500))
    state = h.state_dict()
    seen = int(np.count_nonzero(~np.isnan(h.last)))
    assert len(state["ids"]) == seen > 10000
    nbytes = sum(v.nbytes for v in state.values() if isinstance(v, np.ndarray))
    assert nbytes / seen < 10
    h2 = PairHistory(100000, 0.8, 0.9, 0.02, 2)
    h2.load_state_dict(state)
    np.testing.assert_array_equal(h2.last, h.last)  # NaN == NaN for array_equal here
    np.testing.assert_array_equal(h2.strikes, h.strikes)
    assert h2.high == h.high and h2.unlearnable == h.unlearnable > 0
    assert h.unlearnable == int(np.count_nonzero(h.strikes >= 2))
    with pytest.raises(ValueError, match="--reset-dataloader"):
        PairHistory(99999, 0.8, 0.9, 0.02, 2).load_state_dict(state)


def test_history_keeps_the_last_loss_of_a_repeated_id():
    h = PairHistory(10, 0.8, 0.9, 0.02, 2)
    h.observe(np.array([3, 3, 4]), np.array([9.0, 2.0, 5.0]))
    assert float(h.last[3]) == 2.0 and h.unlearnable == 0


# -- a simulated stream ------------------------------------------------------------------
def _simulated_corpus(tmp_path, n=3000, seed=0):
    """Kinds: 40% learnable, 45% already learned, 15% noise. Learned pairs use other words
    than the rest; noise pairs draw their words exactly like learnable ones, so their TF-IDF
    rows look clean."""
    rng = np.random.default_rng(seed)
    kind = rng.choice(3, size=n, p=[0.40, 0.45, 0.15])
    sents = [rng.integers(1, 60, size=rng.integers(4, 12)) if k == LEARNED
             else rng.integers(60, 200, size=rng.integers(4, 12)) for k in kind]
    offsets = np.cumsum([0] + [len(s) for s in sents])
    counts = count_matrix(np.concatenate(sents), offsets, 200)
    FeatureStore.save(str(tmp_path / "f"), tfidf_features(counts, counts), {"fingerprint": "x"})
    base = np.select([kind == LEARNABLE, kind == LEARNED],
                     [rng.uniform(5.5, 7.0, n), rng.uniform(0.8, 1.2, n)],
                     rng.uniform(7.0, 8.0, n))
    return FeatureStore.open(str(tmp_path / "f")), kind, base


def _run_stream(store, kind, base, rule, passes=5, seed=1):
    """The Boss's loss of a pair: learnable pairs fall 5% per visit, the others stay flat,
    all with 2% log-normal noise (dropout). Candidates are accepted by the rule."""
    rng = np.random.default_rng(seed)
    hp = AssistantHParams(rule=rule, lambda_max=0.5, warmup=5)
    assistant = Assistant(store, hp)
    visits = np.zeros(len(kind), np.int64)
    for epoch in range(1, passes + 1):
        assistant.begin_pass(epoch)
        for chunk in np.array_split(rng.permutation(len(kind)), len(kind) // 100):
            p = assistant.accept_probability(chunk)
            ids = chunk[rng.random(len(chunk)) < p]
            decay = np.where(kind[ids] == LEARNABLE, 0.95 ** visits[ids], 1.0)
            losses = base[ids] * decay * np.exp(rng.normal(0, 0.02, len(ids)))
            assistant.learn(ids, losses)
            visits[ids] += 1
    p = assistant.accept_probability(np.arange(len(kind)))
    return assistant, p, {k: float(p[kind == k].mean()) for k in (LEARNABLE, LEARNED, NOISE)}


def test_learnable_rule_skips_learned_and_noise_pairs_paper_keeps_noise(tmp_path):
    store, kind, base = _simulated_corpus(tmp_path)
    paper, p_paper, by_kind_paper = _run_stream(store, kind, base, "paper")
    ours, p_ours, by_kind = _run_stream(store, kind, base, "learnable")
    for a, p in ((paper, p_paper), (ours, p_ours)):
        assert a.schedule.lam > 0.4  # the Assistant is trusted, so the rule matters
        assert p.min() >= 1 - a.hparams.lambda_max - 1e-9  # nobody is excluded for good
    # the paper's rule cannot tell noise from learnable pairs: it keeps noise at least as often
    assert by_kind_paper[NOISE] >= by_kind_paper[LEARNABLE] - 0.02
    assert by_kind_paper[LEARNED] < by_kind_paper[LEARNABLE] - 0.2
    # the learnable rule keeps learnable pairs clearly more often than both other kinds
    assert by_kind[LEARNABLE] > by_kind[LEARNED] + 0.25
    assert by_kind[LEARNABLE] > by_kind[NOISE] + 0.25
    assert by_kind[NOISE] < by_kind_paper[NOISE] - 0.2
    flagged = ours.history.strikes >= ours.hparams.noise_patience
    assert flagged[kind == NOISE].mean() > 0.6 > 0.1 > flagged[kind == LEARNABLE].mean()
    assert ours.stats["unlearnable"] == int(flagged.sum())
    # the mark rests on the pair's own losses, not on g: lambda_k does not cap it
    ours.schedule.lam = 0.1
    p_low = ours.accept_probability(np.arange(len(kind)))
    np.testing.assert_allclose(p_low[flagged], 1 - ours.hparams.lambda_max)
    assert p_low[~flagged].min() >= 0.9 - 1e-9


def test_noise_rule_skips_only_the_pairs_taken_for_noise(tmp_path):
    store, kind, base = _simulated_corpus(tmp_path)
    ours, p, by_kind = _run_stream(store, kind, base, "noise")
    flagged = ours.history.strikes >= ours.hparams.noise_patience
    assert flagged[kind == NOISE].mean() > 0.6 > 0.1 > flagged[kind == LEARNABLE].mean()
    assert ours.stats["unlearnable"] == int(flagged.sum())
    # learned pairs are taken as often as learnable ones: only the noise mark skips
    np.testing.assert_allclose(p[~flagged], 1.0)
    np.testing.assert_allclose(p[flagged], 1 - ours.hparams.lambda_max)
    assert by_kind[LEARNED] > 0.97 and by_kind[NOISE] < by_kind[LEARNABLE] - 0.25
    # before any loss, the rule takes every pair
    fresh = Assistant(store, AssistantHParams(rule="noise"))
    np.testing.assert_array_equal(fresh.accept_probability(np.arange(50)), 1.0)

"""The Assistant: non-finite losses, rules, hyperparameter checks, state."""

import numpy as np
import torch
import pytest

from autoassist_fairseq.assistant import Assistant, AssistantHParams
from autoassist_fairseq.assistant.schedule import AssistantSchedule, update_threshold
from autoassist_fairseq.features.store import FeatureStore
from autoassist_fairseq.features.tfidf import count_matrix, tfidf_features


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    rng = np.random.default_rng(0)
    sents = [rng.integers(1, 100, size=rng.integers(3, 10)) for _ in range(600)]
    offsets = np.cumsum([0] + [len(s) for s in sents])
    C = count_matrix(np.concatenate(sents), offsets, 100)
    prefix = str(tmp_path_factory.mktemp("store") / "f")
    FeatureStore.save(prefix, tfidf_features(C, C), {"fingerprint": "x"})
    return FeatureStore.open(prefix)


def _trained(store, rule="paper", batches=20, **kw):
    rng = np.random.default_rng(1)
    a = Assistant(store, AssistantHParams(rule=rule, warmup=0, **kw))
    for _ in range(batches):
        ids = rng.choice(600, 40, replace=False)
        a.learn(ids, rng.gamma(3.0, 1.0, 40))
    return a


def _snapshot(a):
    return (a.model.theta.copy(), a.model.bias, a.schedule.state_dict())


@pytest.mark.parametrize("rule", ["paper", "learnable"])
@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_batch_of_nonfinite_losses_changes_nothing(store, rule, bad):
    a = _trained(store, rule)
    theta, bias, sched = _snapshot(a)
    history = a.history.state_dict() if a.history else None
    assert np.isnan(a.learn(np.arange(5), np.full(5, bad)))
    np.testing.assert_array_equal(a.model.theta, theta)
    assert a.model.bias == bias and a.schedule.state_dict() == sched
    assert a.stats["nonfinite"] == 5
    if history is not None:
        after = a.history.state_dict()
        np.testing.assert_array_equal(after["ids"], history["ids"])
        np.testing.assert_array_equal(after["loss"], history["loss"])
    a.learn(np.arange(3), np.array([np.nan, np.inf, np.nan]))
    assert a.stats["nonfinite"] == 8  # cumulative


def test_mixed_batch_learns_from_its_finite_part(store):
    a, b = _trained(store), _trained(store)
    ids = np.arange(100, 140)
    losses = np.random.default_rng(5).gamma(3.0, 1.0, 40)
    poisoned = losses.copy()
    poisoned[[3, 17, 30]] = [np.inf, np.nan, -np.inf]
    keep = np.isfinite(poisoned)
    acc_a = a.learn(ids, poisoned)
    acc_b = b.learn(ids[keep], losses[keep])
    assert acc_a == acc_b and np.isfinite(a.stats["threshold"])
    np.testing.assert_array_equal(a.model.theta, b.model.theta)
    assert a.stats["threshold"] == b.stats["threshold"] and a.stats["lambda"] == b.stats["lambda"]
    assert a.stats["nonfinite"] == 3 and b.stats["nonfinite"] == 0


def test_update_threshold_refuses_nonfinite():
    assert update_threshold(2.0, np.array([4.0]), 0.5) == 3.0
    for bad in (np.array([1.0, np.inf]), np.array([np.nan]), np.zeros(0)):
        with pytest.raises(ValueError, match="finite"):
            update_threshold(2.0, bad, 0.5)


def test_chance_guesses_the_majority_so_far_without_peeking_at_the_batch():
    """The chance baseline guesses the label that was the majority of the batches before
    (the first batch, with none before, its own): when the majority flips, the guess is
    wrong on the new batch, as a constant predictor's would be."""
    sched = AssistantSchedule(threshold_decay=0.9, accuracy_decay=0.5, lambda_max=0.9,
                              warmup=0)
    probs = np.full(10, 0.9)  # the predictions: all "hard"

    def batch(hard):
        return np.array([1.0] * hard + [0.0] * (10 - hard))

    # (hard labels of 10, the guess's chance accuracy on the batch, running positive rate):
    # batch 1 guesses its own majority (hard); batch 2 the majority so far (hard: a peek at
    # its own, easy, would be right on 8); batch 3 still hard (0.55 so far); batch 4 easy
    # (0.375 so far) where this batch is mostly hard
    steps = [(9, 0.9, 0.9), (2, 0.2, 0.55), (2, 0.2, 0.375), (8, 0.2, 0.5875)]
    chance = accuracy = None
    for hard, right, rate in steps:
        got = sched.observe(probs, batch(hard))
        assert got == pytest.approx(hard / 10)
        chance = right if chance is None else 0.5 * chance + 0.5 * right
        accuracy = got if accuracy is None else 0.5 * accuracy + 0.5 * got
        assert sched.chance == pytest.approx(chance), (hard, sched.chance)
        assert sched.positive_rate == pytest.approx(rate)
    assert chance == pytest.approx(0.2875) and accuracy == pytest.approx(0.5875)
    # lambda follows the accuracy over that baseline
    assert sched.lam == pytest.approx((accuracy - chance) / (1 - chance))


def test_learn_rejects_mismatched_lengths(store):
    with pytest.raises(ValueError, match="3 ids but"):
        Assistant(store, AssistantHParams()).learn(np.arange(3), np.ones(2))


def test_stats_keys(store):
    a = _trained(store, "learnable")
    assert {"threshold", "lambda", "accuracy", "chance", "loss_batches", "nonfinite",
            "unlearnable"} <= set(a.stats)
    assert a.stats["loss_batches"] == 20


def test_random_rule_follows_the_pass_and_still_learns(store):
    # losses the features predict (pairs with a source word below 12 are hard: about half)
    hard = np.asarray(store.rows(np.arange(600))[:, 1:12].sum(axis=1)).ravel() > 0
    losses = np.where(hard, 5.0, 1.0)
    rng = np.random.default_rng(2)
    arms = {rule: Assistant(store, AssistantHParams(rule=rule, warmup=0,
                                                    random_rates="1.0,0.8,0.5"))
            for rule in ("random", "paper")}
    for _ in range(100):
        ids = rng.choice(600, 40, replace=False)
        for a in arms.values():
            a.learn(ids, losses[ids])
    a, paper = arms["random"], arms["paper"]
    assert a.stats == paper.stats and a.stats["lambda"] > 0.5  # learns like the paper's
    ids = np.arange(600)
    assert np.ptp(paper.accept_probability(ids)) > 0.3
    for epoch, rate in ((1, 1.0), (2, 0.8), (3, 0.5), (7, 0.5)):
        a.begin_pass(epoch)
        np.testing.assert_array_equal(a.accept_probability(ids), rate)  # g does not leak


@pytest.mark.parametrize("rule", ["paper", "random", "learnable", "noise"])
def test_state_round_trip(store, rule):
    a = _trained(store, rule, random_rates="0.7")
    a.learn(np.arange(2), np.array([np.nan, 1.0]))
    b = Assistant(store, AssistantHParams(rule=rule, random_rates="0.7"))
    b.load_state_dict(a.state_dict())
    assert b.stats == a.stats
    ids = np.arange(600)
    np.testing.assert_allclose(b.accept_probability(ids), a.accept_probability(ids), rtol=1e-5)
    if rule in ("learnable", "noise"):
        assert a.stats["unlearnable"] == b.stats["unlearnable"]
        np.testing.assert_array_equal(b.history.last, a.history.last)
        np.testing.assert_array_equal(b.history.strikes, a.history.strikes)


@pytest.mark.parametrize("rule", ["paper", "random", "learnable", "noise"])
def test_state_holds_only_types_every_rank_can_receive(store, rule):
    """fairseq broadcasts a checkpoint's tensors to every rank at a resume; gloo takes no
    unsigned integer type but uint8 (a uint16 or uint32 array stops a two-worker resume)."""
    from autoassist_fairseq.data.arrays import arrays_to_tensors

    state = arrays_to_tensors(_trained(store, rule, random_rates="0.7").state_dict())
    gloo = {torch.uint8, torch.int8, torch.int32, torch.int64, torch.float16, torch.float32,
            torch.float64, torch.bool}

    def tensors(obj):
        if isinstance(obj, dict):
            return [t for v in obj.values() for t in tensors(v)]
        if isinstance(obj, list):
            return [t for v in obj for t in tensors(v)]
        return [obj] if isinstance(obj, torch.Tensor) else []

    found = tensors(state)
    assert found and all(t.dtype in gloo for t in found), {t.dtype for t in found}
    assert state["visits"]["visits"].sum() > 0  # every rule records the pairs' visits


def test_state_crosses_rules(store):
    paper = _trained(store, "paper")
    learnable = Assistant(store, AssistantHParams(rule="learnable"))
    learnable.load_state_dict(_trained(store, "learnable").state_dict())
    assert learnable.history.high is not None
    learnable.load_state_dict(paper.state_dict())  # no history saved: starts empty
    assert learnable.history.high is None and np.isnan(learnable.history.last).all()
    Assistant(store, AssistantHParams(rule="paper")).load_state_dict(
        _trained(store, "learnable").state_dict())


def test_a_lower_lambda_max_holds_from_the_first_window_after_a_resume(store):
    """A state saved with lambda_k = 0.9 and loaded under --assistant-lambda-max 0.3 keeps
    the new floor 1 - 0.3 before any loss arrives; under a warm-up not yet passed, lambda_k
    is 0."""
    saved = _trained(store, "paper", batches=60, lambda_max=0.9).state_dict()
    saved["schedule"]["lam"] = 0.9
    lower = Assistant(store, AssistantHParams(rule="paper", lambda_max=0.3, warmup=0))
    lower.load_state_dict(saved)
    assert lower.stats["lambda"] == 0.3
    assert lower.accept_probability(np.arange(600)).min() >= 0.7 - 1e-9
    longer = Assistant(store, AssistantHParams(rule="paper", warmup=1000))
    longer.load_state_dict(saved)
    assert longer.stats["lambda"] == 0.0


def test_nonfinite_features_stop_the_assistant_with_the_fix(store):
    """A NaN feature value would make every later P(accept) NaN, so that no pair is ever
    taken: learning from it raises, naming the feature file and the rate."""
    a = Assistant(store, AssistantHParams(rule="paper", warmup=0))
    rows = store.rows(np.arange(40)).copy()
    rows.data[0] = np.nan
    with pytest.raises(FloatingPointError, match=r"\(--assistant-lr 4.0\): the feature file "
                                                 r"holds non-finite values, or the rate is too "
                                                 r"high; rebuild the features with "
                                                 r"autoassist-features, or lower --assistant-lr"):
        a.model.update(rows, np.ones(40))


def test_the_weight_and_accuracy_decay_flags_take_effect(store):
    """Issue 48: --assistant-weight-decay and --assistant-accuracy-decay, as fairseq-train's
    parser reads them, reach the Assistant the task builds (check_config ->
    AssistantHParams): theta shrinks by (1 - gamma) per update, and the accuracy lambda_k
    follows is the EMA of the batches' accuracies with that factor (0: the last batch's)."""
    from task_helpers import task_config

    from autoassist_fairseq.tasks.config import check_config

    def trained(*flags):
        hparams, _ = check_config(task_config("--assistant-warmup", "0", *flags))
        a = Assistant(store, hparams)
        accuracies, observe = [], a.schedule.observe
        a.schedule.observe = lambda probs, labels: accuracies.append(observe(probs, labels)) \
            or accuracies[-1]
        rng = np.random.default_rng(1)
        for _ in range(20):
            ids = rng.choice(600, 40, replace=False)
            a.learn(ids, rng.gamma(3.0, 1.0, 40))
        return a, accuracies

    default, accuracies = trained()
    ema = accuracies[0]
    for accuracy in accuracies[1:]:
        ema = 0.98 * ema + 0.02 * accuracy
    assert default.stats["accuracy"] == pytest.approx(ema)
    last, accuracies = trained("--assistant-accuracy-decay", "0")
    assert last.stats["accuracy"] == pytest.approx(accuracies[-1])
    assert last.stats["accuracy"] != pytest.approx(default.stats["accuracy"])
    np.testing.assert_allclose(last.model.theta, default.model.theta)  # g learns alike
    shrunk, _ = trained("--assistant-weight-decay", "0.3")
    assert np.linalg.norm(shrunk.model.theta) < 0.5 * np.linalg.norm(default.model.theta)
